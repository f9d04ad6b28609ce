"""Host captures made by the real probe (issue 21, item 6): capshim-metal-probe, run through
:func:`capshim.backends.metal.run_probe` without a profile, against the GNU Objective-C stand-in
(native/metal/standin_metal.m) playing the host, then ``profile from-host`` and
``profile check --host`` on that capture, and the from-host profile run on a stand-in guest."""

from __future__ import annotations

import json

from capshim import profiles
from capshim.backends import metal
from capshim.profiles import metalhost
from tests.conftest import run_capshim


def _capture(shim, tmp_path, device_class: str):
    """The capture the probe makes of ``device_class`` (the stand-in's default device), as a file."""
    a = shim.arts
    env = {**shim.base_env(), "STANDIN_DEVICE_CLASS": device_class}
    out = metal.run_probe(a["probe"], a["shim"], None, inject_var="LD_PRELOAD", framework=a["standin"],
                          base_env=env)
    f = tmp_path / f"{device_class}.json"
    f.write_text(json.dumps(out, indent=2))
    return out, f


def test_the_probe_without_a_profile_prints_a_capture(shim, tmp_path):
    out, f = _capture(shim, tmp_path, "CSBigDevice")
    assert (out["schema"], out["api"]) == (metalhost.CAPTURE_SCHEMA_VERSION, "metal")
    assert out["os"]["system"] == "Linux" and out["os"]["vm"] is None
    cap = metalhost.read_capture(f)
    assert (cap.device, cap.apple_family, cap.threadgroup, cap.working_set) == (
        "Apple M1 Ultra (capshim stand-in)", 1009, 131072, 68719476736)
    assert cap.highest == {"apple": 1009, "mac": 2002, "common": 3003, "metal": 5001}


def test_from_host_gives_the_guest_exactly_the_hosts_ceilings(shim, tmp_path):
    """The host (CSBigDevice: Apple9, 131072 bytes) captured; its profile run in a guest process
    (CSParavirtDevice: Apple5, 32768 bytes) answers the host's family and threadgroup memory,
    and nothing the host lacks (no Metal3, the guest's own working set)."""
    _, f = _capture(shim, tmp_path, "CSBigDevice")
    toml = tmp_path / "host.toml"
    r = run_capshim("profile", "from-host", str(f), "-o", str(toml), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "made on Linux, not a Mac host" in r.stderr
    p = profiles.load(str(toml))
    assert p.capabilities == {"appleFamilyMax": 1009, "maxThreadgroupMemoryLength": 131072}
    a = shim.arts
    guest = metal.run_probe(a["probe"], a["shim"], p, compare=True, inject_var="LD_PRELOAD",
                            framework=a["standin"], base_env=shim.base_env())
    assert guest["status"] == "active"
    assert guest["shimmed"]["highest"]["apple"] == 1009 and guest["shimmed"]["maxThreadgroupMemoryLength"] == 131072
    assert guest["shimmed"]["highest"]["metal"] is None  # the host's Metal3 is not given
    assert guest["shimmed"]["recommendedMaxWorkingSetSize"] == guest["stock"]["recommendedMaxWorkingSetSize"]
    r = run_capshim("profile", "check", "--host", str(f), "--strict", str(toml), timeout=120)
    assert r.returncode == 0 and "nothing above the host" in r.stdout, r.stderr


def test_the_release_profile_over_a_weaker_captured_host(shim, tmp_path):
    """A host captured at Apple5 (the stand-in's paravirtual device): metal-apple9 is above it."""
    _, f = _capture(shim, tmp_path, "CSParavirtDevice")
    r = run_capshim("profile", "check", "--host", str(f), "--json", "--strict", "metal-apple9", timeout=120)
    assert r.returncode == 3, r.stderr
    above = {a["key"]: a["over"] for a in json.loads(r.stdout)["above_host"]}
    assert above == {"appleFamilyMax": 4, "maxThreadgroupMemoryLength": 32768}
    assert "Apple9 (1009) is above the host's Apple5 (1005) " \
           "by 4 families" in r.stderr


def test_a_capture_with_the_name_answered_through_the_shim(shim, tmp_path):
    """from-host --device-name: the guest process answers the host's name too."""
    _, f = _capture(shim, tmp_path, "CSBigDevice")
    p = metalhost.profile_from_host(metalhost.read_capture(f), with_name=True)
    a = shim.arts
    guest = metal.run_probe(a["probe"], a["shim"], p, inject_var="LD_PRELOAD", framework=a["standin"],
                            base_env=shim.base_env())
    assert guest["shimmed"]["device"] == "Apple M1 Ultra (capshim stand-in)"


def test_a_host_above_apple9_is_captured_at_its_own_family(shim, tmp_path):
    """The probe scans 20 families per range (as llama.cpp does): a host answering Apple12 (1012;
    here the stand-in raised by the shim) is captured at 1012, not cut at 1009."""
    a = shim.arts
    p = profiles.parse('name="h"\napi="metal"\ndirection="raise"\nversion=1\ndescription="d"\n'
                       "[capabilities]\nappleFamilyMax = 1012\n", "h.toml")
    out = metal.run_probe(a["probe"], a["shim"], p, inject_var="LD_PRELOAD", framework=a["standin"],
                          base_env=shim.base_env())
    assert out["shimmed"]["highest"]["apple"] == 1012
    capture = metalhost.capture_of(out["shimmed"])
    f = tmp_path / "apple12.json"
    f.write_text(json.dumps(capture))
    cap = metalhost.read_capture(f)
    assert cap.apple_family == 1012
    assert metalhost.above_host(profiles.load("metal-apple9"), cap)[0][0].key == "maxThreadgroupMemoryLength"
