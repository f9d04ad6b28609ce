"""The summary.json contract (capshim.summary): one reader, one schema, one "run failed"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capshim import summary
from capshim.bench import analysis, arms, runner, runs

GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "summary.json"


@pytest.mark.parametrize("run, why", [
    ({"exit_code": 0, "signal": None, "timed_out": False, "error": None}, None),
    ({"exit_code": None, "signal": None, "timed_out": False}, None),  # capshim report --arm: external
    ({"exit_code": None, "signal": None, "timed_out": True, "error": "timed out after 5 s"}, "timed out"),
    ({"exit_code": None, "signal": "SIGSEGV", "timed_out": False}, "killed by SIGSEGV"),
    ({"exit_code": 3, "signal": None, "timed_out": False}, "exit 3"),
    # exit 0 but the output could not be read: a failed run for the bench, so for every reader too
    ({"exit_code": 0, "signal": None, "timed_out": False, "error": "--metric json:x: no number"},
     "--metric json:x: no number"),
    ({"exit_code": None, "signal": None, "timed_out": False, "error": "not started: gone"}, "not started: gone"),
    ("run 1", "not a run record"),
])
def test_run_failed_is_one_classification(run, why):
    assert summary.run_failed(run) == why


def test_the_bench_arm_state_and_the_analysis_flags_agree_with_run_failed():
    # a run that exited 0 but whose output could not be read: the runner called the arm failed,
    # the analysis did not count the run as failed (two classifications); now both use run_failed
    bad = runs.RunResult("a", 1, 0, None, False, 0.1, [], {}, {}, None, error="--metric json:x: no number")
    arm = arms.Arm("a")
    assert runner._arm_state(arm, [bad]) == "failed"
    s = analysis.analyze([], {"a": {"state": "failed", "runs": [bad.info()]}}, "a")
    assert "1 of 1 runs failed (run 1: --metric json:x: no number)" in s["arms"]["a"]["flags"]


def test_load_reads_a_bundle_folder_or_the_file(tmp_path):
    assert summary.load(GOLDEN)["schema"] == summary.SCHEMA
    (tmp_path / "summary.json").write_bytes(GOLDEN.read_bytes())
    assert summary.load(tmp_path) == summary.load(GOLDEN)


@pytest.mark.parametrize("text, needle", [
    ("[" * 5000 + "]" * 5000, "nested deeper"),
    ('{"baseline": NaN, "arms": {}}', "invalid JSON"),
    ('{"baseline": "x", "arms": {"y": {"state": "native", "tests": {}}}}', r"\$\.baseline"),
    ('{"baseline": "a", "arms": {"a": {"state": "native"}}}', r"\$\.arms\.a"),
])
def test_load_refuses_with_the_file_named(tmp_path, text, needle):
    f = tmp_path / "summary.json"
    f.write_text(text)
    with pytest.raises(summary.SummaryShapeError, match=needle) as exc:
        summary.load(f)
    assert str(f) in str(exc.value) and exc.value.exit_code == 2


def test_analysis_writes_what_the_contract_reads():
    s = analysis.analyze([{"arm": "a", "test": "pp8", "tok_s": 5.0, "run": 1}], {"a": {"state": "native"}}, "a")
    assert summary.validate(json.loads(json.dumps(s)), "x")["schema"] == summary.SCHEMA
    with pytest.raises(summary.AnalysisError, match="state 'weird'"):
        analysis.analyze([], {"a": {"state": "weird"}}, "a")
    assert set(summary.NOT_SHIM_STATES) < set(summary.STATES)
