"""The bench method (issue 10): same launch path, shuffled order, A/A arm, precision target,
telemetry, comparability and sweeps, with stand-in workloads (and the real Vulkan layer on
lavapipe for the A/A arm)."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest

from capshim import evidence, paths
from capshim.bench import runner, runs, telemetry
from capshim.bench.request import BenchRequest, defaults_for
from capshim.bench.workloads.kinds import help_default
from capshim.bench.workloads.llama_bench import LlamaBenchWorkload, llama_bench_workload
from capshim.bench.arms import Arm
from capshim.bench.plan import Plan
from tests.conftest import REPO, run_capshim

FIXTURE = REPO / "tests" / "fixtures" / "llama-bench" / "cpu-tiny.json"


def _script(tmp_path: Path, body: str, name: str = "fake-llama-bench") -> Path:
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return script


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _meta(out: Path) -> dict:
    return json.loads((out / "metadata.json").read_text())


@pytest.mark.slow
def test_every_arm_is_launched_the_same_way_with_a_varied_environment_size(tmp_path):
    log = tmp_path / "env.log"
    # each process logs: its status file (names arm and run), whether the pid wrapper set
    # CAPSHIM_TARGET_PID to its own pid, and the size of its environment in bytes
    script = _script(tmp_path, f'echo "$CAPSHIM_STATUS_FILE $([ "$CAPSHIM_TARGET_PID" = "$$" ] && echo wrapped) '
                               f'$(env | wc -c) [$VK_INSTANCE_LAYERS]" >> "{log}"\ncat "{FIXTURE}"')
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "native=", "--arm", "sim=simulate:vulkan-paravirt", "-r", "3",
                    "--out", str(out), "--seed", "11", "--", str(script),
                    env={"VK_INSTANCE_LAYERS": "", "VK_ADD_LAYER_PATH": ""})
    assert r.returncode == 0, r.stderr
    meta = _meta(out)
    native, sim = meta["arms"]["native"]["runs"], meta["arms"]["sim"]["runs"]
    # the same wrapper and the same variables, native's set to values that enable nothing
    for run in native + sim:
        assert run["exec_argv"][:2] == ["/bin/sh", "-c"]
    assert set(native[0]["env_delta"]) == set(sim[0]["env_delta"])
    assert native[0]["env_delta"]["VK_INSTANCE_LAYERS"] == "" and native[0]["env_delta"]["CAPSHIM_VK_DEVICE_CONFIG"] == ""
    assert sim[0]["env_delta"]["VK_INSTANCE_LAYERS"] == "VK_LAYER_CAPSHIM_device"
    lines = log.read_text().split("\n")[:-1]
    # the warm-up round (1 for a command) and 3 recorded rounds, 2 arms each
    assert len(lines) == 8 and all(" wrapped " in line for line in lines)
    # the status file is in capshim's private work folder (<arm>-<run>/), never inside the bundle
    assert sum(bool(re.search(r"/native-[0-9]+/status\.jsonl ", line)) for line in lines) == 3
    assert not any(line.startswith(str(out)) for line in lines)
    sizes = [int(line.split()[2]) for line in lines]
    assert len(set(sizes)) > 4  # padded to a common size plus a random offset per run
    assert max(sizes) - min(sizes) < runs.PAD_RANGE + 1024
    assert native[0]["env_delta"][runs.PAD_VAR].endswith("bytes>")


@pytest.mark.slow
def test_arm_order_is_a_fresh_seeded_permutation_per_round(tmp_path):
    script = _script(tmp_path, f'cat "{FIXTURE}"')

    def bench(out, seed):
        r = run_capshim("bench", "--arm", "a=", "--arm", "b=", "--arm", "c=", "-r", "6", "--warmup", "0",
                        "--seed", str(seed), "--out", str(out), "--", str(script))
        assert r.returncode == 0, r.stderr
        return _meta(out)

    meta = bench(tmp_path / "one", 5)
    assert meta["method"]["seed"] == 5
    schedule = meta["schedule"]
    assert len(schedule) == 6 and all(sorted(rnd) == ["a", "b", "c"] for rnd in schedule)
    assert len({tuple(rnd) for rnd in schedule}) > 1
    assert bench(tmp_path / "two", 5)["schedule"] == schedule  # the seed makes it reproducible
    with open(tmp_path / "one" / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        assert schedule[int(row["round"]) - 1][int(row["position"]) - 1] == row["arm"]
    summary = _summary(tmp_path / "one")
    assert [r["position"] for r in summary["arms"]["a"]["runs"]] == [rnd.index("a") + 1 for rnd in schedule]
    st = summary["arms"]["a"]["tests"]["pp64"]
    assert st["processes"] == 6 and st["repetitions"] == 3 and st["n"] == 18


NOISY = """awk -v seed="$$" 'BEGIN { srand(seed); v = 100 * (1 + 0.2 * (rand() - 0.5));
  printf "[{\\"n_prompt\\": 64, \\"n_gen\\": 0, \\"samples_ts\\": [%f, %f]}]\\n", v, v * 1.01 }'"""


@pytest.mark.slow
def test_precision_adds_rounds_until_the_cap_and_says_so(tmp_path):
    script = _script(tmp_path, NOISY)
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "a=", "--arm", "b=", "-r", "2", "--warmup", "0", "--precision", "0.01",
                    "--max-runs", "5", "--out", str(out), "--", str(script))
    assert r.returncode == 0, r.stderr
    s = _summary(out)
    assert s["arms"]["a"]["tests"]["pp64"]["processes"] == 5  # an interval needs 5 processes a side
    p = s["precision"]
    assert p["reached"] is False and p["rounds"] == 5 and p["stopped_by"] == "--max-runs 5 reached"
    assert p["max_half_width"] > 0.01
    said = " ".join(r.stdout.split())  # the notes wrap between words at 80 columns
    assert "precision NOT reached" in said and "--max-runs 5 reached" in said
    assert evidence.verify(out) == []
    # a target the base rounds already meet stops there
    out2 = tmp_path / "c"
    quiet = _script(tmp_path, f'cat "{FIXTURE}"', "quiet")
    r = run_capshim("bench", "--arm", "a=", "--arm", "b=", "-r", "2", "--warmup", "0", "--precision", "5",
                    "--out", str(out2), "--", str(quiet))
    assert r.returncode == 0, r.stderr
    # (an interval, hence a precision, needs 5 processes a side: the loop adds rounds up to 5)
    assert _summary(out2)["precision"]["reached"] is True and _summary(out2)["precision"]["rounds"] == 5
    r = run_capshim("bench", "--arm", "a=", "--max-runs", "3", "--", str(quiet))
    assert r.returncode == 2 and "--precision" in r.stderr
    r = run_capshim("bench", "--arm", "a=", "--precision", "5", "--max-runs", "3", "--", str(quiet))
    assert r.returncode == 2 and "--max-runs 3: below 5 processes" in r.stderr


@pytest.mark.slow
def test_aa_arm_answers_the_stock_values_and_its_ratio_is_in_the_table(tmp_path, stock_probe):
    # the stand-in prints the rows, then becomes vulkaninfo (same pid): the app layer loads and hooks;
    # it names the probed device as llama.cpp would (the rows come from a CPU build: issue 20)
    d = stock_probe["device"]
    line = f"ggml_vulkan: 0 = {d['name']} ({d['driver']}) | uma: 0 | fp16: 1 | warp size: 8"
    script = _script(tmp_path, f'echo "{line}" >&2\ncat "{FIXTURE}"\nexec vulkaninfo --summary >/dev/null 2>&1')
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "native=", "--aa", "-r", "2", "--warmup", "0", "--out", str(out),
                    "--", str(script))
    assert r.returncode == 0, r.stderr
    s = _summary(out)
    aa = s["arms"]["aa"]
    assert aa["spec"]["identity"] is True and aa["state"] == "active"
    assert aa["runs"][0]["shims"]["VK_LAYER_CAPSHIM_app"]["changes"] == 0  # it answered the stock values
    assert s["aa"]["arm"] == "aa" and s["aa"]["reference"] == "native"
    assert set(s["aa"]["tests"]) == set(s["tests"])
    assert "A/A (aa: shim active, stock answers) vs native: pp64 " in r.stdout
    assert "A/A (aa" in (out / "report.md").read_text()
    r = run_capshim("bench", "--arm", "x=identity", "--arm", "y=identity", "--", str(script))
    assert r.returncode == 2 and "one A/A (identity) arm" in r.stderr


def test_contamination_from_telemetry():
    clean = {"load": [0.5, 0.5, 0.5], "cores": 2, "nvml": {"available": False, "reason": "no NVML"}}
    assert telemetry.contamination(clean, clean) == []
    busy = {"load": [3.5, 1.0, 1.0], "cores": 2,
            "nvml": {"available": True, "gpus": [{"index": 0, "pids": [4242, 77], "throttle": ["power cap"]}]}}
    why = telemetry.contamination(busy, clean, own_pids={77})
    assert why == ["load 3.5 > 2 cores", "GPU 0: another process before (pid 4242)",
                   "GPU 0: clocks held down before (power cap)"]
    snap = telemetry.Telemetry()
    try:
        s = snap.snapshot()
    finally:
        snap.close()
    assert len(s["load"]) == 3 and s["cores"] >= 1
    assert "available" in s["nvml"]
    if not s["nvml"]["available"]:  # absent NVML is a recorded fact, with its reason
        assert s["nvml"]["reason"]


def test_contaminated_runs_are_flagged_and_excluded_only_when_asked(tmp_path, monkeypatch):
    script = _script(tmp_path, f'cat "{FIXTURE}"')
    calls = {"n": 0}

    def fake(before, after, own_pids=None):
        calls["n"] += 1
        return ["load 9 > 2 cores"] if calls["n"] % 4 == 1 else []

    monkeypatch.setattr(telemetry, "contamination", fake)
    arms = [Arm("a"), Arm("b")]
    wl = llama_bench_workload([str(script)])
    for exclude, name in ((False, "kept"), (True, "dropped")):
        calls["n"] = 0
        res = runner.run(Plan(arms, wl, "a", None, None, 4, "t", None, warmup=0, seed=3,
                              exclude_contaminated=exclude, out=str(tmp_path / name)))
        runs = [r for a in res.summary["arms"].values() for r in a["runs"]]
        dirty = [r for r in runs if r["contaminated"]]
        assert len(dirty) == 2 and all(r["excluded"] is exclude for r in dirty)
        assert all(r["telemetry"]["before"]["load"] for r in runs)
        total = sum(a["tests"]["pp64"]["processes"] for a in res.summary["arms"].values())
        assert total == (6 if exclude else 8)
        flags = " ".join(f for a in res.summary["arms"].values() for f in a["flags"])
        assert "contaminated (run" in flags and ("excluded" in flags) is exclude
        assert (tmp_path / name / "results.csv").read_text().count(",yes\n") == 2 * 18  # 18 samples per run
        assert evidence.verify(tmp_path / name) == []


SWEEP_ROW = {"model_type": "llama 1B Q4_0", "n_prompt": 64, "n_gen": 0, "n_threads": 2}


@pytest.mark.slow
def test_a_sweep_is_one_series_per_configuration_everywhere(tmp_path):
    rows = [{**SWEEP_ROW, "n_gpu_layers": ngl, "flash_attn": fa, "samples_ts": [100.0 + ngl + fa, 101.0 + ngl]}
            for ngl in (0, 99) for fa in (0, 1)]
    data = tmp_path / "sweep.json"
    data.write_text(json.dumps(rows))
    script = _script(tmp_path, f'cat "{data}"')
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "a=", "--arm", "b=", "-r", "2", "--warmup", "0", "--out", str(out),
                    "--", str(script))
    assert r.returncode == 0, r.stderr
    s = _summary(out)
    names = ["pp64 ngl=0 fa=0", "pp64 ngl=0 fa=1", "pp64 ngl=99 fa=0", "pp64 ngl=99 fa=1"]
    assert s["tests"] == names
    for t in names:
        assert s["arms"]["b"]["tests"][t]["speedup"]["value"] == pytest.approx(1.0)
    assert s["arms"]["a"]["tests"]["pp64 ngl=99 fa=1"]["config"]["n_gpu_layers"] == 99
    for t in names:
        assert f"| b | {t} |" in (out / "report.md").read_text()
    res = run_capshim("report", str(out), "--format", "csv")
    assert res.returncode == 0 and sum(line.startswith("b,pp64 ngl=") for line in res.stdout.splitlines()) == 4
    assert "ngl=99 fa=1" in (out / "results.csv").read_text()


@pytest.mark.slow
def test_a_host_baseline_of_another_model_is_refused_and_the_bundle_kept(tmp_path):
    host = tmp_path / "host.json"
    host.write_text(json.dumps([{**SWEEP_ROW, "model_type": "llama 8B Q4_K - Medium", "samples_ts": [50.0]}]))
    guest = tmp_path / "guest.json"
    guest.write_text(json.dumps([{**SWEEP_ROW, "samples_ts": [100.0]}]))
    script = _script(tmp_path, f'cat "{guest}"')
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "a=", "-r", "1", "--warmup", "0", "--host-baseline", str(host),
                    "--out", str(out), "--", str(script))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "host 'host' and arm 'a' run 1 differ in model_type: 'llama 8B Q4_K - Medium' vs 'llama 1B Q4_0'" in r.stderr
    assert evidence.verify(out) == []  # the finished runs are sealed, the rows marked
    assert _summary(out)["arms"]["a"]["tests"]["pp64"]["mismatch"][0]["field"] == "model_type"
    out2 = tmp_path / "c"
    r = run_capshim("bench", "--arm", "a=", "-r", "1", "--warmup", "0", "--host-baseline", str(host),
                    "--allow-mismatch", "--out", str(out2), "--", str(script))
    assert r.returncode == 0, r.stderr
    assert "CONFIG DIFFERS" in (out2 / "report.md").read_text()


def test_model_hash_is_read_from_the_json_record(tmp_path):

    m = tmp_path / "m.gguf"
    m.write_bytes(b"GGUF" + b"\0" * 100)
    digest = paths.cached_sha256(m)  # writes the JSON record beside the file
    assert json.loads((tmp_path / "m.gguf.sha256").read_text())["sha256"] == digest
    assert runner._model_sha(m) == digest == evidence.sha256_file(m)
    (tmp_path / "m.gguf.sha256").write_text('{"sha256": "junk"}')  # a bad record: hashed again
    assert runner._model_sha(m) == digest
    os.utime(m, ns=(1, 1))
    assert runner._model_sha(m) == digest


TWO_TESTS = """awk -v seed="$$" 'BEGIN { srand(seed); v = 100 * (1 + 0.4 * (rand() - 0.5));
  printf "[{\\"n_prompt\\": 64, \\"n_gen\\": 0, \\"samples_ts\\": [100, 100]},"
  printf " {\\"n_prompt\\": 0, \\"n_gen\\": 16, \\"samples_ts\\": [%f, %f]}]\\n", v, v * 1.01 }'"""


@pytest.mark.slow
def test_precision_test_limits_the_target_to_the_named_tests(tmp_path):
    script = _script(tmp_path, TWO_TESTS, "two")
    common = ["--arm", "a=", "--arm", "b=", "-r", "2", "--warmup", "0", "--precision", "1", "--max-runs", "6"]
    only_pp = tmp_path / "pp"
    r = run_capshim("bench", *common, "--precision-test", "pp64", "--out", str(only_pp), "--", str(script))
    assert r.returncode == 0, r.stderr
    p = _summary(only_pp)["precision"]
    assert p["reached"] is True and p["rounds"] == 5 and p["tests"] == ["pp64"]  # 5: the first interval
    every = tmp_path / "all"
    r = run_capshim("bench", *common, "--out", str(every), "--", str(script))
    assert r.returncode == 0, r.stderr
    p = _summary(every)["precision"]
    assert p["reached"] is False and p["rounds"] == 6 and p["tests"] == "all"  # the noisy tg16 keeps it going
    r = run_capshim("bench", "--arm", "a=", "--precision-test", "pp64", "--", str(script))
    assert r.returncode == 2 and "--precision" in r.stderr


@pytest.mark.slow
def test_precision_test_naming_no_test_stops_after_the_first_round(tmp_path):
    """`--precision-test pp999`: exit 2 naming the flag and the workload's tests, not a run to --max-runs."""
    script = _script(tmp_path, TWO_TESTS, "two")
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "a=", "--arm", "b=", "-r", "2", "--warmup", "0", "--precision", "1",
                    "--max-runs", "50", "--precision-test", "pp999", "--out", str(out), "--", str(script))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "--precision-test pp999: no such test" in r.stderr and "pp64" in r.stderr
    assert evidence.verify(out) == []
    assert len(_summary(out)["arms"]["a"]["runs"]) == 1


def test_gpu_default_has_a_precision_target_that_user_options_override(monkeypatch, tmp_path):
    from capshim.bench import plan as plan_mod

    real_pick = plan_mod.pick_device

    def as_gpu(backend, stock):
        index, chosen = real_pick(backend, stock)
        chosen = {**chosen, "device": {**chosen["device"], "type": "discrete-gpu"}}
        return index, chosen

    monkeypatch.setattr(plan_mod, "pick_device", as_gpu)
    monkeypatch.setattr(plan_mod.builtin, "builtin_workload", lambda *a, **k: LlamaBenchWorkload("builtin", ["true"]))
    make = lambda **kw: plan_mod.make_plan(BenchRequest(**kw), platform="linux")
    p = make()
    assert (p.precision, p.precision_tests, p.cap, p.repetitions) == (2.0, ["pp512"], 24, 5)
    assert p.precision == defaults_for("builtin", cpu=False).precision[0]  # the one table
    assert make(repetitions=5).precision is None and make(repetitions=5).cap == 5  # -r is the user's choice
    p = make(precision=5.0)  # the user's target replaces the default's cap, keeps its test (pp512, not tg128)
    assert (p.precision, p.precision_tests, p.cap) == (5.0, ["pp512"], 60)  # 5 x -r, at least schedule.CAP
    p = make(max_runs=20, seed=7, timeout=30.0, exclude_contaminated=True, allow_mismatch=True)
    assert (p.cap, p.seed, p.timeout, p.exclude_contaminated, p.allow_mismatch) == (20, 7, 30.0, True, True)
    assert isinstance(make().seed, int)  # drawn once, in the plan; the runner only reads it
    # every workload kind has the one loop on a GPU: a --metric command, +-2 points on every test
    p = make(command=("sh", "-c", "true"), metric="wall")
    assert (p.precision, p.precision_tests, p.cap, p.repetitions) == (2.0, None, 20, 5)
    assert make(command=("sh", "-c", "true"), metric="wall", repetitions=3).precision is None


@pytest.mark.slow
def test_bench_help_reads_its_defaults_from_the_one_table():
    r = run_capshim("bench", "--help")
    text = " ".join(r.stdout.split())
    for what in ("processes", "process_reps", "warmup"):
        assert " ".join(help_default(what).split()) in text, what
    assert "the llama.cpp workload 5 (3 on a CPU device)" in text
    lo, hi = defaults_for("builtin", cpu=False).process_s  # how long a process takes, from the same table
    assert f"the llama.cpp workload: {lo:g}-{hi:g} s on a GPU" in text


@pytest.mark.slow
def test_bench_refuses_an_arm_whose_answers_break_the_subgroup_order(tmp_path):
    # lavapipe: min = size = max = 8; a lowering profile that sets the minimum to 16
    # would report min 16 > max 8, which llama.cpp asserts on (issue: subgroup answers)
    prof = tmp_path / "minsg.toml"
    prof.write_text('name="m"\napi="vulkan"\ndirection="lower"\nversion=1\ndescription="d"\n'
                    "[capabilities]\nminSubgroupSize = 16\n")
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "a=", "--arm", f"b=simulate:{prof}", "-r", "1", "--out", str(out),
                    "--", "true")
    assert r.returncode == 2
    assert "--arm b" in r.stderr and "minSubgroupSize 16" in r.stderr and "spec requires" in r.stderr
    assert not out.exists()  # refused before anything ran


@pytest.mark.parametrize("device_type, sizes", [("cpu", (128, 32)), ("discrete-gpu", (512, 128))])
def test_the_default_sizes_come_from_the_device_row_of_the_table(monkeypatch, device_type, sizes):
    """The CPU default is pp128/tg32 (the first command within 3 minutes on 2 cores), a GPU's llama-bench's
    pp512/tg128; -p/-n win over either; the precision test follows -p. No device is probed (a fake)."""
    from capshim.bench import plan as plan_mod

    monkeypatch.setattr(plan_mod, "_resolve_on_device", lambda arms, api: ({"name": "fake", "type": device_type}, {}, []))
    seen = []
    monkeypatch.setattr(plan_mod.builtin, "builtin_workload",
                        lambda model, p, n, *a, **k: seen.append((p, n)) or LlamaBenchWorkload("builtin", ["true"]))
    d = defaults_for("builtin", cpu=device_type == "cpu")
    assert (d.n_prompt, d.n_gen) == sizes
    plan = plan_mod.make_plan(BenchRequest(), platform="linux")
    assert seen[-1] == sizes
    if device_type != "cpu":
        assert plan.precision_tests == [f"pp{sizes[0]}"]
    plan = plan_mod.make_plan(BenchRequest(n_prompt=64, n_gen=8), platform="linux")
    assert seen[-1] == (64, 8)
    if device_type != "cpu":
        assert plan.precision_tests == ["pp64"]
    assert f"{sizes[0]}" in help_default("n_prompt") and f"{sizes[1]}" in help_default("n_gen")


def test_an_explicit_precision_applies_to_the_workloads_own_test(monkeypatch):
    """--precision 1 without --precision-test aims at pp512 on a GPU, as the default target does: the
    H200 run of 2026-12-02 (evidence/h200-precision-1) ran 22 rounds to its time limit on tg128,
    whose processes spread 15-37%, although every pp512 interval was near +-1. --precision-test wins;
    on a CPU device, where the workload has no target of its own, it is every test."""
    from capshim.bench import plan as plan_mod

    monkeypatch.setattr(plan_mod.builtin, "builtin_workload", lambda *a, **k: LlamaBenchWorkload("builtin", ["true"]))
    for device_type, want in (("discrete-gpu", ["pp512"]), ("cpu", None)):
        monkeypatch.setattr(plan_mod, "_resolve_on_device",
                            lambda arms, api, t=device_type: ({"name": "fake", "type": t}, {}, []))
        plan = plan_mod.make_plan(BenchRequest(precision=1.0), platform="linux")
        assert (plan.precision, plan.precision_tests) == (1.0, want), device_type
        plan = plan_mod.make_plan(BenchRequest(precision=1.0, precision_tests=("tg128",)), platform="linux")
        assert plan.precision_tests == ["tg128"]


def test_a_profile_warning_is_said_once_naming_every_arm(monkeypatch, capsys):
    """The first command printed the same 400-character no-op line for vm-stock and vm-unlocked (issue
    19's new-user trial): a warning about one profile is said once, naming the arms it applies to."""
    from capshim.bench import plan as plan_mod

    monkeypatch.setattr(plan_mod.builtin, "builtin_workload", lambda *a, **k: LlamaBenchWorkload("builtin", ["true"]))
    plan_mod.make_plan(BenchRequest(arms=("a=simulate:vulkan-paravirt", "b=simulate:vulkan-paravirt")),
                       platform="linux")
    err = capsys.readouterr().err
    noop = [line for line in err.splitlines() if "change nothing" in line]
    assert len(noop) == 1 and noop[0].startswith("capshim: warning: arms a, b: simulate:builtin:vulkan-paravirt:")


def test_help_default_names_the_kinds_of_the_registry(monkeypatch):
    """bench --help names each kind that owns a DEFAULTS row by the registry's label; a kind added
    to the registry (here: a stand-in owning the ncnn row) appears without an edit elsewhere."""
    from dataclasses import replace

    from capshim.bench.workloads import kinds

    owners = [k for k in kinds._registry().values() if k.name == k.defaults]
    assert {k.name for k in owners} == {kind for kind, _ in __import__("capshim.bench.request",
                                                                     fromlist=["DEFAULTS"]).DEFAULTS}
    text = help_default("processes")
    assert all(k.label in text for k in owners)
    fake = type("M", (), {"KIND": replace(kinds.ncnn.KIND, label="a stand-in kind")})
    monkeypatch.setattr(kinds, "_MODULES", (*[m for m in kinds._MODULES if m is not kinds.ncnn], fake))
    from capshim.bench.request import defaults_for
    gpu, cpu = defaults_for("ncnn", False).processes, defaults_for("ncnn", True).processes
    assert f"a stand-in kind {gpu}" + (f" ({cpu} on a CPU device)" if cpu != gpu else "") in help_default("processes")
