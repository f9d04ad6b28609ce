"""capshim ablate: the group table, the units of a profile, the smallest-profile rule, end to end on lavapipe."""

from __future__ import annotations

import json
import tomllib

import pytest

from capshim import profiles
from capshim.bench import runs
from capshim.bench.analysis import analyze
from capshim.errors import UsageError
from capshim.evidence import study as seal
from capshim.profiles.catalog import KEYS
from capshim.studies import ablate, common
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
    for name, g in common.GROUPS.items():
        for key in g["caps"]:
            assert key in KEYS["vulkan"], f"{name}: {key} is not a catalog key"
            assert key not in seen, f"{key} in {seen.get(key)} and {name}"
            seen[key] = name
    assert set(common.GROUP_ORDER) == set(common.GROUPS)
    assert ablate.group_of("VK_KHR_cooperative_matrix") == "coopmat"
    assert ablate.group_of("integerDotProduct4x8BitPackedSignedAccelerated") == "intdot"
    assert ablate.group_of("shaderBFloat16Type") == "fp16"
    assert ablate.group_of("maxComputeSharedMemorySize") == "shmem"
    assert ablate.group_of("subgroupSizeControl") == "subgroup"
    assert ablate.group_of("shaderInt64") == ablate.OTHER


def test_units_of_paravirt_on_a_gpu_follow_group_order():
    us = ablate.units(profiles.load("vulkan-paravirt"), GPU_STOCK)
    assert [u.name for u in us] == ["coopmat", "intdot", "fp16", "shmem", "subgroup"]
    assert all(u.skipped is None for u in us[:4])
    # a group the profile does not lower is listed as skipped, with why, not dropped
    assert us[4].keys == [] and us[4].skipped == "vulkan-paravirt does not lower it: nothing to measure"
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


def test_profile_errors_name_what_ablate_takes(tmp_path, monkeypatch):
    with pytest.raises(UsageError) as e:
        ablate.load_lowering("does-not-exist")
    assert "vulkan-paravirt" in str(e.value) and "metal-apple9" not in str(e.value)
    # every built-in lowering profile, of any API (the CUDA ones too once they ship), and no raise profile
    assert "vulkan-paravirt" in ablate.lowering_builtins() and "metal-apple9" not in ablate.lowering_builtins()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "somefolder").mkdir()
    for ref in ("somefolder", str(tmp_path / "somefolder")):
        with pytest.raises(UsageError, match="is a folder, not a profile file"):
            ablate.load_lowering(ref)
    with pytest.raises(UsageError, match="ablate measures lowering profiles; this one is a metal raise profile"):
        ablate.load_lowering("metal-apple9")
    assert ablate.load_lowering("vulkan-paravirt").name == "vulkan-paravirt"


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
    best = ablate.smallest(_arms(), common.ratios(s, "pp512"))
    assert best.name == "cum-2-intdot"


def test_smallest_single_group_wins_and_rule_needs_the_lower_bound():
    s = _summary({"native": 1000, "sim": 300, "loi-coopmat": 995, "loi-fp16": 400, "cum-2-intdot": 1000,
                  "cum-3-fp16": 1000})
    rs = common.ratios(s, "pp512")
    assert ablate.smallest(_arms(), rs).name == "loi-coopmat"
    wide = _summary({"native": 1000, "sim": 300, "loi-coopmat": 995, "loi-fp16": 400, "cum-2-intdot": 1000,
                     "cum-3-fp16": 1000}, spread=0.2)
    rs = common.ratios(wide, "pp512")
    assert rs["loi-coopmat"].lo < 0.97
    assert ablate.smallest(_arms(), rs) is None


def test_smallest_ignores_arms_that_are_not_results():
    s = _summary({"native": 1000, "sim": 300, "loi-coopmat": 1000, "loi-fp16": 400, "cum-2-intdot": 1000,
                  "cum-3-fp16": 1000})
    s["arms"]["loi-coopmat"]["state"] = "wrong-output"
    assert ablate.smallest(_arms(), common.ratios(s, "pp512")).name == "cum-2-intdot"


def test_main_test_prefers_pp():
    assert common.main_test({"tests": ["tg128", "pp512"]}) == "pp512"
    with pytest.raises(UsageError, match="--test pp9"):
        common.main_test({"tests": ["pp512"]}, "pp9")


@pytest.mark.slow
def test_bad_options_exit_2(tmp_path):
    r = run_capshim("ablate", "--profile", "metal-apple9", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "lowering profiles" in r.stderr and "raise" in r.stderr and "Traceback" not in r.stderr
    r = run_capshim("ablate", "--profile", "does-not-exist", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "built-in: a100-class, pascal-class, t4-class, vulkan-paravirt" in r.stderr and "metal-apple9" not in r.stderr
    r = run_capshim("ablate", "--profile", str(tmp_path), "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "is a folder" in r.stderr, r.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    r = run_capshim("ablate", "--out", str(tmp_path / "full"))
    assert r.returncode == 2 and "--out" in r.stderr and "not empty" in r.stderr


@pytest.mark.slow
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
    md = (out / "ablation.md").read_text()
    assert "| arm | answers |" in md and "| state | flags |" in md
    # the bench's own warnings reach every row: 2 processes per arm is below the bench's minimum
    assert all("few processes" in row["flags"] for row in res["rows"]), res["rows"]
    assert all("few processes" in a["flags"] for a in res["arms"])
    assert len(res["warnings"]) == len(summary["warnings"]) + sum(len(a["flags"]) for a in summary["arms"].values())
    # every group is named: measured, or skipped with why (vulkan-paravirt never lowers subgroup)
    units = {u["name"]: u for u in res["units"]}
    assert set(units) == set(common.GROUP_ORDER)
    assert "vulkan-paravirt does not lower it" in units["subgroup"]["skipped"]
    assert "subgroup: skipped: vulkan-paravirt does not lower it: nothing to measure" in res["notes"]
    moved = common.aa_warning(common.per_test(summary))
    assert (res["notes"][:1] == moved) if moved else not any("A/A arm" in n for n in res["notes"])
    if stock_probe["device"]["type"] == "cpu":
        assert res["cpu_device"] and any("no speed effect" in n for n in res["notes"])
    if res["smallest"]:
        profiles.load(res["smallest"]["profile"])
    assert seal.verify(out) == []  # the study seal over the folder and its nested bundle


def test_build_arms_by_key_one_arm_per_key(tmp_path):
    arms, us = ablate.build_arms(profiles.load("vulkan-paravirt"), GPU_STOCK, tmp_path, by="key")
    live = [u for u in us if not u.skipped]
    assert all(len(u.keys) == 1 for u in live)
    loo = [a for a in arms if a.kind == "loo"]
    assert [a.units for a in loo] == [[u.name] for u in live]
    assert loo[0].name == "loo-k00" and profiles.load(str(tmp_path / "loo-k00.toml")).direction == "lower"


@pytest.mark.slow
def test_test_is_checked_before_any_run(tmp_path, stock_probe):
    for cmd in ("ablate", "tune"):
        out = tmp_path / cmd
        r = run_capshim(cmd, "--test", "tg999", "-p", "8", "-n", "3", "--out", str(out), timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "--test tg999: not a test of this bench" in r.stderr and "pp8, tg3" in r.stderr
        assert not out.exists() and "[1/" not in r.stderr  # no output folder, no run


def test_an_a_a_arm_away_from_one_is_a_warning():
    s = _summary({"native": 1000, "aa": 1300, "sim": 300, "loi-coopmat": 1000})
    rs = common.ratios(s, "pp512")
    assert rs["aa"].lo > 1.0
    (note,) = common.aa_warning({"pp512": rs})
    assert note.startswith("warning: the harness is unreliable here: ")
    assert "pp512: interval" in note and "excludes 1.00x" in note and "not reliable" in note
    still = common.ratios(_summary({"native": 1000, "aa": 1000, "sim": 300}), "pp512")
    assert common.aa_warning({"pp512": still}) == []


# --- the bench's warnings, failed runs and the A/A arm in ablate's output ------------------------

#: The stderr of a run that llama.cpp could not load the model in (lavapipe, shared memory lowered to
#: 16 KiB; shortened): llama.cpp's own error line comes before cyllama's generic one.
FAILED_STDERR = """ggml_vulkan: 0 = llvmpipe (LLVM 15.0.6, 256 bits) (llvmpipe) | uma: 0 | fp16: 1 | shared memory: 16384
load_tensors: loading model tensors, this can take a while... (mmap = true, direct_io = false)
ggml_vulkan: Error: Shared memory size too small for matrix multiplication.
llama_model_load: error loading model: Shared memory size too small for matrix multiplication.
llama_model_load_from_file_impl: failed to load model
capshim-builtin: error: llama.cpp could not load /m.gguf: Failed to load model from file: /m.gguf. The file \
passed format checks but llama.cpp could not load it. Possible causes: unsupported GGUF version or quantization
"""
SHMEM_ERROR = "ggml_vulkan: Error: Shared memory size too small for matrix multiplication."


def test_error_line_prefers_llama_cpp_own_error():

    assert runs.error_line(FAILED_STDERR) == SHMEM_ERROR
    assert runs.error_line("llama_model_load_from_file_impl: failed to load model\nbye\n").startswith("llama_")
    assert runs.error_line("ggml_vulkan: 0 = dev\nTraceback...\nValueError: x\n\n") == "ValueError: x"
    assert runs.error_line("") is None


def fake_bench(value, calls: list | None = None, path=None, bench_warnings: list[str] | None = None):
    """A stand-in for :func:`common.run_arms` (the one seam to the bench): ``value(name, what, test, r)``
    gives an arm's per-process tok/s (``r`` processes), or None for an arm whose runs fail as a real
    failed load does (error: the runner's line from :data:`FAILED_STDERR`); ``path(name, what)``, the
    path llama.cpp attested for the arm (default: none); ``bench_warnings``, the bench's warnings about
    the whole bench (an inherited GGML_VK_DISABLE_*). Summary: analyze()."""

    def run_arms(arm_specs, out, *, repetitions, warmup, model, n_prompt, n_gen, timeout=900.0, guard=None, workload=None,
                 shape=None):
        if calls is not None:
            calls.append((list(arm_specs), out, repetitions))
        out.mkdir(parents=True)
        records, arms = [], {}
        for spec in arm_specs:
            name, _, what = spec.partition("=")
            vals = {t: value(name, what, t, repetitions) for t in common.builtin_tests(n_prompt, n_gen)}
            if any(v is None for v in vals.values()):
                err = f"exit 1: {runs.error_line(FAILED_STDERR)}"
                arms[name] = {"state": "failed", "spec": {"profile": what},
                              "runs": [{"run": i + 1, "exit_code": 1, "error": err} for i in range(repetitions)]}
                continue
            arms[name] = {"state": "active" if what else "native", "spec": {"identity": what == "identity"},
                          "runs": [{"run": i + 1, "exit_code": 0} for i in range(repetitions)],
                          "path": path(name, what) if path else {}}
            records += [{"arm": name, "run": i + 1, "sample": 1, "test": t, "tok_s": v}
                        for t, vs in vals.items() for i, v in enumerate(vs)]
        return common.Measured(analyze(records, arms, baseline="native", bench_warnings=bench_warnings), out,
                               {"name": "Fake"}, 0)

    return run_arms


def _user_case(name, what, test, r):
    """The new user's bench: 2 processes; the A/A arm inside 1.00x for pp, 0.69x excluding it for tg;
    loi-fp16 unstable (spread about 70%)."""
    if name == "aa":
        return [500.0, 1500.0] if test.startswith("pp") else [690.0, 700.0]
    if name == "loi-fp16":
        return [350.0, 750.0]
    return [1000.0, 1005.0]


def test_ablate_output_carries_the_bench_warnings(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", fake_bench(_user_case))
    res = ablate.ablate(out=tmp_path / "ab", repetitions=2, n_prompt=64, n_gen=16)
    notes = res["notes"]
    # the A/A arm moved in tg only (pp is the selection test): the warning fires, first
    assert notes[0].startswith("warning: the harness is unreliable here: the A/A arm"), notes
    assert "tg16: range" in notes[0] and "excludes 1.00x" in notes[0], notes
    assert "0.69x" in notes[0] and "as large as the effects" in notes[0]
    rows = {r["arm"]: r for r in res["rows"]}
    assert rows["native"]["flags"] == "few processes"
    assert rows["loi-fp16"]["flags"] == "few processes, unstable"
    assert rows["aa"]["flags"] == "few processes, unstable (pp64)"  # a warning of one test names it
    assert rows["loi-fp16"]["pp64 vs native"].startswith("0.55x")
    assert "subgroup: skipped: vulkan-paravirt does not lower it: nothing to measure" in notes
    md = (tmp_path / "ab" / "ablation.md").read_text()
    assert "| few processes, unstable |" in md and notes[0] in md
    saved = json.loads((tmp_path / "ab" / "ablation.json").read_text())
    assert saved["notes"] == notes and saved["rows"] == res["rows"]
    fp16 = next(w for w in saved["warnings"] if w["arm"] == "loi-fp16" and w["short"] == "unstable")
    assert fp16["test"] in ("pp64", "tg16") and "spread of the process values" in fp16["warning"]


def test_ablate_notes_an_inherited_llama_cpp_switch(tmp_path, monkeypatch):
    from capshim.bench import inherited_env

    (w,) = inherited_env.warnings({"GGML_VK_DISABLE_COOPMAT": "1"})
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", fake_bench(lambda name, what, test, r: [1000.0 + i for i in range(r)],
                                                       bench_warnings=[w]))
    res = ablate.ablate(out=tmp_path / "ab", repetitions=6, n_prompt=64, n_gen=16)
    assert res["notes"][0] == f"warning: {w}" and "without KHR cooperative matrix" in w
    assert res["warnings"][0]["arm"] is None and res["warnings"][0]["warning"] == w


def test_ablate_names_why_an_arm_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", fake_bench(
        lambda name, what, test, r: None if name == "loo-shmem" else [1000.0 + i for i in range(r)]))
    res = ablate.ablate(out=tmp_path / "ab", repetitions=6, n_prompt=64, n_gen=16)
    arm = next(a for a in res["arms"] if a["name"] == "loo-shmem")
    assert arm["state"] == "failed" and arm["why"] == f"exit 1: {SHMEM_ERROR} (and 5 more failed run(s))"
    assert f"loo-shmem failed: exit 1: {SHMEM_ERROR} (and 5 more failed run(s))" in res["notes"]
    assert not any("Possible causes" in n for n in res["notes"])
    assert next(r for r in res["rows"] if r["arm"] == "loo-shmem")["flags"] == "runs failed, no samples"
    assert next(r for r in res["rows"] if r["arm"] == "sim")["flags"] == ""  # 6 steady processes: no warning
    assert not any("A/A arm" in n for n in res["notes"])


def test_short_flags_cover_every_warning_the_bench_writes():
    from capshim.bench import stats

    made = [*stats.stability_warnings([[100.0], [60.0]]),  # few processes, unstable
            *stats.stability_warnings([[100.0], [100.5], [99.5], [100.2], [150.0]]),  # outlier
            *stats.stability_warnings([[50.0], [100.0], [100.0], [100.0], [100.0]])]  # slow first
    runs = [{"run": 1, "exit_code": 1, "error": "exit 1"}, {"run": 2, "exit_code": 0, "contaminated": ["load 3 > 2"]}]
    s = analyze([{"arm": "b", "run": 2, "sample": 1, "test": "pp8", "tok_s": 1.0}],
                {"a": {"state": "failed", "spec": {"profile": "x"}, "runs": runs},
                 "b": {"state": "active", "runs": runs}}, baseline="b")
    made += s["arms"]["a"]["flags"] + s["arms"]["b"]["flags"]
    made.append("control ncnn moved: 0.90x, interval 0.85-0.95x excludes 1.00x (expected no change): "
                "the harness is unreliable here")  # metrics.py
    labels = {w: common.short_flag(w) for w in made}
    known = {label for _, label in common.FLAG_LABELS}
    assert all(label in known for label in labels.values()), labels  # none falls back to the sentence's head
    assert set(labels.values()) == {"few processes", "unstable", "outliers", "slow first process", None,
                                    "runs failed", "contaminated", "no samples", "control moved"}, labels
    assert labels["failed: not a shim result"] is None  # the row's state says it
    assert common.short_flag("something new: details") == "something new"


def test_an_a_a_of_1_42x_is_called_out():
    """Issue 28: ablate showed its A/A arm at 1.42x (range 0.81-2.19) with no word that the harness
    itself is unreliable here."""
    rs = {"aa": common.Ratio(1.42, None, None, "active", True, (0.81, 2.19))}
    (note,) = common.aa_warning({"pp512": rs})
    assert note.startswith("warning: the harness is unreliable here: ")
    assert "1.42x (range 0.81–2.19) pp512" in note and "pp512: range 0.81-2.19x leaves +-5%" in note
    # a range within +-5% holding 1.00x passes
    ok = {"aa": common.Ratio(1.01, None, None, "active", True, (0.97, 1.04))}
    assert common.aa_warning({"pp512": ok}) == []


def test_smallest_never_picks_an_arm_whose_runs_are_mostly_contaminated():
    """The one rule's gate (issue 28): a side mostly contaminated gives no reading, here no pick."""
    s = _summary({"native": 1000, "sim": 300, "loi-coopmat": 995, "loi-fp16": 400, "cum-2-intdot": 1000,
                  "cum-3-fp16": 1000})
    s["arms"]["loi-coopmat"]["runs"] = [{"run": i + 1, "contaminated": ["load"] if i < 4 else []} for i in range(6)]
    rs = common.ratios(s, "pp512")
    assert rs["loi-coopmat"].gate == "loi-coopmat mostly contaminated (4 of 6 runs)"
    assert not ablate.passes(rs["loi-coopmat"]) and rs["cum-2-intdot"].gate is None
    assert ablate.smallest(_arms(), rs).name == "cum-2-intdot"
