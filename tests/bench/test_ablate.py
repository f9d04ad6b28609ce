"""capshim ablate: the group table, the units of a profile, the smallest-profile rule, end to end on lavapipe."""

from __future__ import annotations

import json
import tomllib

import pytest

from capshim import profiles
from capshim.bench import ablate
from capshim.bench.analysis import analyze
from capshim.errors import UsageError
from capshim.profiles.catalog import KEYS
from tests.conftest import run_capshim

# A stock probe of a GPU with everything vulkan-paravirt lowers (values as the probe prints them).
GPU_STOCK = {
    "device": {"name": "Fake GPU", "type": "discrete", "index": 0},
    "capabilities": {**{k: None for k in KEYS["vulkan"]},
                     "maxComputeSharedMemorySize": 49152, "shaderFloat16": True, "shaderIntegerDotProduct": True,
                     "integerDotProduct4x8BitPackedSignedAccelerated": True,
                     "integerDotProduct4x8BitPackedUnsignedAccelerated": True,
                     "integerDotProduct4x8BitPackedMixedSignednessAccelerated": True,
                     "cooperativeMatrix": True, "shaderBFloat16Type": True},
    "extensions": {"VK_KHR_cooperative_matrix": 2, "VK_KHR_shader_bfloat16": 1},
}


def test_groups_name_catalog_keys_once():
    seen = {}
    for name, g in ablate.GROUPS.items():
        for key in g["caps"]:
            assert key in KEYS["vulkan"], f"{name}: {key} is not a catalog key"
            assert key not in seen, f"{key} in {seen.get(key)} and {name}"
            seen[key] = name
    assert set(ablate.GROUP_ORDER) == set(ablate.GROUPS)
    assert ablate.group_of("VK_KHR_cooperative_matrix") == "coopmat"
    assert ablate.group_of("integerDotProduct4x8BitPackedSignedAccelerated") == "intdot"
    assert ablate.group_of("shaderBFloat16Type") == "fp16"
    assert ablate.group_of("maxComputeSharedMemorySize") == "shmem"
    assert ablate.group_of("subgroupSizeControl") == "subgroup"
    assert ablate.group_of("shaderInt64") == ablate.OTHER


def test_units_of_paravirt_on_a_gpu_follow_group_order():
    us = ablate.units(profiles.load("vulkan-paravirt"), GPU_STOCK)
    assert [u.name for u in us] == ["coopmat", "intdot", "fp16", "shmem"]
    assert all(u.skipped is None for u in us)
    shm = us[3]
    assert shm.lower_caps == {"maxComputeSharedMemorySize": 24576}
    assert shm.raise_caps == {"maxComputeSharedMemorySize": 49152}
    assert us[0].raise_exts == {"VK_KHR_cooperative_matrix": 2}


def test_units_skip_what_the_device_lacks():
    stock = {**GPU_STOCK, "capabilities": {**GPU_STOCK["capabilities"], "maxComputeSharedMemorySize": 16384,
                                           "cooperativeMatrix": None}, "extensions": {}}
    us = {u.name: u for u in ablate.units(profiles.load("vulkan-paravirt"), stock)}
    assert us["shmem"].skipped and us["coopmat"].skipped
    assert us["fp16"].skipped is None


def test_units_by_key_and_bad_profiles():
    us = ablate.units(profiles.load("vulkan-paravirt"), GPU_STOCK, by="key")
    assert "maxComputeSharedMemorySize" in [u.name for u in us]
    with pytest.raises(UsageError, match="'lower' profile"):
        ablate.units(profiles.load("metal-apple9"), GPU_STOCK)


def test_build_arms_writes_valid_profiles(tmp_path):
    arms, _ = ablate.build_arms(profiles.load("vulkan-paravirt"), GPU_STOCK, tmp_path)
    names = [a.name for a in arms]
    assert names == ["native", "aa", "sim", "loo-coopmat", "loo-intdot", "loo-fp16", "loo-shmem", "loi-coopmat",
                     "loi-intdot", "loi-fp16", "loi-shmem", "cum-2-intdot", "cum-3-fp16", "cum-4-shmem"]
    last = tomllib.loads((tmp_path / "cum-4-shmem.toml").read_text())
    assert last["direction"] == "raise"
    assert last["capabilities"]["maxComputeSharedMemorySize"] == 49152
    assert last["extensions"]["VK_KHR_cooperative_matrix"] == 2
    loo = profiles.load(str(tmp_path / "loo-coopmat.toml"))
    assert loo.extensions["VK_KHR_cooperative_matrix"] == 0 and "maxComputeSharedMemorySize" not in loo.capabilities
    for a in arms[1:]:
        from capshim.bench import arms as arms_mod

        arms_mod.parse(a.spec)  # every spec is a valid --arm


def _summary(medians: dict[str, float], spread: float = 0.005) -> dict:
    """A summary from analyze() with 6 samples per arm around each median (no processes)."""
    records = []
    for arm, med in medians.items():
        for i, f in enumerate((1 - spread, 1 - spread / 2, 1, 1, 1 + spread / 2, 1 + spread)):
            records.append({"arm": arm, "run": i + 1, "sample": 1, "test": "pp512", "tok_s": med * f})
    arms = {a: {"state": "native" if a == "native" else "active"} for a in medians}
    return analyze(records, arms, baseline="native")


def _arms():
    A = ablate.ArmInfo
    return [A("native", "native", [], ""), A("sim", "sim", [], ""),
            A("loi-coopmat", "loi", ["coopmat"], "", 11), A("loi-fp16", "loi", ["fp16"], "", 4),
            A("cum-2-intdot", "cum", ["coopmat", "intdot"], "", 42), A("cum-3-fp16", "cum", ["coopmat", "intdot", "fp16"], "", 46)]


def test_smallest_picks_fewest_groups_that_recover():
    s = _summary({"native": 1000, "sim": 300, "loi-coopmat": 600, "loi-fp16": 400, "cum-2-intdot": 1000,
                  "cum-3-fp16": 1010})
    best = ablate.smallest(_arms(), ablate.ratios(s, "pp512"))
    assert best.name == "cum-2-intdot"


def test_smallest_single_group_wins_and_rule_needs_the_lower_bound():
    s = _summary({"native": 1000, "sim": 300, "loi-coopmat": 995, "loi-fp16": 400, "cum-2-intdot": 1000,
                  "cum-3-fp16": 1000})
    rs = ablate.ratios(s, "pp512")
    assert ablate.smallest(_arms(), rs).name == "loi-coopmat"
    wide = _summary({"native": 1000, "sim": 300, "loi-coopmat": 995, "loi-fp16": 400, "cum-2-intdot": 1000,
                     "cum-3-fp16": 1000}, spread=0.2)
    rs = ablate.ratios(wide, "pp512")
    assert rs["loi-coopmat"].lo < 0.97
    assert ablate.smallest(_arms(), rs) is None


def test_smallest_ignores_arms_that_are_not_results():
    s = _summary({"native": 1000, "sim": 300, "loi-coopmat": 1000, "loi-fp16": 400, "cum-2-intdot": 1000,
                  "cum-3-fp16": 1000})
    s["arms"]["loi-coopmat"]["state"] = "wrong-output"
    assert ablate.smallest(_arms(), ablate.ratios(s, "pp512")).name == "cum-2-intdot"


def test_main_test_prefers_pp():
    assert ablate.main_test({"tests": ["tg128", "pp512"]}) == "pp512"
    with pytest.raises(UsageError, match="--test pp9"):
        ablate.main_test({"tests": ["pp512"]}, "pp9")


def test_bad_options_exit_2(tmp_path):
    r = run_capshim("ablate", "--profile", "metal-apple9", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "Vulkan" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    r = run_capshim("ablate", "--out", str(tmp_path / "full"))
    assert r.returncode == 2 and "--out" in r.stderr and "not empty" in r.stderr


def test_ablate_end_to_end_on_lavapipe(tmp_path, stock_probe):
    out = tmp_path / "ab"
    r = run_capshim("ablate", "--json", "-r", "2", "-p", "16", "-n", "4", "--out", str(out), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res == json.loads((out / "ablation.json").read_text())
    names = [a["name"] for a in res["arms"]]
    assert names[:3] == ["native", "aa", "sim"]
    summary = json.loads((out / "bench" / "summary.json").read_text())
    assert set(names) == set(summary["arms"])
    assert all(summary["arms"][n]["state"] == "active" for n in names[1:])
    assert (out / "ablation.png").stat().st_size > 1000
    assert "| arm | answers |" in (out / "ablation.md").read_text()
    if stock_probe["device"]["type"] == "cpu":
        assert res["cpu_device"] and any("no speed effect" in n for n in res["notes"])
    if res["smallest"]:
        profiles.load(res["smallest"]["profile"])


def test_build_arms_by_key_one_arm_per_key(tmp_path):
    arms, us = ablate.build_arms(profiles.load("vulkan-paravirt"), GPU_STOCK, tmp_path, by="key")
    live = [u for u in us if not u.skipped]
    assert all(len(u.keys) == 1 for u in live)
    loo = [a for a in arms if a.kind == "loo"]
    assert [a.units for a in loo] == [[u.name] for u in live]
    assert loo[0].name == "loo-k00" and profiles.load(str(tmp_path / "loo-k00.toml")).direction == "lower"


def test_an_a_a_arm_away_from_one_is_a_warning():
    s = _summary({"native": 1000, "aa": 1300, "sim": 300, "loi-coopmat": 1000})
    rs = ablate.ratios(s, "pp512")
    assert rs["aa"].lo > 1.0
    (note,) = ablate.aa_warning(rs)
    assert "excludes 1.00x" in note and "not reliable" in note
    assert ablate.aa_warning(ablate.ratios(_summary({"native": 1000, "aa": 1000, "sim": 300}), "pp512")) == []
