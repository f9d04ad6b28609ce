"""The backend registry and interface, beyond-device warnings in run and probe (real
loader and lavapipe), and per-API build/verify."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from capshim import backends, launch, profiles, status
from capshim.backends import vulkan
from capshim.errors import UsageError
from capshim.profiles import ondevice
from tests.conftest import REPO, run_capshim

PARAVIRT = profiles.load("vulkan-paravirt")
BEYOND = """name = "beyond"
api = "vulkan"
direction = "raise"
version = 1
description = "answers more than lavapipe has"

[capabilities]
maxComputeSharedMemorySize = 65536

[extensions]
VK_KHR_cooperative_matrix = 2
"""


def test_registry_chooses_one_backend_per_api():
    assert backends.names() == ["vulkan", "metal", "cuda"]
    assert backends.get("vulkan") is vulkan.BACKEND and backends.get("vulkan").name == "vulkan"
    assert backends.get("metal").name == "metal"
    assert backends.default_api("linux") == "vulkan" and backends.default_api("darwin") == "metal"
    assert backends.get("cuda").name == "cuda" and not backends.get("cuda").can_simulate
    with pytest.raises(UsageError, match="api 'opencl': no such backend"):
        backends.get("opencl")
    with pytest.raises(UsageError, match="only the Vulkan layer can simulate"):
        backends.for_profiles(None, profiles.load("t4-class"))
    assert backends.for_profiles(None, None) is None
    assert backends.for_profiles(None, PARAVIRT) is vulkan.BACKEND
    with pytest.raises(UsageError, match="only the Vulkan layer can simulate"):
        backends.for_profiles(None, profiles.load("metal-apple9"))
    with pytest.raises(UsageError, match="different APIs"):
        backends.for_profiles(profiles.load("metal-apple9"), PARAVIRT)


# An API compared with its name ("all", the option value for every API, is not one).
DISPATCH = re.compile(r"""(\bapi\s*[!=]=\s*["'](?!all["']))|(from capshim\.backends import (vulkan|metal))""")


@pytest.mark.parametrize("rel", ["launch.py", "probe.py", "cli", "bench/runner.py", "bench/runs.py"])
def test_no_api_name_dispatch_outside_the_backends(rel):
    path = REPO / "src" / "capshim" / rel
    text = "".join(p.read_text() for p in sorted(path.rglob("*.py"))) if path.is_dir() else path.read_text()
    assert DISPATCH.findall(text) == []


def test_a_third_api_is_one_module_and_one_registry_entry(tmp_path, monkeypatch):
    """A backend registered at run time is used by launch, probe, build/verify
    selection and the bench's shim hashes, with no other file changed."""
    mod = types.ModuleType("capshim_test_fake_backend")
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"fake")

    class Fake(backends.Backend):
        name, shim_label, platforms = "fake", "the fake shim", (sys.platform,)

        def unavailable(self):
            return None

        def build(self, force=False):
            return {"shim": lib}

        def launch_env(self, profile, simulate, status_file, run_dir, inherit=False, quiet=False):
            return {"FAKE_SHIM": profile.name, "CAPSHIM_STATUS_FILE": str(status_file)}

        def requested_shims(self, profile, simulate):
            return ["fake"]

        def probe(self, profile=None, simulate=None, device=0, compare=False):
            return {"api": "fake", "device": device}

        def verify(self):
            return [{"check": "fake: build", "status": "passed", "detail": str(lib)}]

    mod.BACKEND = Fake()
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(backends.REGISTRY, "fake", mod.__name__)
    prof = profiles.Profile(name="f", api="fake", direction="raise", version=1, description="d", source="f.toml")
    out = tmp_path / "env.txt"
    lc = launch.prepare(["sh", "-c", f'echo "$FAKE_SHIM" > "{out}"'], prof, None, run_dir=tmp_path / "run")
    assert lc.backend is mod.BACKEND and lc.shims == ["fake"]
    assert launch.run(lc) == 0 and out.read_text() == "f\n"
    assert lc.states()["fake"].state == "inert"  # the one classifier: nothing loaded
    from capshim import probe
    from capshim.bench import runner
    from capshim.bench.arms import Arm
    from capshim.cli.shims import _selected_backends

    assert probe.run_probe("fake", prof, None, device=3) == {"api": "fake", "device": 3}
    assert [(b.name, why) for b, why in _selected_backends("all")][-1] == ("fake", None)
    assert runner._shim_hashes([Arm("a", profile=prof)])["fake_shim"]["path"] == str(lib)


def test_restore_profile_quotes_any_device_name(stock_probe):
    odd = dict(stock_probe, device=dict(stock_probe["device"], name='GPU "x" \\ y\nz'))
    p = ondevice.restore_profile(odd, PARAVIRT)
    assert p.direction == "raise" and p.description.endswith('GPU "x" \\ y z')
    assert p.capabilities["maxComputeSharedMemorySize"] == stock_probe["capabilities"]["maxComputeSharedMemorySize"]


def _beyond_file(tmp_path: Path) -> Path:
    f = tmp_path / "beyond.toml"
    f.write_text(BEYOND)
    return f


@pytest.mark.slow
def test_run_warns_and_records_each_answer_beyond_the_device(vk_build, stock_probe, tmp_path):
    mem = stock_probe["capabilities"]["maxComputeSharedMemorySize"]
    assert mem < 65536 and "VK_KHR_cooperative_matrix" not in stock_probe["extensions"], "lavapipe expected"
    sf = tmp_path / "s.jsonl"
    r = run_capshim("run", "--profile", str(_beyond_file(tmp_path)), "--status-file", str(sf), "--",
                    str(vk_build.probe), "--create-device", "VK_KHR_cooperative_matrix")
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("capshim: warning:")]
    assert len(warnings) == 1, r.stderr  # one line per profile, each answer named in it (issue 28)
    assert f"1 capability: maxComputeSharedMemorySize 65536 (device: {mem})" in warnings[0]
    assert ("1 extension (the driver does not have it: will be dropped by the loader at vkCreateDevice): "
            "VK_KHR_cooperative_matrix 2") in warnings[0]
    events = [e for e in status.read(sf).events if e["event"] == "beyond_device"]
    assert [(e["schema"], e["shim"], e["layer"], e["key"], e["device"], e["reported"]) for e in events] == [
        (1, "vulkan", vulkan.LAYER_APP, "maxComputeSharedMemorySize", mem, 65536),
        (1, "vulkan", vulkan.LAYER_APP, "VK_KHR_cooperative_matrix", None, 2)]
    # What the note says: the app sees the extension, and vkCreateDevice with it succeeds on a driver without it.
    data = json.loads(r.stdout)
    assert data["extensions"]["VK_KHR_cooperative_matrix"] == 2 and data["create_device"]["result"] == 0
    assert status.classify(status.read(sf), vulkan.LAYER_APP).state == "active"


@pytest.mark.slow
def test_run_strict_exits_3_before_starting_the_command(vk_build, tmp_path):
    marker = tmp_path / "started"
    r = run_capshim("run", "--strict", "--profile", str(_beyond_file(tmp_path)), "--", "touch", str(marker))
    assert r.returncode == 3, r.stderr
    assert "--strict: not starting the command" in r.stderr and not marker.exists()


@pytest.mark.slow
def test_a_restore_profile_gives_no_warning(vk_build, stock_probe, tmp_path):
    restore = tmp_path / "restore.toml"
    restore.write_text(ondevice.restore_profile(stock_probe, PARAVIRT).text)
    sf = tmp_path / "s.jsonl"
    r = run_capshim("run", "--strict", "--simulate", "vulkan-paravirt", "--profile", str(restore),
                    "--status-file", str(sf), "--", str(vk_build.probe))
    assert r.returncode == 0, r.stderr
    # the restore profile itself gives no warning (judged over --simulate's answers); what
    # vulkan-paravirt already matches on this device is one line of its own (issue 20)
    warned = [line for line in r.stderr.splitlines() if "warning" in line]
    assert all(line.startswith("capshim: warning: --simulate builtin:vulkan-paravirt: ") and "change nothing"
               in line for line in warned) and len(warned) <= 1, warned
    assert not [e for e in status.read(sf).events if e["event"] == "beyond_device"]
    assert json.loads(r.stdout)["capabilities"] == stock_probe["capabilities"]


@pytest.mark.slow
def test_probe_warns_lists_and_strict_exits_3(vk_build, stock_probe, tmp_path):
    prof = str(_beyond_file(tmp_path))
    r = run_capshim("probe", "--json", "--profile", prof)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [e["key"] for e in data["beyond_device"]] == ["maxComputeSharedMemorySize", "VK_KHR_cooperative_matrix"]
    assert r.stderr.count("capshim: warning:") == 1  # one line for the profile, both answers in it
    r = run_capshim("probe", "--strict", "--compare", "--profile", prof)
    assert r.returncode == 3 and "will be dropped by the loader at vkCreateDevice" in r.stderr
    assert "maxComputeSharedMemorySize" in r.stdout  # the table is still printed
    r = run_capshim("probe", "--strict", "--json", "--simulate", "vulkan-paravirt")
    assert r.returncode == 0 and "beyond_device" not in json.loads(r.stdout) and "answers more than" not in r.stderr
    # what vulkan-paravirt already matches here is one line, not a failure of --strict (issue 20)
    assert r.stderr.count("capshim: warning:") <= 1 and r.stderr.count("change nothing") == r.stderr.count("warning")


@pytest.mark.slow
def test_run_and_probe_refuse_what_check_against_device_refuses(vk_build, stock_probe, tmp_path):
    assert "VK_KHR_cooperative_matrix" not in stock_probe["extensions"], "lavapipe expected"
    prof = tmp_path / "coop.toml"
    prof.write_text('name = "coop"\napi = "vulkan"\ndirection = "raise"\nversion = 1\ndescription = "d"\n'
                    "[capabilities]\ncooperativeMatrix = true\n")
    marker = tmp_path / "started"
    r = run_capshim("run", "--profile", str(prof), "--", "touch", str(marker))
    assert r.returncode == 2 and not marker.exists(), r.stderr
    assert f"--profile {prof}: cooperativeMatrix answered true" in r.stderr and "Traceback" not in r.stderr
    r = run_capshim("probe", "--json", "--profile", str(prof))
    assert r.returncode == 2 and "cooperativeMatrix answered true" in r.stderr and r.stdout == ""


@pytest.fixture
def no_objc(tmp_path):
    """A PATH whose gcc compiles C but not Objective-C (a machine without gobjc), and an empty cache."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    gcc = bindir / "gcc"
    gcc.write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in objective-c|*.m)\n'
                   "  echo \"gcc: fatal error: cannot execute 'cc1obj': execvp: No such file or directory\" >&2; exit 1;;\n"
                   'esac; done\nexec /usr/bin/gcc "$@"\n')
    gcc.chmod(0o755)
    import os

    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "XDG_CACHE_HOME": str(tmp_path / "cache")}


@pytest.mark.slow
def test_build_skips_metal_without_an_objc_compiler_and_still_builds_vulkan(no_objc):
    r = run_capshim("build", env=no_objc)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^vulkan: library: .*libcapshim_vulkan\.so$", r.stdout, re.M)
    assert "metal:" not in r.stdout
    assert "metal: skipped: no Objective-C compiler" in r.stderr and "cc1obj" in r.stderr
    r = run_capshim("build", "--api", "metal", env=no_objc)
    assert r.returncode == 2 and "--api metal: no Objective-C compiler" in r.stderr
    r = run_capshim("verify", "--json", env=no_objc)
    assert r.returncode == 0, r.stderr
    rows = {c["check"]: c["status"] for c in json.loads(r.stdout)}
    assert rows["metal: build"].startswith("skipped (no Objective-C compiler")
    assert rows["vulkan: answers change with a profile"] == "passed"


@pytest.mark.slow
def test_one_api_failing_to_build_does_not_stop_the_others(tmp_path):
    r = run_capshim("build", env={"CC": "false", "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert r.returncode == 2
    assert "capshim: vulkan: build failed: build failed (exit 1): false" in r.stderr
    assert re.search(r"^metal: shim: .*libcapshim-metal\.so$", r.stdout, re.M) and "vulkan:" not in r.stdout


def test_vulkan_on_macos_is_refused_not_silently_skipped(monkeypatch):
    from click.testing import CliRunner

    from capshim.cli import main

    monkeypatch.setattr(vulkan.sys, "platform", "darwin")
    for cmd in (["build", "--api", "vulkan"], ["verify", "--api", "vulkan"]):
        r = CliRunner().invoke(main, cmd)
        assert r.exit_code == 2, r.output
        assert "--api vulkan: the Vulkan layer builds on Linux only (this is darwin)" in r.output


def test_beyond_device_by_kind_on_a_given_device():
    device = {"device": {"name": "d"}, "extensions": {"VK_KHR_a": 1},
              "capabilities": {"shaderFloat16": False, "shaderInt8": True, "apiVersion": "1.3.230",
                               "subgroupSupportedOperations": 0b0011, "maxComputeSharedMemorySize": 32768,
                               "maxComputeWorkGroupInvocations": 1024}}
    p = profiles.parse('name="x"\napi="vulkan"\ndirection="raise"\nversion=1\ndescription="d"\n[capabilities]\n'
                       'shaderFloat16 = true\nshaderInt8 = true\napiVersion = "1.4.0"\n'
                       'subgroupSupportedOperations = 7\nmaxComputeSharedMemorySize = 32768\n'
                       'maxComputeWorkGroupInvocations = 512\n[extensions]\nVK_KHR_a = 2\nVK_KHR_b = 1\n', "x")
    assert [str(b) for b in ondevice.beyond_device(p, device)] == [
        "shaderFloat16 true (device: false)", "apiVersion 1.4.0 (device: 1.3.230)",
        "subgroupSupportedOperations 7 (device: 3)", "extension VK_KHR_b 1 (the device does not have it)"]
    # the layer keeps the device's own spec version of an extension it lists: not beyond, a warning
    assert [f.message for f in profiles.check_against_device(p, device) if f.key == "extension VK_KHR_a"] == [
        "extension VK_KHR_a = 2: the device lists it with spec version 1, which the layer keeps (a raise adds "
        "only extensions the device lacks)"]
    # a minimum is stronger when smaller; an exact property is check_against_device's, not "more"
    device["capabilities"].update(minSubgroupSize=8, subgroupSize=8, maxSubgroupSize=8)
    p = profiles.parse('name="x"\napi="vulkan"\ndirection="raise"\nversion=1\ndescription="d"\n'
                       'override_exact = ["subgroupSize"]\n[capabilities]\nminSubgroupSize = 4\nsubgroupSize = 16\n', "x")
    assert [str(b) for b in ondevice.beyond_device(p, device)] == ["minSubgroupSize 4 (device: 8)"]


@pytest.mark.slow
def test_metal_verify_names_the_check_that_failed(tmp_path, monkeypatch):
    from capshim.backends.metal import checks as metal_verify

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = metal_verify._probe_once

    def broken_config_dies(probe_bin, env, framework):
        if env.get("LUME_METAL_APPLE_FAMILY_MAX") == "1009x":
            raise UsageError("the probe died")
        return real(probe_bin, env, framework)

    monkeypatch.setattr(metal_verify, "_probe_once", broken_config_dies)
    checks = {c["check"]: c for c in backends.get("metal").verify()}
    stand_in = " (GNU-runtime stand-in)"
    assert checks["metal: answers change with a profile" + stand_in]["status"] == "passed"
    broken = checks["metal: answers stay stock with a broken configuration" + stand_in]
    assert (broken["status"], broken["detail"]) == ("failed", "the probe died")
