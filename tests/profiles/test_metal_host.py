"""Host ceilings for Metal (issue 21, item 6): a host capture read through the one JSON reader,
``capshim profile from-host`` (exactly the host's Apple family and threadgroup memory, never more)
and ``capshim profile check --host`` (each answer above the host, and by how much), against the
committed M1 Ultra capture (tests/fixtures/metal-host/SOURCE.md) and hostile captures. The
captures made by the probe through the GNU Objective-C stand-in:
tests/backends/test_metal_host_capture.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from capshim import profiles
from capshim.cli.app import main
from capshim.errors import EXIT_INERT, CapshimError
from capshim.profiles import metalhost

M1_ULTRA = Path(__file__).resolve().parents[1] / "fixtures" / "metal-host" / "m1-ultra.json"


def _cli(*args: str):
    r = CliRunner().invoke(main, list(args))
    assert not isinstance(r.exception, (TypeError, AttributeError, KeyError, ValueError)), r.exception
    return r


def _capture(tmp_path: Path, change=None, text: str | None = None) -> Path:
    data = json.loads(M1_ULTRA.read_text())
    if change:
        change(data)
    f = tmp_path / "capture.json"
    f.write_text(text if text is not None else json.dumps(data), encoding="utf-8")
    return f


# ---- the committed M1 Ultra capture -----------------------------------------------------

def test_the_m1_ultra_capture_reads_as_published():
    cap = metalhost.read_capture(M1_ULTRA)
    assert (cap.device, cap.apple_family, cap.threadgroup) == ("Apple M1 Ultra", 1007, 32768)
    assert cap.highest == {"apple": 1007, "mac": None, "common": 3003, "metal": 5002}
    assert cap.label() == "Apple M1 Ultra (macOS 26.6.1)"


def test_the_release_profile_is_above_the_m1_ultra_host_and_says_by_how_much():
    """Cua's release profile (metal-apple9: Apple 9, 65536 bytes) over its own M1 Ultra host."""
    found, notes = metalhost.above_host(profiles.load("metal-apple9"), metalhost.read_capture(M1_ULTRA))
    assert [(f.key, f.profile, f.host, f.over, f.unit) for f in found] == [
        ("appleFamilyMax", 1009, 1007, 2, "families"),
        ("maxThreadgroupMemoryLength", 65536, 32768, 32768, "bytes")]
    assert "Apple9 (1009) is above the host's Apple7 (1007) by 2 families" in found[0].message
    assert "by 32768 bytes (2.00x)" in found[1].message
    assert notes == []


def test_cli_check_host_warns_exit_0_and_3_with_strict():
    r = _cli("profile", "check", "--host", str(M1_ULTRA), "metal-apple9")
    assert r.exit_code == 0, r.output
    assert "2 answers above the host" in r.stdout
    assert r.stderr.count("warning: ") == 2 and "by 2 families" in r.stderr and "by 32768 bytes" in r.stderr
    assert _cli("profile", "check", "--host", str(M1_ULTRA), "--strict", "metal-apple9").exit_code == EXIT_INERT


def test_cli_check_host_json():
    r = _cli("profile", "check", "--host", str(M1_ULTRA), "--json", "metal-apple9")
    assert r.exit_code == 0
    out = json.loads(r.stdout)
    assert out["profile"] == "metal-apple9" and out["host"]["device"] == "Apple M1 Ultra"
    assert [(a["key"], a["over"]) for a in out["above_host"]] == [("appleFamilyMax", 2),
                                                                   ("maxThreadgroupMemoryLength", 32768)]


def test_from_host_answers_exactly_the_host_and_never_more(tmp_path):
    cap = metalhost.read_capture(M1_ULTRA)
    p = metalhost.profile_from_host(cap)
    assert (p.name, p.api, p.direction) == ("host-apple-m1-ultra", "metal", "raise")
    assert p.capabilities == {"appleFamilyMax": 1007, "maxThreadgroupMemoryLength": 32768}
    assert p.device_name == ""  # off by default
    assert metalhost.above_host(p, cap) == ([], [])
    named = metalhost.profile_from_host(cap, name="m1", with_name=True)
    assert named.name == "m1" and named.device_name == "Apple M1 Ultra"
    assert metalhost.above_host(named, cap) == ([], [])


def test_cli_from_host_writes_a_profile_that_checks_clean(tmp_path):
    out = tmp_path / "host.toml"
    r = _cli("profile", "from-host", str(M1_ULTRA), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "appleFamilyMax = 1007, maxThreadgroupMemoryLength = 32768" in r.stderr
    p = profiles.load(str(out))
    assert p.capabilities == {"appleFamilyMax": 1007, "maxThreadgroupMemoryLength": 32768}
    r = _cli("profile", "check", "--host", str(M1_ULTRA), "--strict", str(out))
    assert r.exit_code == 0 and "nothing above the host" in r.stdout and r.stderr == ""
    again = _cli("profile", "from-host", str(M1_ULTRA), "-o", str(out))
    assert again.exit_code == 2 and "exists" in again.stderr
    stdout = _cli("profile", "from-host", str(M1_ULTRA))
    assert profiles.parse(stdout.stdout, "s").capabilities == p.capabilities


def test_above_host_covers_working_set_forced_families_and_the_name(tmp_path):
    text = ('name = "x"\napi = "metal"\ndirection = "raise"\nversion = 1\ndescription = "d"\n[capabilities]\n'
            'appleFamilyMax = 1007\nrecommendedMaxWorkingSetSize = 200000000000\nforceFamilies = [5001, 5003, 3004]\n'
            'deviceName = "Apple M3 Max"\n')
    found, notes = metalhost.above_host(profiles.parse(text, "x.toml"), metalhost.read_capture(M1_ULTRA))
    assert [(f.key, f.profile, f.over) for f in found] == [
        ("recommendedMaxWorkingSetSize", 200000000000, 200000000000 - 115448730000),
        ("forceFamilies", 3004, 1), ("forceFamilies", 5003, 1)]
    assert len(notes) == 1 and "'Apple M3 Max' is not the host's name" in notes[0]


def test_an_unknown_host_value_is_a_note_not_a_pass(tmp_path):
    f = _capture(tmp_path, lambda d: d["stock"].update(maxThreadgroupMemoryLength=None))
    found, notes = metalhost.above_host(profiles.load("metal-apple9"), metalhost.read_capture(f))
    assert [x.key for x in found] == ["appleFamilyMax"]
    assert notes == ["maxThreadgroupMemoryLength = 65536: not checked, the capture has no maxThreadgroupMemoryLength"]


# ---- hostile captures ---------------------------------------------------------------------

@pytest.mark.parametrize("change, text, words", [
    (None, "{not json", "invalid JSON"),
    (None, "", "invalid JSON"),
    (lambda d: d.update(api="vulkan"), None, "$.api: a capture of 'vulkan', not of a Metal host"),
    (lambda d: d.pop("api"), None, "'api' is a required property"),
    (lambda d: d.update(schema=2), None, "$.schema"),
    (lambda d: d["stock"]["highest"].update(apple=2005), None, "$.stock.highest.apple"),
    (lambda d: d["stock"]["highest"].update(apple=1000), None, "$.stock.highest.apple"),
    (lambda d: d["stock"]["highest"].update(apple="1007"), None, "$.stock.highest.apple"),
    (lambda d: d["stock"]["highest"].update(metal=1009), None, "$.stock.highest.metal"),
    (lambda d: d["stock"].update(maxThreadgroupMemoryLength=-1), None, "$.stock.maxThreadgroupMemoryLength"),
    (lambda d: d["stock"].update(recommendedMaxWorkingSetSize=2 ** 64), None, "$.stock.recommendedMaxWorkingSetSize"),
    (lambda d: d["stock"].update(device="Apple\u001b[31m M1"), None, "$.stock.device"),
    (lambda d: d["stock"].update(device="\u0085"), None, "$.stock.device"),
    (lambda d: d["stock"].update(device="x" * 300), None, "300 bytes in UTF-8: longer than 255"),
    (lambda d: d["os"].update(vm=True), None, "made inside a VM guest"),
])
def test_a_bad_capture_is_refused_by_both_commands_naming_the_file(tmp_path, change, text, words):
    f = _capture(tmp_path, change, text)
    for flag, args in (("from-host", ("profile", "from-host", str(f))),
                       ("--host", ("profile", "check", "--host", str(f), "metal-apple9"))):
        r = _cli(*args)
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.startswith(f"capshim: {flag}: {f}") and words in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""


def test_a_khronos_capture_or_a_vulkan_probe_is_not_a_host_capture(tmp_path):
    f = tmp_path / "vp.json"
    f.write_text(json.dumps({"$schema": "https://schema.khronos.org/vulkan/profiles-0.8-latest.json",
                             "capabilities": {}, "profiles": {}}))
    r = _cli("profile", "from-host", str(f))
    assert r.exit_code == 2 and "'schema' is a required property" in r.stderr
    assert "capshim probe --api metal --json" in r.stderr


def test_a_capture_over_the_size_limit_is_refused(tmp_path):
    f = tmp_path / "big.json"
    f.write_bytes(b" " * (metalhost.CAPTURE_MAX_BYTES + 1) + b"{}")
    with pytest.raises(CapshimError) as exc:
        metalhost.read_capture(f)
    assert "larger than" in str(exc.value)


def test_a_capture_with_no_ceiling_writes_no_profile(tmp_path):
    f = _capture(tmp_path, lambda d: (d["stock"]["highest"].update(apple=None),
                                      d["stock"].update(maxThreadgroupMemoryLength=None)))
    r = _cli("profile", "from-host", str(f), "-o", str(tmp_path / "x.toml"))
    assert r.exit_code == 2 and "no ceiling to answer" in r.stderr and not (tmp_path / "x.toml").exists()


def test_check_host_refuses_a_vulkan_profile_and_flags_without_host():
    r = _cli("profile", "check", "--host", str(M1_ULTRA), "vulkan-paravirt")
    assert r.exit_code == 2 and "check an api = \"metal\" profile" in r.stderr
    r = _cli("profile", "check", "--json", "metal-apple9")
    assert r.exit_code == 2 and "go with --host" in r.stderr
    r = _cli("profile", "check", "--host", str(M1_ULTRA), "--device", "0", "metal-apple9")
    assert r.exit_code == 2 and "without a device" in r.stderr


def test_from_host_refuses_a_bad_name():
    r = _cli("profile", "from-host", str(M1_ULTRA), "--name", "Bad Name")
    assert r.exit_code == 2 and "name" in r.stderr
