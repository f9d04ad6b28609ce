"""The paravirtual device as data (issue 33, item 2): the built-in ``metal-paravirt`` profile,
the Metal stand-in's paravirtual class (native/metal/standin_metal.m, CSParavirtDevice) that
answers like it, what the shim changes on it (``probe --compare`` through the real probe), and
the M1-class ceiling ``metal-apple7`` the macOS VM workflow's shimmed arm runs.

The probe runs against the GNU Objective-C stand-in, as in test_metal_host_capture.py: on Linux
``capshim probe --api metal`` itself exits 2 (Metal is macOS only), so the same backend function
(:func:`capshim.backends.metal.run_probe`) is called with the stand-in as the framework. Its result
is what ``capshim probe --api metal --compare --profile P`` prints on a Mac (the Metal probe's output
is this JSON), so the compare tests below are that command on the stand-in as the paravirtual device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from capshim import profiles
from capshim.backends import metal
from capshim.profiles import metalhost
from tests.conftest import run_capshim

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "macos-vm" / "vm_bench.py"
M1_ULTRA = REPO / "tests" / "fixtures" / "metal-host" / "m1-ultra.json"


def _script(*args: str) -> subprocess.CompletedProcess:
    """``python scripts/macos-vm/vm_bench.py ARGS`` with this checkout's capshim."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=120)


def _stock_capture(shim, tmp_path, device_class: str = "CSParavirtDevice") -> tuple[dict, Path]:
    """The capture ``probe --api metal --json`` makes of the stand-in's ``device_class``."""
    a = shim.arts
    env = {**shim.base_env(), "STANDIN_DEVICE_CLASS": device_class}
    out = metal.run_probe(a["probe"], a["shim"], None, inject_var="LD_PRELOAD", framework=a["standin"],
                          base_env=env)
    f = tmp_path / f"{device_class}.json"
    f.write_text(json.dumps(out, indent=2))
    return out, f


def test_the_paravirt_profile_holds_the_public_facts():
    """Apple5 yes and Apple6 no (family ceiling 1005), 32 KB, no forced families, each fact sourced."""
    p = profiles.load("metal-paravirt")
    assert (p.api, p.direction) == ("metal", "raise")
    assert p.capabilities == {"appleFamilyMax": 1005, "maxThreadgroupMemoryLength": 32768}
    text = (REPO / "src" / "capshim" / "profiles" / "builtin" / "metal-paravirt.toml").read_text()
    for source in ("JuliaGPU/Metal.jl#309", "instructlab/instructlab#1112", "actions/runner-images#11899",
                   "docs.github.com", "docs/contracts.md"):
        assert source in text, source


def test_the_standin_answers_as_the_paravirt_profile_says(shim, tmp_path):
    """The stand-in's paravirtual device, captured by the real probe, answers exactly the profile:
    highest Apple family 1005 (Apple6 NO), 32768 bytes, no Metal family; the workflow's
    check-capture step says it matches."""
    out, f = _stock_capture(shim, tmp_path)
    stock = out["stock"]
    p = profiles.load("metal-paravirt")
    assert stock["highest"]["apple"] == p.capabilities["appleFamilyMax"]
    assert stock["maxThreadgroupMemoryLength"] == p.capabilities["maxThreadgroupMemoryLength"]
    assert stock["highest"]["metal"] is None
    assert stock["families"]["1005"] is True and stock["families"]["1006"] is False, stock["families"]
    assert not any(stock["llama_cpp"].values()), stock["llama_cpp"]  # llama.cpp's slow kernels
    summary = tmp_path / "summary.md"
    r = _script("check-capture", str(f), "--summary", str(summary))
    assert r.returncode == 0, r.stderr
    assert "The runner answers as `metal-paravirt` says." in summary.read_text()


def test_a_device_that_answers_otherwise_is_reported_not_failed(shim, tmp_path):
    """The second stand-in class (Apple4, 16384 bytes): check-capture exits 0 and says it differs."""
    _, f = _stock_capture(shim, tmp_path, "CSParavirtDevice2")
    summary = tmp_path / "summary.md"
    r = _script("check-capture", str(f), "--summary", str(summary))
    assert r.returncode == 0, r.stderr
    text = summary.read_text()
    assert "**The runner answers other than `metal-paravirt`**" in text
    assert "| Apple family | 1004 (differs) | 1005 |" in text


def test_the_paravirt_profile_changes_nothing_on_the_paravirt_device(shim):
    """A raise profile equal to the device's answers: the shim is active and every answer stays."""
    a = shim.arts
    out = metal.run_probe(a["probe"], a["shim"], profiles.load("metal-paravirt"), compare=True,
                          inject_var="LD_PRELOAD", framework=a["standin"], base_env=shim.base_env())
    assert out["status"] == "active"
    assert out["differences"] == []


def test_what_the_shim_changes_on_the_paravirt_device(shim):
    """``probe --compare`` on the stand-in as the paravirtual device: metal-apple9 raises the family
    to 1009 and threadgroup memory to 65536; metal-apple7 (the workflow's ceiling) raises only the
    family to 1007, and turns on llama.cpp's simdgroup reduction, matrix multiply and bfloat
    (docs/contracts.md, "Reference facts: Metal"; not tensor: that is Metal4); neither
    touches the Metal family, the working set or the device name."""
    a = shim.arts
    changed = {}
    for name in ("metal-apple9", "metal-apple7"):
        out = metal.run_probe(a["probe"], a["shim"], profiles.load(name), compare=True, inject_var="LD_PRELOAD",
                              framework=a["standin"], base_env=shim.base_env())
        assert out["status"] == "active", out
        changed[name] = {d["answer"]: (d["stock"], d["shimmed"]) for d in out["differences"]}
    assert changed["metal-apple9"]["highest.apple"] == (1005, 1009)
    assert changed["metal-apple9"]["maxThreadgroupMemoryLength"] == (32768, 65536)
    assert changed["metal-apple7"]["highest.apple"] == (1005, 1007)
    assert "maxThreadgroupMemoryLength" not in changed["metal-apple7"]
    assert {k for k in changed["metal-apple7"] if k.startswith("families.")} == {"families.1006", "families.1007"}
    llama = {k: v for k, v in changed["metal-apple7"].items() if k.startswith("llama_cpp.")}
    assert llama == {f"llama_cpp.{k}": (False, True) for k in ("simdgroup_reduction", "simdgroup_mm", "bfloat")}
    for diff in changed.values():
        assert not any(k in diff for k in ("highest.metal", "recommendedMaxWorkingSetSize", "device"))


def test_the_m1_ceiling_is_what_from_host_writes_for_an_m1_and_nothing_above_it(tmp_path):
    """metal-apple7 = ``profile from-host`` of the M1 Ultra capture; ``profile check --host
    --strict`` finds nothing above it, and finds metal-apple9 above it (so the check can fail)."""
    made = metalhost.profile_from_host(metalhost.read_capture(M1_ULTRA))
    assert profiles.load("metal-apple7").capabilities == made.capabilities
    r = run_capshim("profile", "check", "--host", str(M1_ULTRA), "--strict", "metal-apple7", timeout=120)
    assert r.returncode == 0 and "nothing above the host" in r.stdout, r.stderr
    r = run_capshim("profile", "check", "--host", str(M1_ULTRA), "--strict", "metal-apple9", timeout=120)
    assert r.returncode == 3, r.stderr


def test_the_job_summary_shows_what_each_profile_changes(shim, tmp_path):
    """The workflow saves ``probe --api metal --compare --json --profile P`` per profile; the summary
    step turns each into a table of the answers the shim changed, and says so for a profile that
    changes nothing; a file that is not such a result is one line, not a traceback."""
    a = shim.arts
    files = []
    for name in ("metal-apple7", "metal-paravirt"):
        out = metal.run_probe(a["probe"], a["shim"], profiles.load(name), compare=True, inject_var="LD_PRELOAD",
                              framework=a["standin"], base_env=shim.base_env())
        files.append(tmp_path / f"compare-{name}.json")
        files[-1].write_text(json.dumps(out, indent=2))
    junk = tmp_path / "junk.json"
    junk.write_text('{"stock": {}}')
    summary = tmp_path / "summary.md"
    args = [x for f in (*files, junk) for x in ("--compare", str(f))]
    r = _script("summary", *args, "--summary", str(summary))
    assert r.returncode == 0, r.stderr
    text = summary.read_text()
    assert "### What `metal-apple7` changes (shim active)" in text
    assert "| highest.apple | 1005 | 1007 |" in text
    assert "| llama_cpp.simdgroup_reduction | false | true |" in text
    assert "### What `metal-paravirt` changes (shim active)\n\nNo answer differs." in text
    assert f"No usable comparison: {junk}: not a probe --compare result" in text
