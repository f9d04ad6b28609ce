"""Khronos Vulkan Profiles files: reading, the per-answer split, capture, and the CLI (issue 21, items 1-2).

Fast tests read the committed fixtures (tests/fixtures/khronos/SOURCE.md) and split
them against a device given as a probe result made from a fixture; the slow ones
run the real loader and lavapipe.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from capshim import profiles
from capshim.profiles import khronos
from capshim.profiles.checks import answers_after
from capshim.profiles.model import format_version
from capshim.profiles.ondevice import beyond_device
from tests.conftest import run_capshim

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "khronos"
LAVAPIPE = FIX / "VP_VULKANINFO_lavapipe.json"
H200 = FIX / "h200-handmade.json"


def probe_of(reading: khronos.Reading) -> dict:
    """A reading as a stock probe result (``capshim probe --json`` form): the fake device."""
    caps = {k: (format_version(v) if k == "apiVersion" else v) for k, v in reading.capabilities.items()}
    return {"device": {"name": reading.label, "apiVersion": caps.get("apiVersion", "1.3.0")},
            "capabilities": caps, "extensions": dict(reading.extensions)}


def write(tmp_path, doc, name="p.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def doc(profiles_, blocks) -> dict:
    return {"$schema": "https://schema.khronos.org/vulkan/profiles-0.8-latest.json#",
            "capabilities": blocks, "profiles": profiles_}


def test_vulkaninfo_file_maps_known_keys_and_names_the_rest():
    r = khronos.read(str(LAVAPIPE))
    assert r.capabilities["maxComputeSharedMemorySize"] == 32768
    assert r.capabilities["subgroupSupportedOperations"] == 191  # basic vote arithmetic ballot shuffle(+rel) quad
    assert r.capabilities["subgroupSupportedStages"] == 48       # fragment | compute
    assert r.capabilities["apiVersion"] == (1 << 22) | (3 << 12) | 230
    assert r.capabilities["shaderFloat16"] is True
    assert len(r.extensions) == 101 and r.extensions["VK_KHR_8bit_storage"] == 1
    text = "\n".join(r.unsupported)
    assert "device.formats: 5 entries" in text and "device.queueFamiliesProperties" in text
    assert "VkPhysicalDeviceFeatures (no capshim key; block device)" in text and "robustBufferAccess" in text
    assert "VkPhysicalDeviceDriverProperties (struct not in capshim's table; block device)" in text
    assert "subgroupSize = 8: an exact property" in text
    assert "subgroupSize" not in r.capabilities


def test_own_capture_splits_into_one_lower_profile_that_answers_stock():
    r = khronos.read(str(LAVAPIPE))
    device = probe_of(khronos.read(str(LAVAPIPE)))
    lower, higher = khronos.derive(r, device)
    assert higher is None and lower.direction == "lower"
    assert answers_after(lower, device)["capabilities"] == device["capabilities"]
    assert any("answered by the device itself: shaderFloat64" in n for n in r.notes)


def test_stronger_file_splits_and_each_raise_answer_is_beyond_the_device():
    device = probe_of(khronos.read(str(LAVAPIPE)))
    r = khronos.read(str(H200))
    lower, higher = khronos.derive(r, device)
    assert higher.direction == "raise" and higher.capabilities["maxComputeSharedMemorySize"] == 49152
    assert higher.extensions == {"VK_KHR_cooperative_matrix": 2, "VK_KHR_shader_bfloat16": 1,
                                 "VK_NV_cooperative_matrix2": 1}
    beyond = {b.key for b in beyond_device(higher, device)}
    assert beyond == set(higher.capabilities) | set(higher.extensions)
    assert "maxSubgroupSize" in beyond
    # minSubgroupSize 32 over lavapipe's subgroupSize 8 breaks the spec's order: named, not answered
    assert "minSubgroupSize" not in (lower.capabilities if lower else {})
    assert any(u.startswith("minSubgroupSize: not answered on this device") for u in r.unsupported)


def test_flags_round_trip_through_capture(tmp_path):
    r = khronos.read(str(LAVAPIPE))
    again = khronos.read(write(tmp_path, khronos.capture_reading(r)))
    assert again.capabilities == r.capabilities and again.extensions == r.extensions
    stages = khronos.capture_reading(r)["capabilities"]["device"]["properties"]["VkPhysicalDeviceSubgroupProperties"]
    assert stages["supportedStages"] == ["VK_SHADER_STAGE_FRAGMENT_BIT", "VK_SHADER_STAGE_COMPUTE_BIT"]


def test_requires_alternatives_api_version_and_optionals(tmp_path):
    blocks = {"base": {"properties": {"VkPhysicalDeviceProperties": {"limits": {"maxComputeSharedMemorySize": 16384}}}},
              "fast": {"features": {"VkPhysicalDeviceShaderFloat16Int8FeaturesKHR": {"shaderFloat16": True}}},
              "slow": {"features": {"VkPhysicalDeviceShaderFloat16Int8Features": {"shaderFloat16": False}}},
              "extra": {"extensions": {"VK_KHR_cooperative_matrix": 2}}}
    profs = {"VP_TEST_base": {"version": 1, "api-version": "1.1.0", "capabilities": ["base"]},
             "VP_TEST_top": {"version": 1, "api-version": "1.3.204", "profiles": ["VP_TEST_base"],
                             "capabilities": [["fast", "slow"]], "optionals": ["extra"]}}
    r = khronos.read(write(tmp_path, doc(profs, blocks)) + "#VP_TEST_top")
    assert r.capabilities == {"apiVersion": (1 << 22) | (3 << 12) | 204, "maxComputeSharedMemorySize": 16384,
                              "shaderFloat16": True}  # the KHR struct read as its core name
    assert any("requires VP_TEST_base" in n for n in r.notes)
    assert any("the first, fast, is used" in n for n in r.notes)
    assert any("optional capabilities extra" in u for u in r.unsupported)
    assert "VK_KHR_cooperative_matrix" not in r.extensions


def test_one_direction_names_what_it_cannot_say():
    r = khronos.read(str(H200))
    p = khronos.one_direction(r, "raise")
    assert p.direction == "raise" and "cooperativeMatrixRobustBufferAccess" not in p.capabilities
    assert any(u.startswith("cooperativeMatrixRobustBufferAccess = false: a raise profile cannot say it")
               for u in r.unsupported)


@pytest.mark.parametrize("content, needle", [
    ("not json", "JSON"),
    ("[1, 2]", "not a Vulkan Profiles file"),
    (json.dumps({"profiles": {}}), "has 0 profiles"),
    (json.dumps(doc({"A": {}, "B": {}}, {})), "pick one with FILE.json#NAME: A, B"),
    (json.dumps(doc({"A": {"profiles": ["A"]}}, {})), "requires itself"),
    (json.dumps(doc({"A": {"capabilities": ["nope"]}}, {})), "names no capability block"),
    ("[" * 5000 + "]" * 5000, "deep"),
])
def test_bad_files_are_refused_naming_the_file(tmp_path, content, needle):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(profiles.ProfileError) as exc:
        khronos.read(str(path))
    assert str(path) in str(exc.value) and needle.lower() in str(exc.value).lower()


def test_a_device_or_missing_file_is_refused_at_once(tmp_path):
    (tmp_path / "z.json").symlink_to("/dev/zero")
    for ref, needle in ((tmp_path / "z.json", "not a regular file"), (f"{tmp_path}/missing.json#A", "No such file")):
        with pytest.raises(profiles.ProfileError) as exc:
            khronos.read(str(ref))
        assert needle in str(exc.value)
    r = run_capshim("run", "--simulate", str(tmp_path / "z.json"), "--", "true")
    assert r.returncode == 2 and "--simulate" in r.stderr and "Traceback" not in r.stderr


def test_hostile_values_are_listed_not_answered(tmp_path):
    blocks = {"b": {"properties": {"VkPhysicalDeviceProperties": {"limits": {
                        "maxComputeSharedMemorySize": -1, "maxComputeWorkGroupInvocations": "lots"}},
                    "VkPhysicalDeviceSubgroupProperties": {"supportedOperations": ["VK_SUBGROUP_FEATURE_TELEPORT_BIT"]}},
                    "features": {"VkPhysicalDeviceVulkan12Features": {"shaderFloat16": 1}},
                    "extensions": {"not_an_extension": 1, "VK_KHR_x": True},
                    "videoProfiles": [{}], "wobble": {}}}
    r = khronos.read(write(tmp_path, doc({"P": {"capabilities": ["b"]}}, blocks)))
    text = "\n".join(r.unsupported)
    for needle in ("maxComputeSharedMemorySize: -1 is not a u32", "'lots' is not a u32",
                   "flag VK_SUBGROUP_FEATURE_TELEPORT_BIT", "shaderFloat16: 1 is not a bool",
                   "not_an_extension", "VK_KHR_x", "b.videoProfiles: 1 entry", "b.wobble: unknown section"):
        assert needle in text
    assert r.capabilities.get("subgroupSupportedOperations") == 0


def test_no_such_profile_name_suggests_the_closest(tmp_path):
    path = write(tmp_path, doc({"VP_KHR_roadmap_2022": {}, "VP_KHR_roadmap_2024": {}}, {}))
    with pytest.raises(profiles.ProfileError) as exc:
        khronos.read(path + "#VP_KHR_roadmap_2023")
    assert "did you mean" in str(exc.value)


def test_load_refuses_a_json_file_with_the_way_to_use_it():
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.load(str(LAVAPIPE))
    assert "profile import" in str(exc.value)


def test_cli_import_with_direction_needs_no_device_and_never_overwrites(tmp_path):
    out = tmp_path / "h.toml"
    r = run_capshim("profile", "import", str(H200), "--direction", "raise", "-o", str(out))
    assert r.returncode == 0, r.stderr
    p = profiles.load(str(out))
    assert p.direction == "raise" and p.capabilities["maxComputeSharedMemorySize"] == 49152
    assert "cooperativeMatrixRobustBufferAccess" in r.stderr and "subgroupSize" in r.stderr
    again = run_capshim("profile", "import", str(H200), "--direction", "raise", "-o", str(out))
    assert again.returncode == 2 and "exists" in again.stderr and "Traceback" not in again.stderr


def test_cli_capture_from_file_as_toml_and_json(tmp_path):
    r = run_capshim("profile", "capture", "--from", str(LAVAPIPE), "-o", str(tmp_path / "l.toml"))
    assert r.returncode == 0, r.stderr
    p = profiles.load(str(tmp_path / "l.toml"))
    assert p.direction == "lower" and p.capabilities["maxComputeSharedMemorySize"] == 32768
    assert "shaderFloat16 = true: a lower profile cannot say it" in r.stderr
    j = run_capshim("profile", "capture", "--from", str(LAVAPIPE))
    assert j.returncode == 0
    assert khronos.read(write(tmp_path, json.loads(j.stdout), "c.json")).capabilities == \
        khronos.read(str(LAVAPIPE)).capabilities


# --- the real loader and lavapipe ----------------------------------------------------------------

def _lavapipe(stock_probe):
    if "llvmpipe" not in str(stock_probe.get("device", {}).get("name")):
        pytest.skip("these tests compare with the lavapipe fixture; this device is not lavapipe")


@pytest.mark.slow
def test_capture_then_simulate_on_the_same_device_is_identity(tmp_path, stock_probe):
    out = tmp_path / "me.json"
    cap = run_capshim("profile", "capture", "-o", str(out))
    assert cap.returncode == 0, cap.stderr
    r = run_capshim("probe", "--compare", "--simulate", str(out), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["differences"] == {}
    assert got["shimmed"]["shim"]["VK_LAYER_CAPSHIM_device"]["state"] == "active"
    assert "one lower profile" in r.stderr
    stock_dir, sim_dir = tmp_path / "stock", tmp_path / "sim"
    stock_dir.mkdir()
    sim_dir.mkdir()
    subprocess.run(["vulkaninfo", "--json"], cwd=stock_dir, capture_output=True, timeout=120, check=True)
    v = run_capshim("run", "--simulate", str(out), "--", "vulkaninfo", "--json", cwd=sim_dir)
    assert v.returncode == 0 and "VK_LAYER_CAPSHIM_device active in vulkaninfo" in v.stderr, v.stderr
    stock, sim = (khronos.read(str(next(d.glob("VP_VULKANINFO_*.json")))) for d in (stock_dir, sim_dir))
    assert sim.capabilities == stock.capabilities and sim.extensions == stock.extensions


@pytest.mark.slow
def test_vulkaninfo_file_simulated_answers_its_values(tmp_path, stock_probe):
    """The issue's "done when": vulkaninfo's own export of this device, simulated on it, is the identity."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    subprocess.run(["vulkaninfo", "--json"], cwd=first, capture_output=True, timeout=120, check=True)
    ref = next(first.glob("VP_VULKANINFO_*.json"))
    r = run_capshim("run", "--simulate", str(ref), "--", "vulkaninfo", "--json", cwd=second)
    assert r.returncode == 0, r.stderr
    assert "VK_LAYER_CAPSHIM_device active in vulkaninfo" in r.stderr and "one lower profile" in r.stderr
    seen, want = khronos.read(str(next(second.glob("VP_VULKANINFO_*.json")))), khronos.read(str(ref))
    assert seen.capabilities == want.capabilities and seen.extensions == want.extensions


@pytest.mark.slow
def test_stronger_device_file_on_lavapipe_reports_each_beyond_answer(tmp_path, stock_probe):
    _lavapipe(stock_probe)
    v = run_capshim("--verbose", "run", "--simulate", str(H200), "--", "vulkaninfo", "--json", cwd=tmp_path)
    assert v.returncode == 0, v.stderr  # --verbose: every answer named (by default the first few and a count)
    assert "answers more than llvmpipe" in v.stderr and "maxComputeSharedMemorySize 49152" in v.stderr
    seen = khronos.read(str(next(tmp_path.glob("VP_VULKANINFO_*.json"))))
    assert seen.capabilities["maxComputeSharedMemorySize"] == 49152
    assert seen.capabilities["integerDotProduct4x8BitPackedSignedAccelerated"] is True
    r = run_capshim("probe", "--simulate", str(H200), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    beyond = {e["key"] for e in out["beyond_device"]}
    want = khronos.derive(khronos.read(str(H200)), stock_probe)[1]
    assert beyond == set(want.capabilities) | set(want.extensions)
    assert out["capabilities"]["maxComputeSharedMemorySize"] == 49152
    assert "2 capabilities not answered" in r.stderr


@pytest.mark.slow
def test_show_check_and_import_split_against_the_device(tmp_path, stock_probe):
    _lavapipe(stock_probe)
    show = run_capshim("profile", "show", str(H200))
    assert show.returncode == 0, show.stderr
    got = json.loads(show.stdout)
    assert got["raise"]["capabilities"]["maxComputeSharedMemorySize"] == 49152
    assert any("subgroupSize = 32" in u for u in got["unsupported"])
    check = run_capshim("profile", "check", str(H200))
    assert check.returncode == 0 and "--profile role" in check.stdout and "--simulate role" in check.stdout
    assert "not answered: VkPhysicalDeviceSubgroupProperties.subgroupSize" in check.stderr
    out = tmp_path / "h.toml"
    imp = run_capshim("profile", "import", str(H200), "-o", str(out))
    assert imp.returncode == 0, imp.stderr
    assert profiles.load(str(tmp_path / "h-lower.toml")).direction == "lower"
    assert profiles.load(str(tmp_path / "h-raise.toml")).capabilities["maxComputeSharedMemorySize"] == 49152
    assert "--simulate" in imp.stdout and "--profile" in imp.stdout
    (tmp_path / "k-raise.toml").write_text("mine")
    half = run_capshim("profile", "import", str(H200), "-o", str(tmp_path / "k.toml"))
    assert half.returncode == 2 and "k-raise.toml: exists" in " ".join(half.stderr.split())
    assert not (tmp_path / "k-lower.toml").exists() and (tmp_path / "k-raise.toml").read_text() == "mine"
    both = run_capshim("run", "--simulate", str(H200), "--profile", "vulkan-paravirt", "--", "true")
    assert both.returncode == 2 and "needs both roles" in both.stderr


H200_CAPTURE = FIX / "h200-capture.json"


@pytest.mark.slow
def test_a_real_h200_capture_simulated_on_lavapipe_reports_each_beyond_answer(stock_probe):
    """Issue 21 item 2 with a capture made on the H200 itself (`capshim profile capture --format json`,
    2026-12-01; SOURCE.md): every answer above lavapipe is reported as beyond the device, and answered."""
    _lavapipe(stock_probe)
    r = run_capshim("probe", "--simulate", str(H200_CAPTURE), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    want = khronos.derive(khronos.read(str(H200_CAPTURE)), stock_probe)[1]
    assert {e["key"] for e in out["beyond_device"]} == set(want.capabilities) | set(want.extensions)
    assert len(out["beyond_device"]) > 50 and out["capabilities"]["maxComputeSharedMemorySize"] == 49152
