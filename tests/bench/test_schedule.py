"""The precision loop's schedule (issue 31): which arms a round runs, when the rounds stop, and the
simulation of the whole loop that chose the rule.

The runner is driven by a mock executor (after hyperfine's mock benchmark executor): ``run_one``
returns runs with known synthetic values and starts no process, so the tests see exactly which arm
ran in which round.
"""

from __future__ import annotations

import io
import random
import signal
import types

import numpy as np
import pytest
from rich.console import Console

from capshim.bench import coverage, runner, schedule, sequential, stats
from capshim.bench.arms import Arm
from capshim.bench.plan import Plan
from capshim.bench.runs import RunResult
from capshim.bench.workloads.llama_bench import LlamaBenchWorkload
from capshim.evidence import Bundle

#: Relative spread of each arm's process values: the reference and "steady" agree within 0.2%,
#: "noisy" processes differ by 5%, so only noisy's comparison stays wider than a 2-point target.
SPREAD = {"ref": 0.002, "steady": 0.002, "noisy": 0.05}


class _Executor:
    """A mock ``run_one``: each run's value is drawn from a generator seeded by (arm, run), so the
    values do not depend on the order; ``stop_after`` runs in, it raises a stop signal (between
    rounds when it is a round's last run)."""

    def __init__(self, guard, stop_after: int | None = None):
        self.calls: list[tuple[str, int, int]] = []  # (arm, round, position)
        self.guard, self.stop_after = guard, stop_after

    def __call__(self, bundle, arm, n, w, timeout, work, record, launcher, probe, at, stop=None):
        self.calls.append((arm.name, *at))
        rng = np.random.default_rng([sum(map(ord, arm.name)), n])
        v = 100.0 * np.exp(rng.normal(0.0, SPREAD[arm.name]))
        recs = [{"arm": arm.name, "run": n, "sample": i, "test": "pp64", "tok_s": float(v * (1 + 1e-4 * i))}
                for i in range(3)]
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            self.guard.first = (signal.SIGINT,)
        return RunResult(arm.name, n, 0, None, False, 0.01, recs, {}, {}, None, round=at[0], position=at[1])


def _bench(tmp_path, monkeypatch, seed=1, cap=12, stop_after=None, name="b"):
    plan = Plan([Arm("ref"), Arm("steady"), Arm("noisy")], LlamaBenchWorkload("command", ["true"]), "ref", "ref",
                None, 5, "t", None, warmup=1, seed=seed, precision=2.0, cap=cap)
    guard = types.SimpleNamespace(first=None)
    executor = _Executor(guard, stop_after)
    monkeypatch.setattr(runner, "run_one", executor)
    monkeypatch.setattr(runner, "make_launcher", lambda *a: None)
    meta = {"schedule": [], "schedule_reasons": [], "arms": {a.name: {} for a in plan.arms}}
    loop = runner._Rounds(plan, Bundle.create(tmp_path / name, meta), guard, Console(file=io.StringIO()))
    loop.workdir = tmp_path
    loop.run(random.Random(plan.seed), types.SimpleNamespace())
    return loop, executor


def test_narrow_arms_stop_wide_ones_run_to_the_cap_and_the_schedule_is_what_ran(tmp_path, monkeypatch):
    loop, ex = _bench(tmp_path, monkeypatch)
    counts = {a: len(rs) for a, rs in loop.results.items()}
    assert counts == {"ref": 12, "steady": 5, "noisy": 12}  # steady: the minimum; noisy and ref: the cap
    assert min(counts.values()) >= schedule.MINIMUM
    meta = loop.bundle.metadata
    recorded = [c for c in ex.calls if c[1] > 0]
    assert len(meta["schedule"]) == 12 == len(meta["schedule_reasons"])
    for rnd, order in enumerate(meta["schedule"], 1):  # the recorded order is the order that ran
        assert order == [a for a, r, _ in recorded if r == rnd]
    assert all(sorted(o) == ["noisy", "ref", "steady"] for o in meta["schedule"][:5])  # every arm first
    assert all(sorted(o) == ["noisy", "ref"] for o in meta["schedule"][5:])
    assert all("widest: noisy pp64" in r for r in meta["schedule_reasons"][5:])
    assert "every arm" in meta["schedule_reasons"][0]
    # interleaved: the steady arm's runs are spread over the first rounds, not bunched at the end
    assert [r.round for r in loop.results["steady"]] == [1, 2, 3, 4, 5]
    assert loop.precision_state["reached"] is False


def test_the_order_is_reproducible_under_a_seed_and_differs_under_another(tmp_path, monkeypatch):
    one = _bench(tmp_path, monkeypatch, seed=5, name="one")[0].bundle.metadata["schedule"]
    two = _bench(tmp_path, monkeypatch, seed=5, name="two")[0].bundle.metadata["schedule"]
    other = _bench(tmp_path, monkeypatch, seed=6, name="three")[0].bundle.metadata["schedule"]
    assert one == two and one != other


def test_the_target_reached_stops_every_arm(tmp_path, monkeypatch):
    monkeypatch.setitem(SPREAD, "noisy", 0.002)
    loop, _ = _bench(tmp_path, monkeypatch)
    assert {len(rs) for rs in loop.results.values()} == {5} and loop.precision_state["reached"] is True


def test_a_signal_between_rounds_stops_the_loop(tmp_path, monkeypatch):
    # 3 warm-up runs, 5 rounds of 3, then adaptive rounds of 2: the 22nd run ends round 7
    loop, ex = _bench(tmp_path, monkeypatch, stop_after=22)
    assert len(ex.calls) == 22 and loop.stop() == "SIGINT"
    assert len(loop.bundle.metadata["schedule"]) == 7


def test_next_round_rule():
    comps = [("a", "pp", 2.5), ("b", "pp", 0.4), ("c", "pp", None)]
    counts = {"ref": 6, "a": 6, "b": 6, "c": 6}
    r = schedule.next_round(comps, counts, ["ref", "a", "b", "c"], "ref", 2.0, 10)
    assert r.arms == ("ref", "a", "c") and r.reason.startswith("widest: c pp has no interval yet")
    assert schedule.next_round([("a", "pp", 1.0)], counts, ["ref", "a"], "ref", 2.0, 10) is None  # reached
    capped = {**counts, "a": 10, "ref": 10}
    assert schedule.next_round([("a", "pp", 3.0)], capped, ["ref", "a"], "ref", 2.0, 10) is None  # cap
    r = schedule.next_round([("a", "pp", 3.0)], {"ref": 9, "a": 9}, ["ref", "a"], None, 2.0, 10)
    assert r.arms == ("a",)  # a host measured elsewhere: no reference arm to run
    assert schedule.next_round([], {"a": 3}, ["a"], None, 2.0, 10).arms == ("a",)


def test_the_vectorised_interval_is_ratio_ci():
    rng = np.random.default_rng(4)
    for model in ("normal", "outliers", "bimodal"):
        for _ in range(40):
            nx, ny = rng.integers(3, 15, 2)
            x, y = coverage.process_effects(model, nx, rng), coverage.process_effects(model, ny, rng)
            lo, hi = stats.ratio_ci(np.exp(x), np.exp(y), confidence=0.97)
            X, Y = np.full((1, 16), np.nan), np.full((1, 16), np.nan)
            X[0, :nx], Y[0, :ny] = x, y
            c, h = sequential.intervals(X, np.array([nx]), Y, np.array([ny]), 0.97)
            assert np.exp(c - h)[0] == pytest.approx(lo, rel=1e-9) and np.exp(c + h)[0] == pytest.approx(hi, rel=1e-9)


def test_the_simulated_loop_undercovers_at_95_and_covers_at_the_rule_level():
    """Optional stopping: 95% intervals checked after every round hold the truth less than 95% of the
    time on the bimodal model; at schedule.LEVEL at least 95% (2,000 benches: a binomial band of
    about +-1 point)."""
    naive = sequential.run_procedure("bimodal", 2.0, 2000, level=0.95, seed=11)
    rule = sequential.run_procedure("bimodal", 2.0, 2000, seed=11)
    assert naive["coverage"] < 0.945 < 0.95 <= rule["coverage"]
    assert rule["processes"][0] >= rule["processes"][1] >= rule["processes"][3] >= schedule.MINIMUM
    assert rule["capped"] == 0.0 and rule["reached"] == 1.0
    fixed = sequential.run_procedure("normal", 0.01, 1000, minimum=10, cap=10, level=0.95, seed=3)
    assert 0.93 <= fixed["coverage"] <= 0.97 and fixed["capped"] == 1.0  # no stopping rule: nominal


def test_the_table_says_the_level_of_a_loop_s_intervals():
    from capshim.export.table import _precision_note
    p = {"target": 2.0, "reached": True, "max_half_width": 1.9, "rounds": 9, "level": schedule.LEVEL}
    assert "intervals at 97%" in _precision_note({"precision": p})
    assert "intervals at" not in _precision_note({"precision": {**p, "level": 0.95}})


def test_the_table_header_and_method_name_the_level_the_intervals_were_computed_at():
    """A hostile review: intervals computed at 97% under the precision loop were headed "(95% CI)" and the
    method line began "95% CI: 95% Welch". The committed H200 bundle made with the loop says 97%."""
    import json

    from capshim.bench import stats
    from capshim.export.table import table
    from tests.conftest import REPO

    s = json.loads((REPO / "evidence/h200-default-2min/summary.json").read_text())
    assert s["precision"]["level"] == 0.97
    tab = table([s])
    assert any(c.endswith("(97% CI)") for c in tab["columns"]) and not any("95% CI" in c for c in tab["columns"])
    assert stats.ci_method(0.97).startswith("97% Welch") and "not 95%" in stats.ci_method(0.97)
    assert stats.ci_method(0.95) == stats.CI_METHOD
