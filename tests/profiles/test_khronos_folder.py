"""One profile loader (issue 29, item 6): required profiles from the profile folder, one message
for a required profile found nowhere, the alias warning, and Khronos files as bench arms.

The fixtures (tests/fixtures/khronos-folder/README.md) are small hand-written Khronos files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from capshim import evidence
from capshim.bench import arms
from capshim.errors import UsageError
from capshim.profiles import khronos, roles
from capshim.profiles.model import format_version
from tests.conftest import run_capshim

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "khronos-folder"
TOP = FOLDER / "top.json"


def device(**caps) -> dict:
    """A stock probe (``capshim probe --json`` form) of a made-up device."""
    base = {"apiVersion": "1.3.0", "maxComputeSharedMemorySize": 65536, "shaderInt64": True,
            "shaderFloat16": False}
    base.update(caps)
    return {"device": {"name": "made-up GPU", "apiVersion": base["apiVersion"]}, "capabilities": base,
            "extensions": {}}


def test_a_required_profile_in_the_same_folder_is_folded_in():
    r = khronos.read(f"{TOP}#VP_TEST_top")
    assert r.capabilities["maxComputeSharedMemorySize"] == 32768  # from base.json
    assert r.capabilities["shaderInt64"] is True and r.capabilities["shaderFloat16"] is True
    assert format_version(r.capabilities["apiVersion"]) == "1.3.0"  # the higher of the two
    found = [n for n in r.notes if "VP_TEST_base" in n]
    assert len(found) == 1 and "found in" in found[0] and "base.json" in found[0], r.notes
    assert not any("VP_TEST_base" in u for u in r.unsupported), r.unsupported


def test_a_required_profile_found_nowhere_is_named_once():
    r = khronos.read(f"{TOP}#VP_TEST_orphan")
    said = [line for line in r.notes + r.unsupported if "VP_TEST_nowhere" in line]
    assert len(said) == 1, said
    assert "requires VP_TEST_nowhere, not found in" in said[0] and str(FOLDER) in said[0]
    assert said == [u for u in r.unsupported if "VP_TEST_nowhere" in u]  # not answered, never "included"


def test_profile_dirs_replace_the_files_own_folder(tmp_path):
    alone = tmp_path / "top.json"
    shutil.copy(TOP, alone)
    r = khronos.read(f"{alone}#VP_TEST_top")
    assert [u for u in r.unsupported if "VP_TEST_base" in u] == [
        f"VP_TEST_top requires VP_TEST_base, not found in {alone}#VP_TEST_top or folder {tmp_path} (not answered)"]
    assert "maxComputeSharedMemorySize" not in r.capabilities
    r = khronos.read(f"{alone}#VP_TEST_top", profile_dirs=[FOLDER])
    assert r.capabilities["maxComputeSharedMemorySize"] == 32768


def test_a_folder_file_that_is_not_a_profiles_file_is_passed_over(tmp_path):
    for name in ("top.json", "base.json"):
        shutil.copy(FOLDER / name, tmp_path / name)
    (tmp_path / "a-other.json").write_text('{"profiles": 3}')  # sorted first: another JSON
    (tmp_path / "b-broken.json").write_text("{not json")
    r = khronos.read(f"{tmp_path / 'top.json'}#VP_TEST_top")
    assert r.capabilities["maxComputeSharedMemorySize"] == 32768


def test_a_structure_and_its_khr_alias_together_are_named():
    r = khronos.read(str(FOLDER / "alias.json"))
    said = [n for n in r.notes if "are one structure" in n]
    assert len(said) == 1, r.notes
    assert "VkPhysicalDeviceShaderFloat16Int8Features (block core)" in said[0]
    assert "VkPhysicalDeviceShaderFloat16Int8FeaturesKHR (block khr)" in said[0]
    assert r.capabilities["shaderFloat16"] is True  # stated false and true: the stronger


def test_no_alias_note_for_one_spelling():
    assert not any("one structure" in n for n in khronos.read(f"{TOP}#VP_TEST_top").notes)


def test_a_bench_arm_takes_a_khronos_file_and_places_it_on_the_device():
    arm = arms.parse(f"khr=simulate:{TOP}#VP_TEST_top")
    assert arm.shimmed and arm.pending == {"simulate": f"{TOP}#VP_TEST_top"} and arm.simulate is None
    lines = arms.resolve_pending(arm, device())
    # weaker than the device in shared memory (lower: device role), stronger in shaderFloat16 (raise: app)
    assert arm.simulate.direction == "lower" and arm.simulate.capabilities["maxComputeSharedMemorySize"] == 32768
    assert arm.profile.direction == "raise" and bool(arm.profile.capabilities["shaderFloat16"])
    assert any("lower, device role as simulate:" in line for line in lines), lines
    assert any("found in" in line and "base.json" in line for line in lines), lines
    assert arm.pending is None


def test_a_bench_arm_with_a_split_file_and_the_other_role_is_refused():
    arm = arms.parse(f"khr=simulate:{TOP}#VP_TEST_top,profile:vulkan-paravirt")
    with pytest.raises(UsageError) as exc:
        arms.resolve_pending(arm, device())
    assert "it needs both roles, and profile: is given too" in str(exc.value)
    assert str(exc.value).startswith("--arm 'khr=simulate:")


def test_a_bad_khronos_arm_is_refused_before_any_probe(tmp_path):
    with pytest.raises(UsageError) as exc:
        arms.parse(f"khr=simulate:{TOP}#VP_TEST_nope")
    assert "no such profile in the file" in str(exc.value) and "did you mean" in str(exc.value)
    missing = tmp_path / "gone.json"
    with pytest.raises(UsageError) as exc:
        arms.parse(f"khr=simulate:{missing}")
    assert str(missing) in str(exc.value)


def test_the_cli_and_the_bench_share_the_loader():
    from capshim.cli import options
    assert options.unsupported_summary is roles.unsupported_summary
    slots, lines = roles.place_all({"profile": None, "simulate": f"{TOP}#VP_TEST_top"},
                                   {"profile": "--profile", "simulate": "--simulate"},
                                   lambda ref, flag: device(), lambda ref: None)
    assert slots["simulate"].direction == "lower" and slots["profile"].direction == "raise"
    assert any("as --simulate" in line for line in lines)


@pytest.mark.slow
def test_bench_runs_an_arm_given_as_a_khronos_file(tmp_path, stock_probe):
    """``--arm x=simulate:FILE.json#NAME`` runs on the machine's Vulkan device (lavapipe in CI): the
    file and the profile it requires from its folder are placed against that device and sealed."""
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "stock=", "--arm", f"khr=simulate:{TOP}#VP_TEST_top", "-r", "1",
                    "--warmup", "0", "--out", str(out), "--metric", "wall", "--",
                    "sh", "-c", "exec vulkaninfo --summary >/dev/null", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert evidence.verify(out) == []
    spec = json.loads((out / "summary.json").read_text())["arms"]["khr"]["spec"]
    placed = [p for p in (spec["simulate"], spec["profile"]) if p is not None]
    assert placed and all(f"{TOP}#VP_TEST_top" in p["source"] for p in placed), spec
    assert "capshim: arm khr: " in r.stderr and "base.json" in r.stderr
