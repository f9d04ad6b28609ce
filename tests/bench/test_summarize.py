"""One records -> summary recipe (issue 29 item 2): the summary a bench seals is made by
:class:`capshim.bench.summarize.Recipe` whichever finalize step makes it, so a signal during the
analysis, or an analysis step that raised, never seals a summary without the metric's direction or
with runs ``--exclude-contaminated`` drops."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from capshim import evidence
from capshim.bench import analysis, metrics, runner, summarize, telemetry
from capshim.bench.arms import Arm
from capshim.bench.plan import Plan
from capshim.bench.workloads.command import command_workload
from capshim.contracts import signals

REPS = 4


def _workload(tmp_path: Path):
    """A command whose metric is lower-is-better seconds: arm ``fast`` takes about a quarter as long
    (1.1-1.7 s against 4.1-4.7 s, the tenths from the process id: every ratio is above 2.4)."""
    script = tmp_path / "took.sh"
    script.write_text('#!/bin/sh\ncase "$CAPSHIM_STATUS_FILE" in */fast-*) v=1;; *) v=4;; esac\n'
                      'echo "took $v.$(( $$ % 7 + 1 )) s"\n')
    script.chmod(0o755)
    metric = metrics.parse_spec(r"regex:took ([0-9.]+) s", better="lower", unit="s", name="took")
    return command_workload([str(script)], metric)


def _bench(tmp_path: Path, monkeypatch, name: str, **kw):
    """A bench of arms slow (baseline, host) and fast; every 3rd run flagged contaminated and
    excluded. Returns ``(result or the SystemExit, the recipe the bench finalized with)``."""
    calls = {"n": 0}

    def busy(before, after, own_pids=None):
        calls["n"] += 1
        return ["load 9 > 2 cores"] if calls["n"] % 3 == 1 else []

    monkeypatch.setattr(telemetry, "contamination", busy)
    seen = {}
    real_steps = summarize.steps

    def steps(recipe, *a, **k):
        seen["recipe"] = recipe
        return real_steps(recipe, *a, **k)

    monkeypatch.setattr(summarize, "steps", steps)
    try:
        res = runner.run(Plan([Arm("slow"), Arm("fast")], _workload(tmp_path), "slow", kw.get("host_arm"), None,
                              REPS, "t", None, warmup=0, seed=5, exclude_contaminated=True,
                              out=str(tmp_path / name)))
    except SystemExit as stop:
        res = stop
    return res, seen["recipe"]


def _directed_and_clean(s: dict) -> None:
    """The facts the plain analysis got wrong: the direction and the exclusion."""
    assert s["metrics"]["took"]["better"] == "lower"
    fast = s["arms"]["fast"]["tests"]["took"]
    assert fast["speedup"]["value"] > 1.5  # "times faster": about 4.4/1.4, not its inverse
    dirty = [r for a in s["arms"].values() for r in a["runs"] if r.get("contaminated")]
    assert dirty and all(r["excluded"] for r in dirty)
    kept = sum(a["tests"]["took"]["processes"] for a in s["arms"].values())
    assert kept == 2 * REPS - len(dirty)


def test_a_signal_during_the_analysis_seals_the_full_summary(tmp_path, monkeypatch):
    real = analysis.analyze
    said = {"n": 0}

    def signalled(*a, **k):  # the stop signal arrives while the bench is analysing
        said["n"] += 1
        if said["n"] == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*a, **k)

    monkeypatch.setattr(analysis, "analyze", signalled)
    # the slow steps' grace after the first signal, long enough for a loaded machine: the test is
    # about which recipe seals, not about the grace period (tests/test_evidence.py tests that)
    monkeypatch.setattr(signals, "SEAL_WAIT_S", 600.0)
    res, recipe = _bench(tmp_path, monkeypatch, "b", host_arm="slow")
    assert isinstance(res, SystemExit) and res.code == 130  # sealed, then 128+SIGINT
    assert evidence.verify(tmp_path / "b") == []
    sealed = json.loads((tmp_path / "b" / "summary.json").read_text())
    monkeypatch.setattr(analysis, "analyze", real)
    full = json.loads(evidence.strict_json({**recipe.summary(), "interrupted": False}))
    assert sealed == full
    _directed_and_clean(sealed)
    assert sealed["host"]["name"] == "slow" and "finalize_failures" not in sealed


def test_two_signals_during_the_analysis_seal_the_full_summary(tmp_path, monkeypatch):
    """Issue 29: a second signal during the analysis sealed the empty summary. Both signals arrive
    inside the analysis, each after the guard has taken the one before (its state is the event); the
    grace is left as it is. The sealed summary is the uninterrupted one; only the presentation steps
    (report, chart) may be recorded as skipped."""
    real = analysis.analyze
    said = {"n": 0}

    def signalled(*a, **k):
        said["n"] += 1
        if said["n"] == 1:
            guard = signals.SealGuard._active
            os.kill(os.getpid(), signal.SIGINT)
            assert guard.first is not None  # the guard took the first: sealing, slow steps get a grace
            os.kill(os.getpid(), signal.SIGTERM)
            assert guard.abort == "SIGTERM"  # and the second: the slow steps are to be skipped
        return real(*a, **k)

    monkeypatch.setattr(analysis, "analyze", signalled)
    res, recipe = _bench(tmp_path, monkeypatch, "b", host_arm="slow")
    assert said["n"] >= 1
    assert isinstance(res, SystemExit) and res.code == 130  # the first signal's code, after the seal
    assert evidence.verify(tmp_path / "b") == []
    sealed = json.loads((tmp_path / "b" / "summary.json").read_text())
    failures = sealed.pop("finalize_failures", [])
    assert {f["step"] for f in failures} <= {"report", "chart"}, failures
    assert all(f["error"] == "skipped: interrupted by SIGTERM" for f in failures)
    monkeypatch.setattr(analysis, "analyze", real)
    full = json.loads(evidence.strict_json({**recipe.summary(), "interrupted": False}))
    assert sealed == full
    _directed_and_clean(sealed)
    assert sealed["host"]["name"] == "slow" and sealed["arms"]["fast"]["tests"]


def test_an_analysis_that_raised_falls_back_to_the_same_recipe(tmp_path, monkeypatch):
    real = analysis.analyze
    calls = {"n": 0}

    def flaky(*a, **k):  # the first try (with the host baseline) breaks
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("analysis broke")
        return real(*a, **k)

    monkeypatch.setattr(analysis, "analyze", flaky)
    res, recipe = _bench(tmp_path, monkeypatch, "b", host_arm="slow")
    sealed = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert [f["step"] for f in sealed["finalize_failures"]] == ["host baseline"]
    _directed_and_clean(sealed)
    assert sealed["host"] is None  # the fallback is the recipe without its host, nothing else dropped
    monkeypatch.setattr(analysis, "analyze", real)
    want = json.loads(evidence.strict_json({**recipe.summary(with_host=False), "interrupted": False,
                                             "finalize_failures": sealed["finalize_failures"]}))
    assert sealed == want
    assert res.summary == sealed


def test_the_host_rule_groups_an_arm_by_process():
    recs = [{"arm": "n", "run": 1, "test": "t", "tok_s": 1.0}, {"arm": "n", "run": 1, "test": "t", "tok_s": 2.0},
            {"arm": "n", "run": 2, "test": "t", "tok_s": 3.0}, {"arm": "x", "run": 1, "test": "t", "tok_s": 9.0}]
    host = summarize.host_of_arm(recs, "n")
    assert host["tests"] == {"t": [[1.0, 2.0], [3.0]]} and host["source"] == "arm n of this bench"
