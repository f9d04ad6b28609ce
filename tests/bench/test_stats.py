"""Statistics: descriptive values, process-level intervals (~95% coverage in the simulation), the range below 5 processes, warnings."""

from __future__ import annotations

import numpy as np
import pytest

from capshim.bench import coverage, stats


def test_describe_known_values():
    d = stats.describe([10.0, 12.0, 11.0, 13.0, 100.0])
    assert d["n"] == 5 and d["median"] == 12.0 and d["min"] == 10.0 and d["max"] == 100.0
    assert d["q25"] == 11.0 and d["q75"] == 13.0 and d["iqr"] == 2.0
    assert d["spread_pct"] == pytest.approx(750.0)
    assert d["iqr_pct"] == pytest.approx(100 * 2 / 12)
    assert stats.describe([5.0])["stdev"] is None


def test_describe_rejects_empty_and_nan():
    with pytest.raises(ValueError, match="no samples"):
        stats.describe([])
    with pytest.raises(ValueError, match="finite"):
        stats.describe([1.0, float("nan")])


def test_ratio_ci_reproducible_and_brackets_point():
    a = [[100.0], [102.0], [98.0], [101.0], [99.0], [103.0]]
    b = [[50.0], [51.0], [49.0], [50.5], [49.5], [52.0]]
    c1 = stats.compare(a, b)
    assert c1 == stats.compare(a, b)
    assert c1["ci95"][0] <= c1["value"] <= c1["ci95"][1]
    assert 1.9 < c1["ci95"][0] < c1["ci95"][1] < 2.1
    assert c1["level"] == "process" and c1["processes"] == [6, 6]
    # the value is the ratio of geometric means of the process values
    assert c1["value"] == pytest.approx(np.exp(np.mean(np.log([100, 102, 98, 101, 99, 103]))
                                               - np.mean(np.log([50, 51, 49, 50.5, 49.5, 52]))))


def test_few_processes_give_the_range_and_why_never_an_interval():
    # 3 processes a side: below MIN_PROCESSES there is no 95% interval; the range of ratios any two
    # processes show is given instead, with the reason
    c = stats.compare([[100.0], [120.0], [110.0]], [[100.0], [95.0], [105.0]], percent=True)
    assert c["ci95"] is None and c["level"] == "range"
    assert c["range"] == pytest.approx([100 * 100 / 105, 100 * 120 / 95])
    assert "fewer than 5" in c["why"] and "95% interval" in c["why"]
    # one process a side: its repetitions give the range
    one = stats.compare([[4.0, 4.1, 3.9]], [[2.0, 2.1, 1.9]])
    assert one["level"] == "range" and one["ci95"] is None
    assert one["range"] == pytest.approx([3.9 / 2.1, 4.1 / 1.9])
    assert stats.compare([[4.0]], [[2.0]])["range"] == [2.0, 2.0]
    # at MIN_PROCESSES the interval appears
    n = stats.MIN_PROCESSES
    c5 = stats.compare([[100.0 + i] for i in range(n)], [[50.0 + i / 2] for i in range(n)])
    assert c5["level"] == "process" and c5["ci95"] is not None and "range" not in c5


def test_values_not_all_positive_have_no_interval():
    c = stats.compare([[0.0], [1.0], [2.0], [1.0], [1.0]], [[1.0], [1.0], [2.0], [1.0], [1.0]])
    assert c["ci95"] is None and c["level"] == "range" and "not all positive" in c["why"]
    assert c["value"] == pytest.approx(1.0)  # the ratio of medians
    with pytest.raises(ValueError, match="median is 0"):
        stats.compare([[1.0]] * 5, [[0.0]] * 5)


def test_the_process_is_the_unit():
    # the value of a process is the median of its repetitions: many repetitions do not narrow
    # an interval that between-process variance makes wide
    rng = np.random.default_rng(3)
    procs = lambda mu: [list(mu * (1 + 0.05 * rng.standard_normal()) + 0.1 * rng.standard_normal(50))
                        for _ in range(6)]
    c = stats.compare(procs(100.0), procs(100.0))
    assert c["ci95"][1] - c["ci95"][0] > 0.04


@pytest.mark.parametrize("model", ["normal", "bimodal", "heavy", "outliers"])
def test_interval_coverage_of_simulated_benches(model):
    """1,000 seeded simulated benches per process model (capshim.bench.coverage: 8 processes x 5
    repetitions per arm, a known true ratio): the 95% interval contains the truth in 95% of them
    (binomial 99% band for 1,000 trials: about +-1.8 points); with slow outliers or heavy tails
    it is conservative (the outlier widens the interval)."""
    r = coverage.coverage(model, 8, 1000)
    assert r["intervals"] == 1000
    assert r["coverage"] >= 0.935, r
    if model in ("normal", "bimodal"):  # no outlier widening: the interval is not needlessly wide either
        assert r["coverage"] <= 0.975, r


def test_coverage_holds_at_the_smallest_process_count_that_gets_an_interval():
    r = coverage.coverage("bimodal", stats.MIN_PROCESSES, 1000, seed=5)
    assert r["coverage"] >= 0.935, r


def test_interval_is_narrower_than_the_bootstrapped_median_on_bimodal_processes():
    """Why the estimator changed: on the H200's bimodal process shape the geometric-mean interval is
    narrower than the old bootstrapped median's at the same coverage."""
    new = coverage.coverage("bimodal", 14, 200, seed=9)
    old = coverage.coverage("bimodal", 14, 200, seed=9, method="median-bootstrap")
    assert new["half_width"] < 0.85 * old["half_width"], (new, old)


def test_coverage_models_and_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="unknown process model 'bimodel'"):
        coverage.process_effects("bimodel", 3, rng)
    with pytest.raises(ValueError, match="pool"):
        coverage.process_effects("empirical", 3, rng)
    e = coverage.process_effects("empirical", 1000, rng, pool=np.array([1.0, 1.05]))
    assert set(np.round(np.exp(e), 6)) == {1.0, 1.05}


def test_percent_and_half_width():
    r = stats.compare([[98.0], [99.0], [100.0], [99.0], [99.0]], [[100.0]] * 5, percent=True)
    assert r["value"] == pytest.approx(100 * np.exp(np.mean(np.log([98, 99, 100, 99, 99])) - np.log(100)))
    assert r["ci95"][0] <= r["value"] <= r["ci95"][1]
    assert stats.half_width({"ci95": [97.0, 101.0]}, percent=True) == 2.0
    assert stats.half_width({"ci95": [0.97, 1.01]}, percent=False) == pytest.approx(2.0)
    assert stats.half_width({"ci95": None}, percent=True) is None


def test_stability_warnings():
    quiet = [[100.0, 100.5]] * 3 + [[101.0]] * 3
    assert stats.stability_warnings(quiet) == []
    few = stats.stability_warnings([[100.0], [101.0]])
    assert len(few) == 1 and few[0].startswith("only 2 process(es)") and "range is shown" in few[0]
    noisy = stats.stability_warnings([[70.0], [100.0], [101.0], [100.5], [99.5], [100.2], [160.0]])
    assert any(w.startswith("spread of the process values") for w in noisy)
    assert any("outlier process(es)" in w and "#1" in w and "#7" in w for w in noisy)
    assert any(w.startswith("slow first process") for w in noisy)


def test_slow_first_process_follows_the_metric_direction():
    # seconds: the first process took longer (slow), then a fast first one is not "slow"
    slow_seconds = [[0.12], [0.064], [0.065], [0.063], [0.066]]
    assert any(w.startswith("slow first process") for w in
               stats.stability_warnings(slow_seconds, higher_is_better=False))
    fast_seconds = [[0.064], [0.117], [0.118], [0.116], [0.119]]
    assert not any(w.startswith("slow first process") for w in
                   stats.stability_warnings(fast_seconds, higher_is_better=False))
    assert any(w.startswith("slow first process") for w in stats.stability_warnings(fast_seconds))  # as tok/s


def test_values_near_the_largest_float_do_not_overflow_a_median_or_a_mean():
    # a regex metric that reads 1e308 and 1.7e308 in one process: np.median averaged them to inf and the
    # bench's analysis failed ("describe: samples must be finite numbers", exit 5)
    from capshim.bench import stats
    procs = [[1e308, 1.7e308]] * 5
    vals = stats.process_values(procs)
    assert np.allclose(vals, 1.35e308, rtol=1e-12)
    d = stats.describe(vals)
    assert all(np.isfinite(d[k]) for k in ("median", "mean", "stdev", "q25", "q75", "iqr", "spread_pct"))
    assert d["median"] == pytest.approx(1.35e308)
    c = stats.compare(procs, procs)
    assert c["value"] == pytest.approx(1.0) and c["ci95"] == pytest.approx([1.0, 1.0])
    few = stats.compare(procs[:2], [[1.7e308], [1e308]])
    assert few["level"] == "range" and np.isfinite(few["value"]) and few["range"][0] <= few["value"] <= few["range"][1]
    assert stats.stability_warnings([[1e308], [1.7e308], [1.7e308]]) == [
        "only 3 process(es): too few for a 95% interval, the range is shown (want 5 or more)",
        "spread of the process values 41.2% > 10%: unstable", "slow first process: 1e+308 vs 1.7e+308 for the others "
        "(warm-up too short?)"]
    # ordinary values are untouched by the scaling (a power of two, exact)
    assert stats.process_values([[1.0, 2.0], [3.0]]).tolist() == [1.5, 3.0]


def test_one_far_process_among_equal_values_is_an_outlier_too():
    # a metric read in whole numbers: four processes print 2, one prints 9. The median absolute deviation
    # is 0, so the modified z-score was undefined and the far process went unnoticed: 1.35x [0.59-3.11] and
    # no warning, where the same data with a 0.5% jitter gave 1.00x [0.99-1.01] and named process #5
    from capshim.bench import stats
    arm, ref = [[2]] * 4 + [[9]], [[2]] * 5
    c = stats.compare(arm, ref)
    assert c["value"] == pytest.approx(1.0) and c["ci95"] == pytest.approx([1.0, 1.0])
    jittered = stats.compare(arm, [[2], [2.02], [1.98], [2], [2.01]])
    assert jittered["ci95"][0] <= jittered["value"] <= jittered["ci95"][1] and jittered["ci95"][1] < 1.01
    assert "outlier process(es) by modified z-score > 3.5: #5" in stats.stability_warnings(arm)
    # a hair's difference among equal values is no outlier, and changes no estimator
    assert not any("outlier" in w for w in stats.stability_warnings([[2]] * 4 + [[2.0001]]))
    assert stats.trim_for([2, 2, 2, 2, 2.0001], [2] * 5) == 0.0


def test_the_point_estimate_is_inside_its_interval_or_range_and_no_interval_below_5_processes():
    """3,000 random benches (1-11 processes a side; normal, Cauchy, whole-number, bimodal and
    one-far-value process values): the ratio lies inside its own interval or range, and a side of
    fewer than 5 processes never gets a 95% interval."""
    from capshim.bench import stats
    rng = np.random.default_rng(2)

    def side(kind, n):
        if kind == 0:
            v = np.exp(rng.normal(0, 0.05, n))
        elif kind == 1:
            v = np.exp(np.clip(rng.standard_t(1, n) * 0.1, -50, 50))
        elif kind == 2:
            v = np.round(rng.uniform(1, 3, n))
        elif kind == 3:
            v = np.where(rng.random(n) < .2, 10.0, 1.0) * rng.choice([1, 1.0001], n)
        else:
            v = np.where(rng.random(n) < .15, rng.uniform(2, 50, n), 2.0)
        return [[x] for x in v]

    for _ in range(3000):
        na, nb = (int(x) for x in rng.integers(1, 12, 2))
        kind = int(rng.integers(0, 5))
        c = stats.compare(side(kind, na), side(kind, nb))
        if min(na, nb) < stats.MIN_PROCESSES:
            assert c["ci95"] is None and c["level"] == "range"
        bound = c["ci95"] or c.get("range")
        if bound:
            assert bound[0] * (1 - 1e-9) <= c["value"] <= bound[1] * (1 + 1e-9), c


def test_a_ratio_past_the_largest_float_is_refused_by_name():
    from capshim.bench import stats
    with pytest.raises(ValueError, match="overflow"):
        stats.compare([[1e300]] * 5, [[1e-300]] * 5)
