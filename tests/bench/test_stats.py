"""Statistics: descriptive values, cluster-bootstrap intervals (reproducible, ~95% coverage), warnings."""

from __future__ import annotations

import numpy as np
import pytest

from capshim.bench import stats


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
    assert 1.8 < c1["ci95"][0] < c1["ci95"][1] < 2.2
    assert c1["level"] == "process" and c1["processes"] == [6, 6]


def test_the_process_is_the_unit():
    # one process per arm: the interval falls back to that process's repetitions, and says so
    one = stats.compare([[4.0, 4.1, 3.9]], [[2.0, 2.1, 1.9]])
    assert one["level"] == "repetition" and one["ci95"] is not None
    assert stats.compare([[4.0]], [[2.0]]) == {"value": 2.0, "ci95": None, "level": "repetition",
                                               "processes": [1, 1]}
    # the value of a process is the median of its repetitions: many repetitions do not narrow
    # an interval that between-process variance makes wide
    rng = np.random.default_rng(3)
    procs = lambda mu: [list(mu * (1 + 0.05 * rng.standard_normal()) + 0.1 * rng.standard_normal(50))
                        for _ in range(6)]
    c = stats.compare(procs(100.0), procs(100.0))
    assert c["ci95"][1] - c["ci95"][0] > 0.04


def _coverage(between_sd: float, benches: int = 1000, n: int = 10, k: int = 5, truth: float = 0.98) -> float:
    rng = np.random.default_rng(20261130)
    shape = (benches, n, 1)
    a = 100 * truth * (1 + between_sd * rng.standard_normal(shape) + 0.03 * rng.standard_normal((benches, n, k)))
    b = 100 * (1 + between_sd * rng.standard_normal(shape) + 0.03 * rng.standard_normal((benches, n, k)))
    hits = 0
    for i in range(benches):
        ci = stats.ratio_ci(np.median(a[i], axis=1), np.median(b[i], axis=1), n_resamples=1000, seed=i)
        hits += ci[0] <= truth <= ci[1]
    return hits / benches


@pytest.mark.parametrize("between_sd", [0.0, 0.05], ids=["no-between-process-variance", "between-process-5pct"])
def test_interval_coverage_of_simulated_benches(between_sd):
    """1,000 seeded simulated benches (10 processes x 5 repetitions per arm, 3% noise within a
    process, with and without 5% between processes): the 95% interval contains the true ratio
    in about 95% of them (binomial 99% band for 1,000 trials: about +-1.8 points; the median's
    discrete bootstrap distribution is slightly conservative)."""
    cov = _coverage(between_sd)
    assert 0.93 <= cov <= 0.985, cov


def test_bootstrap_memory_is_bounded():
    # 50,000 samples: resamples are drawn in batches (MAX_BATCH_VALUES values at once), so this
    # runs in about 16 MB; unbatched it would hold 10,000 x 50,000 values (4 GB).
    big = np.linspace(99.0, 101.0, 50_000)
    ci = stats.ratio_ci(big, big * 2, n_resamples=200)
    assert ci is not None and 0.49 < ci[0] <= ci[1] < 0.51
    assert stats.MAX_BATCH_VALUES // 50_000 < 200


def test_percent_and_half_width():
    r = stats.compare([[98.0], [99.0], [100.0]], [[100.0], [100.0], [100.0]], percent=True)
    assert r["value"] == pytest.approx(99.0)
    assert r["ci95"][0] <= 99.0 <= r["ci95"][1]
    assert stats.half_width({"ci95": [97.0, 101.0]}, percent=True) == 2.0
    assert stats.half_width({"ci95": [0.97, 1.01]}, percent=False) == pytest.approx(2.0)
    assert stats.half_width({"ci95": None}, percent=True) is None


def test_stability_warnings():
    quiet = [[100.0, 100.5]] * 3 + [[101.0]] * 3
    assert stats.stability_warnings(quiet) == []
    few = stats.stability_warnings([[100.0], [101.0]])
    assert len(few) == 1 and few[0].startswith("only 2 process(es)")
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
