"""The Metal backend's Python side on Linux: build, environment, refusals,
status classification, target warnings and verify (real builds, real files)."""

import hashlib
import stat

import pytest
from click.testing import CliRunner

from capshim import profiles
from capshim.backends import metal
from capshim.backends.metal import compile as metal_build
from capshim.native.build import run_compiler
from capshim.cli import main
from capshim.errors import BuildError, UsageError

REFUSAL = ("Metal is only available on macOS; the Metal shim's logic is tested on Linux "
           "with the GNU Objective-C runtime")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _metal(caps: str) -> profiles.Profile:
    return profiles.parse('name = "t"\napi = "metal"\ndirection = "raise"\nversion = 1\n'
                          f'description = "d"\n[capabilities]\n{caps}\n', "test")


@pytest.mark.slow
def test_build_caches_by_source_hash_and_writes_sums(cache):
    arts = metal.build()
    root = arts["shim"].parent
    assert root.parent == cache / "capshim" / "native"
    assert root.name.startswith("metal-") and len(root.name) == len("metal-") + 12
    assert all(p.is_file() for p in arts.values())
    mtime = arts["shim"].stat().st_mtime_ns
    assert metal.build()["shim"].stat().st_mtime_ns == mtime  # cached
    assert metal.build(force=True)["shim"].stat().st_mtime_ns != mtime
    ok, detail = metal.check_sums(root)
    assert ok, detail
    sums = (root / "SHA256SUMS").read_text()
    assert f"{hashlib.sha256(arts['shim'].read_bytes()).hexdigest()}  {metal.SO_NAME}" in sums


@pytest.mark.slow
def test_a_corrupted_cached_shim_is_built_again(cache):
    arts = metal.build()
    arts["shim"].write_bytes(b"\0" * 64)  # a truncated or damaged file in the cache
    again = metal.build()
    ok, detail = metal.check_sums(again["shim"].parent)
    assert ok, detail
    assert again["shim"].read_bytes()[:4] == b"\x7fELF"


def test_build_error_names_the_command(tmp_path):
    bad = tmp_path / "broken.c"
    bad.write_text("int main(void) { return undeclared; }\n")
    with pytest.raises(BuildError) as exc:
        run_compiler(["gcc", *metal_build.WARN_FLAGS, str(bad), "-o", str(tmp_path / "x")])
    assert "gcc" in str(exc.value) and str(bad) in str(exc.value)
    assert exc.value.exit_code == 2
    with pytest.raises(BuildError, match="no-such-compiler.* not found"):
        run_compiler(["no-such-compiler", "x.c"])


def test_shim_env_maps_profile_keys_exactly():
    env = metal.shim_env(profiles.load("metal-apple9"), "/x/libcapshim-metal.dylib",
                         "/tmp/s.jsonl", inherit=False, quiet=True)
    assert env == {"DYLD_INSERT_LIBRARIES": "/x/libcapshim-metal.dylib",
                   "CAPSHIM_METAL_APPLE_FAMILY_MAX": "1009",
                   "CAPSHIM_METAL_MAX_THREADGROUP_MEMORY": "65536",
                   "CAPSHIM_STATUS_FILE": "/tmp/s.jsonl", "CAPSHIM_QUIET": "1",
                   "CAPSHIM_INHERIT": "0"}
    p = _metal("recommendedMaxWorkingSetSize = 17179869184\nforceFamilies = [5001, 3004]")
    env = metal.shim_env(p, "/s", None, inherit=True, quiet=False, existing="/other.dylib")
    assert env["DYLD_INSERT_LIBRARIES"] == "/other.dylib:/s"
    assert env["CAPSHIM_METAL_RECOMMENDED_WORKING_SET_SIZE"] == "17179869184"
    assert env["CAPSHIM_METAL_FORCE_FAMILIES"] == "3004,5001"
    assert env["CAPSHIM_INHERIT"] == "1" and "CAPSHIM_STATUS_FILE" not in env


def test_non_metal_or_empty_profiles_are_refused():
    with pytest.raises(UsageError, match="--profile vulkan-paravirt: api is 'vulkan'"):
        metal.shim_env(profiles.load("vulkan-paravirt"), "/s", None, False, False)
    with pytest.raises(UsageError, match="sets no Metal capability"):
        metal.shim_env(_metal(""), "/s", None, False, False)


def test_launch_env_and_probe_refuse_on_linux():
    with pytest.raises(UsageError) as exc:
        metal.launch_env(profiles.load("metal-apple9"), "/tmp/s", False, False)
    assert REFUSAL in str(exc.value) and exc.value.exit_code == 2
    with pytest.raises(UsageError) as exc:
        metal.probe()
    assert REFUSAL in str(exc.value)


@pytest.mark.parametrize("events, verdict", [
    ([], "inert"),
    ([{"event": "loaded"}], "inert"),
    ([{"event": "loaded"}, {"event": "config", "accepted": True}], "inert"),
    ([{"event": "loaded"}, {"event": "config", "accepted": True},
      {"event": "hooks", "installed": [], "missing": ["-[X maxThreadgroupMemoryLength]"]}], "inert"),
    ([{"event": "loaded"}, {"event": "config", "accepted": True},
      {"event": "hooks", "installed": ["-[X supportsFamily:]"], "missing": []}], "active"),
    ([{"event": "loaded"}, {"event": "config", "accepted": False, "reason": "r"}], "invalid"),
])
def test_summarize_status(events, verdict):
    assert metal.summarize_status(events) == verdict


def test_read_status_keeps_metal_lines_only(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text('{"shim":"metal","pid":1,"event":"loaded"}\nnot json\n'
                 '{"shim":"vulkan","pid":1,"event":"loaded"}\n')
    assert metal.read_status(f) == [{"shim": "metal", "pid": 1, "event": "loaded"}]
    assert metal.read_status(tmp_path / "missing") == []


def test_warn_target_sip_paths_scripts_and_setuid(tmp_path):
    assert metal.sip_protected("/usr/bin/python3") and metal.sip_protected("/System/x")
    assert not metal.sip_protected("/opt/homebrew/bin/llama-bench")
    w = metal.warn_target(["/usr/bin/env", "true"])
    assert len(w) == 1 and "/usr/bin/env is SIP-protected" in w[0]
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\nexec llama-bench\n")
    script.chmod(0o755)
    w = metal.warn_target([str(script)])
    assert any("the script's interpreter /bin/sh is SIP-protected" in x for x in w)
    envscript = tmp_path / "run2"
    envscript.write_text("#!/usr/bin/env sh\n")
    envscript.chmod(0o755)
    assert any("interpreter" in x for x in metal.warn_target([str(envscript)]))
    plain = tmp_path / "tool"
    plain.write_bytes(b"\x7fELF")
    plain.chmod(0o755)
    assert metal.warn_target([str(plain)]) == []
    plain.chmod(0o755 | stat.S_ISUID)
    assert any("setuid" in x for x in metal.warn_target([str(plain)]))
    assert "not found" in metal.warn_target(["no-such-program-xyz"])[0]
    assert metal.warn_target([]) == []


def test_parse_codesign_output():
    hardened = ("Executable=/opt/x\nCodeDirectory v=20500 size=1 flags=0x10000(runtime) "
                "hashes=1+7 location=embedded\n")
    assert metal.parse_codesign(hardened) == {"runtime": True, "restrict": False,
                                              "allow_dyld_env": False,
                                              "disable_library_validation": False}
    ok = hardened + "[Key] com.apple.security.cs.allow-dyld-environment-variables\n"
    assert metal.parse_codesign(ok)["allow_dyld_env"] is True
    adhoc = "CodeDirectory v=20400 size=1 flags=0x2(adhoc) hashes=1+0\n"
    assert metal.parse_codesign(adhoc)["runtime"] is False
    assert metal.parse_codesign("flags=0x10800(restrict,runtime)")["restrict"] is True


def test_deny_list_and_sums_detect_tampering(tmp_path):
    assert metal.deny_list_hits(b"xx mach_absolute_time yy LUME_METAL_FAMILY_MAX") == \
        ["mach_absolute_time", "LUME_METAL_FAMILY_MAX"]
    assert metal.deny_list_hits(b"LUME_METAL_APPLE_FAMILY_MAX") == []
    (tmp_path / "a").write_bytes(b"one")
    metal_build._write_sums(tmp_path, [tmp_path / "a"])
    assert metal.check_sums(tmp_path)[0]
    (tmp_path / "a").write_bytes(b"two")
    ok, detail = metal.check_sums(tmp_path)
    assert not ok and "a" in detail


@pytest.mark.slow
def test_verify_on_linux_never_reports_macos_checks_as_passed(cache):
    checks = {c["check"]: c for c in metal.verify()}
    assert checks["architectures"]["status"] == metal.SKIPPED
    assert checks["signature"]["status"] == metal.SKIPPED
    assert checks["answers change on a real Metal device"]["status"] == metal.SKIPPED
    for name in ("deny-list strings", "SHA256SUMS", "exports only the interposers",
                 "answers change with a profile (GNU-runtime stand-in)",
                 "answers stay stock with a broken configuration (GNU-runtime stand-in)"):
        assert checks[name]["status"] == "passed", checks[name]


@pytest.mark.slow
def test_verify_fails_when_an_artifact_is_tampered(cache):
    arts = metal.build()
    data = arts["shim"].read_bytes()
    arts["shim"].write_bytes(data + b"clock_gettime")
    checks = {c["check"]: c for c in metal.verify()}
    assert checks["deny-list strings"]["status"] == "failed"
    assert checks["SHA256SUMS"]["status"] == "failed"
    r = CliRunner().invoke(main, ["verify"])
    assert r.exit_code == 1


@pytest.mark.slow
def test_cli_verify_json(cache):
    import json
    r = CliRunner().invoke(main, ["verify", "--json"])
    assert r.exit_code == 0, r.output
    checks = json.loads(r.output)
    assert {c["status"] for c in checks if c["check"].startswith("metal")} == {"passed", metal.SKIPPED}
    # the other APIs' checks pass, or are skipped with a reason (the CUDA probe of a real GPU, here)
    assert all(c["status"] == "passed" or c["status"].startswith("skipped (") for c in checks), checks


def test_sources_have_no_deny_listed_strings():
    for p in metal.NATIVE_DIR.iterdir():
        if p.suffix in (".c", ".h") and p.name != "standin_metal.m":
            assert metal.deny_list_hits(p.read_bytes()) == [], p
