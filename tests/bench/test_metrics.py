"""Metric specs of generic workloads, their extraction, output checks, direction and control verdicts."""

from __future__ import annotations

import pytest

from capshim.bench import analysis, metrics
from capshim.bench.workloads import command
from capshim.errors import UsageError


def test_wall_defaults_to_seconds_lower_is_better():
    m = metrics.parse_spec("wall")
    assert (m.kind, m.arg, m.unit, m.better, m.name) == ("wall", None, "s", "lower", "wall")
    assert command.extract(m, "", "", 1.25, "x") == [1.25]


@pytest.mark.parametrize("spec, better, needle", [
    ("fps", "higher", "expected wall, json:PATH or regex:PATTERN"),
    ("json:", "higher", "needs a PATH"),
    ("json:a..b", "higher", "bad PATH"),
    ("regex:([0-9]+", "higher", "not a valid regular expression"),
    ("regex:(\\d+) (\\d+)", "higher", "exactly one capture group"),
    ("regex:elapsed_ms=[0-9.]+", "lower", "exactly one capture group"),
    ("json:fps", None, "--better higher|lower"),
    ("wall:x", None, "takes no argument"),
])
def test_bad_specs_name_the_flag(spec, better, needle):
    with pytest.raises(UsageError) as exc:
        metrics.parse_spec(spec, better=better)
    assert needle in str(exc.value) and str(exc.value).startswith("--metric")


def test_json_path_reads_numbers_and_lists_from_the_last_json_on_stdout():
    out = 'log line\n{"results": {"fps": 61.5, "runs": [{"ms": 3}, {"ms": 4}]}, "samples": [1, 2.5]}\n'
    m = metrics.parse_spec("json:results.fps", better="higher", unit="fps")
    assert command.extract(m, out, "", 0.1, "raw/a-1.json") == [61.5]
    assert command.extract(metrics.parse_spec("json:results.runs[1].ms", better="lower"), out, "", 0, "f") == [4.0]
    assert command.extract(metrics.parse_spec("json:samples", better="lower"), out, "", 0, "f") == [1.0, 2.5]


@pytest.mark.parametrize("spec, stdout, needle", [
    ("json:results.fps", '{"results": {}}', "key 'fps' not found under results"),
    ("json:runs[3]", '{"runs": [1]}', "has no item [3]"),
    ("json:v", "no json here", "no JSON found on stdout"),
    ("json:v", '{"v": -1}', "must be > 0"),
    ("json:v", '{"v": true}', "expected a finite number"),
    ("regex:time=(\\d+)", "nothing", "matched nothing"),
    ("regex:v=(\\S+)", "v=0", "0.0 must be > 0"),
    ("regex:v=(\\S+)", "v=-0.0", "-0.0 must be > 0"),
    ("regex:v=(\\S+)", "v=nan", "expected a finite number"),
    ("regex:v=(\\S+)", "v=1e400", "expected a finite number"),
])
def test_unreadable_output_names_flag_spec_and_file(spec, stdout, needle):
    m = metrics.parse_spec(spec, better="lower")
    with pytest.raises(metrics.MetricError) as exc:
        command.extract(m, stdout, "", 0.1, "raw/arm-1.json")
    msg = str(exc.value)
    assert needle in msg and msg.startswith(f"--metric {spec}: raw/arm-1.json")


def test_regex_takes_every_match_from_stdout_then_stderr():
    m = metrics.parse_spec(r"regex:took ([0-9.]+) ms", better="lower", unit="ms")
    assert command.extract(m, "took 3.5 ms\ntook 4 ms\n", "took 5 ms", 9, "f") == [3.5, 4.0, 5.0]


def test_regex_ignores_the_shims_own_stderr_lines():
    # the layer's banner names the answers it changed: it must not become a sample of some arms
    m = metrics.parse_spec(r"regex:maxComputeSharedMemorySize\s*=\s*(\d+)", better="higher")
    err = ("capshim-vulkan: VK_LAYER_CAPSHIM_device active in vulkaninfo[42]: lower maxComputeSharedMemorySize=24576\n"
           "WARNING: [Loader Message] Code 0 : maxComputeSharedMemorySize = 1\n"
           "\tmaxComputeSharedMemorySize = 24576\n")
    assert command.extract(m, "", err, 0.1, "f") == [24576.0]


def test_same_output_hashes_exact_numbers_within_tolerance():
    assert command.same_output("sha256:aa", "sha256:aa") and not command.same_output("sha256:aa", "sha256:ab")
    assert command.same_output([1, 2], [1, 2]) and not command.same_output([1, 2], [1, 3])
    a = {"values": [1.0, -2.0, 3.0], "rtol": 0.02}
    assert command.same_output({"values": [1.004, -2.003, 2.998], "rtol": 0.02}, a)
    assert not command.same_output({"values": [1.3, -2.0, 3.0], "rtol": 0.02}, a)
    assert not command.same_output({"values": [1.0, -2.0], "rtol": 0.02}, a)


def _summary(arm_samples: dict[str, list[float]], test: str, baseline: str, host: str | None = None) -> dict:
    records = [{"arm": a, "run": i, "sample": 1, "test": test, "tok_s": v}
               for a, vals in arm_samples.items() for i, v in enumerate(vals, 1)]
    arms = {a: {"state": "native"} for a in arm_samples}
    host_d = {"name": host, "tests": {test: arm_samples[host]}} if host else None
    return analysis.analyze(records, arms, baseline, host_d)


def test_lower_is_better_turns_ratios_into_times_faster():
    s = _summary({"base": [2.0, 2.1, 1.9, 2.0, 2.0], "fast": [1.0, 1.05, 0.95, 1.0, 1.0]}, "wall", "base",
                 host="base")
    raw = s["arms"]["fast"]["tests"]["wall"]["speedup"]
    assert raw["value"] == pytest.approx(0.5, rel=1e-3)
    lo, hi = raw["ci95"]
    metrics.annotate(s, {"wall": metrics.parse_spec("wall")})
    sp = s["arms"]["fast"]["tests"]["wall"]["speedup"]
    assert sp["value"] == pytest.approx(2.0, rel=1e-3)
    assert sp["ci95"] == pytest.approx([1 / hi, 1 / lo])
    assert s["arms"]["fast"]["tests"]["wall"]["pct_of_host"]["value"] == pytest.approx(200.0, rel=1e-3)
    assert s["arms"]["base"]["tests"]["wall"]["pct_of_host"]["value"] == pytest.approx(100.0)
    assert s["metrics"]["wall"]["better"] == "lower" and s["metrics"]["wall"]["unit"] == "s"
    assert any("lower is better for wall" in n for n in s["notes"])


def test_a_control_that_moves_is_flagged_and_one_that_stays_is_not():
    test = metrics.control_test("cpu")
    flat = _summary({"a": [1.0, 1.01, 0.99, 1.0, 1.02], "b": [1.0, 0.99, 1.01, 1.02, 1.0]}, test, "a")
    metrics.annotate(flat, {test: metrics.parse_spec("wall")}, ["cpu"])
    assert flat["controls"]["cpu"]["expectation"] == "no change"
    assert flat["controls"]["cpu"]["arms"]["b"][test]["moved"] is False
    assert not flat["arms"]["b"]["flags"]
    moved = _summary({"a": [1.0, 1.01, 0.99, 1.0, 1.02], "b": [1.5, 1.52, 1.49, 1.51, 1.5]}, test, "a")
    metrics.annotate(moved, {test: metrics.parse_spec("wall")}, ["cpu"])
    verdict = moved["controls"]["cpu"]["arms"]["b"][test]
    assert verdict["moved"] is True and verdict["ratio"] == pytest.approx(1 / 1.5, rel=0.01)
    assert any(f.startswith("control cpu moved: 0.67x") for f in moved["arms"]["b"]["flags"])


def test_an_annotated_summary_is_a_valid_summary_json_and_the_exporters_label_it():
    from capshim import summary
    from capshim.export import chart, markdown, table

    test = metrics.control_test("cpu")
    s = _summary({"base": [2.0, 2.1, 1.9, 2.0], "fast": [1.0, 1.05, 1.02, 1.03]}, "wall", "base")
    ctl = _summary({"base": [1.0, 1.01, 0.99, 1.0], "fast": [1.0, 0.99, 1.01, 1.0]}, test, "base")
    for arm in s["arms"]:
        s["arms"][arm]["tests"].update(ctl["arms"][arm]["tests"])
    s["tests"] += [test]
    metrics.annotate(s, {"wall": metrics.parse_spec("wall"), test: metrics.parse_spec("wall")}, ["cpu"])
    summary.validate(s, "summary.json")
    assert "wall: its wall-clock seconds" in s["method"]["statistic"] and "samples_ts" not in s["method"]["statistic"]
    tab = table.table([s])
    assert tab["columns"][2] == "median (s, lower is better)"  # one unit and direction: said once, in the header
    row = next(r for r in tab["rows"] if r["arm"] == "fast" and r["test"] == "wall")
    assert row["cells"][1] == "wall" and row["cells"][2] == "1.025"
    assert row["cells"][5].startswith("1.95x")  # baseline / arm: above 1.00x is faster
    md = markdown.serialize(s)
    assert "| median (s, lower is better) |" in md and "| cpu (control) |" in md
    assert chart.serialize(s)[:4] == b"\x89PNG"
    bad = {**s, "metrics": {"wall": {"unit": "s", "better": "sideways"}}}
    with pytest.raises(summary.SummaryShapeError, match=r"\$\.metrics\.wall\.better"):
        summary.validate(bad, "summary.json")
    bad = {**s, "controls": {"cpu": {"expectation": "no change", "tests": [], "arms": {"fast": {test: {}}}}}}
    with pytest.raises(summary.SummaryShapeError, match=r"\$\.controls\.cpu\.arms\.fast"):
        summary.validate(bad, "summary.json")


def test_tok_s_summaries_keep_the_tok_s_header():
    from capshim.export import table

    s = _summary({"base": [10.0, 11.0, 10.5], "b": [20.0, 21.0, 20.5]}, "pp512", "base")
    metrics.annotate(s, {})
    assert s["metrics"]["pp512"]["unit"] == "tok/s"
    tab = table.table([s])
    assert tab["columns"][2] == "median tok/s" and tab["rows"][0]["cells"][1] == "pp512"


def test_lower_is_better_inverts_the_aa_ratio_too():
    records = [{"arm": a, "run": i, "sample": 1, "test": "wall", "tok_s": v}
               for a, vals in {"native": [1.0, 1.02, 0.98], "aa": [2.0, 2.04, 1.96]}.items()
               for i, v in enumerate(vals, 1)]
    s = analysis.analyze(records, {"native": {"state": "native"}, "aa": {"state": "active", "spec": {"identity": True}}},
                         "native", aa_arm="aa")
    assert s["aa"]["tests"]["wall"]["value"] == pytest.approx(2.0)
    metrics.annotate(s, {"wall": metrics.parse_spec("wall")})
    assert s["aa"]["tests"]["wall"]["value"] == pytest.approx(0.5)
