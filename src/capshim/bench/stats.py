"""Statistics for A/B benchmark samples (tok/s), with the process as the unit.

Method (after pyperf: a benchmark's variance lives mostly *between* processes,
https://pyperf.readthedocs.io/en/latest/analyze.html): every process warms up
in-process, then runs k timed repetitions; the median of its k samples is the
process's value. The figure of an arm and a test is the median of its process
values. Ratios (speedup, % of host) are ratios of those medians, and their 95%
interval is a cluster (two-level) bootstrap: whole processes are resampled, so
the between-process variance is in the interval (a percentile bootstrap with
``scipy.stats.bootstrap`` on the process values, both arms resampled
independently, 10,000 resamples, a fixed seed so that a report is reproducible
byte for byte). ``tests/bench/test_stats.py`` checks the coverage: 1,000
simulated benches of known truth, with and without between-process variance.

When one side has a single process (a llama-bench file made elsewhere, one
process of ``-r 10``), the interval falls back to the repetitions of that
process and says so (``level: "repetition"``): it then does not include the
between-process variance, and :func:`stability_warnings` flags it.

Memory is bounded: resamples are drawn in batches of at most
:data:`MAX_BATCH_VALUES` values (``scipy.stats.bootstrap``'s ``batch``), so
50,000 samples need about 16 MB instead of 4 GB.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy import stats as _st

__all__ = ["describe", "process_values", "ratio_ci", "compare", "stability_warnings", "half_width",
           "SPREAD_DEFINITION", "CI_METHOD", "SEED", "N_RESAMPLES", "MIN_PROCESSES", "SPREAD_LIMIT_PCT",
           "OUTLIER_Z", "SLOW_FIRST_FACTOR"]

#: The seed of the bootstrap generator: results are reproducible.
SEED = 20260809
#: Bootstrap resamples per interval.
N_RESAMPLES = 10_000
#: Values held at once by one bootstrap batch (resamples x sample size): about 16 MB of float64.
MAX_BATCH_VALUES = 2_000_000
#: Fewer processes than this per arm: the interval is flagged as unreliable.
MIN_PROCESSES = 5
#: Spread of the process values above this (% of the median) is flagged (pyperf warns at 10%).
SPREAD_LIMIT_PCT = 10.0
#: A process value whose modified z-score (Iglewicz and Hoaglin, 1993) exceeds this is an outlier.
OUTLIER_Z = 3.5
#: The first process slower than the median of the others by this factor is flagged as a slow first run.
SLOW_FIRST_FACTOR = 0.90
#: What ``spread_pct`` and ``iqr_pct`` mean, written into summary.json.
SPREAD_DEFINITION = ("over the per-process medians: spread_pct = 100 * (max - min) / median; "
                     "iqr = q75 - q25 (linear interpolation); iqr_pct = 100 * iqr / median")
#: How the intervals are computed, written into summary.json.
CI_METHOD = (f"95% cluster bootstrap of the ratio of medians of per-process medians: whole processes "
             f"resampled, both arms independently (scipy.stats.bootstrap, percentile, {N_RESAMPLES} "
             f"resamples, seed {SEED}); an arm with one process falls back to its repetitions")


def _clean(samples, what: str) -> np.ndarray:
    a = np.asarray(list(samples), dtype=float)
    if a.size == 0:
        raise ValueError(f"{what}: no samples")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: samples must be finite numbers")
    return a


def process_values(by_process) -> np.ndarray:
    """The value of each process: the median of its repetitions.

    Args:
        by_process: one sequence of samples (tok/s) per process, each non-empty.

    Returns:
        A float array, one median per process (tok/s).

    Raises:
        ValueError: no process, an empty process, or non-finite samples.
    """
    procs = list(by_process)
    if not procs:
        raise ValueError("process values: no processes")
    return np.array([float(np.median(_clean(p, f"process {i + 1}"))) for i, p in enumerate(procs)])


def describe(samples) -> dict:
    """Summarise one set of values (per-process medians, or samples).

    Args:
        samples: iterable of floats (tok/s), at least one.

    Returns:
        ``{"n", "median", "mean", "stdev", "min", "max", "q25", "q75", "iqr",
        "spread_pct", "iqr_pct"}``; tok/s except ``n`` (count) and the ``_pct``
        values (percent of the median; see :data:`SPREAD_DEFINITION`). ``stdev``
        is the sample standard deviation (ddof=1), None for one value.

    Raises:
        ValueError: empty or non-finite samples.
    """
    a = _clean(samples, "describe")
    med = float(np.median(a))
    q25, q75 = (float(x) for x in np.percentile(a, [25, 75]))
    return {
        "n": int(a.size),
        "median": med,
        "mean": float(a.mean()),
        "stdev": float(a.std(ddof=1)) if a.size > 1 else None,
        "min": float(a.min()),
        "max": float(a.max()),
        "q25": q25,
        "q75": q75,
        "iqr": q75 - q25,
        "spread_pct": 100.0 * float(a.max() - a.min()) / med if med else None,
        "iqr_pct": 100.0 * (q75 - q25) / med if med else None,
    }


def _ratio_of_medians(x, y, axis=-1):
    return np.median(x, axis=axis) / np.median(y, axis=axis)


def ratio_ci(numerator, denominator, *, confidence: float = 0.95,
             n_resamples: int = N_RESAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """Percentile bootstrap interval for ``median(numerator) / median(denominator)``.

    Pass per-process values for the cluster bootstrap (the unit resampled is
    whatever one value stands for). Memory: at most :data:`MAX_BATCH_VALUES`
    resampled values at once.

    Args:
        numerator, denominator: independent value sets (tok/s).
        confidence: the interval's level (0.95).
        n_resamples: bootstrap resamples.
        seed: generator seed (fixed: the same input gives the same interval).

    Returns:
        ``(low, high)`` as plain ratios, or None when either set has fewer than
        two values (no interval can be estimated).

    Raises:
        ValueError: empty or non-finite values.
    """
    x = _clean(numerator, "ratio numerator")
    y = _clean(denominator, "ratio denominator")
    if x.size < 2 or y.size < 2:
        return None
    return _ratio_ci_cached(tuple(x.tolist()), tuple(y.tolist()), confidence, n_resamples, seed)


@functools.lru_cache(maxsize=4096)
def _ratio_ci_cached(xs: tuple, ys: tuple, confidence: float, n_resamples: int,
                     seed: int) -> tuple[float, float] | None:
    """:func:`ratio_ci` of clean values, remembered: the interval is a pure function of its inputs
    (fixed seed), and a bench analyses the same series again each round (``--precision``) and at the end."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    batch = max(1, min(n_resamples, MAX_BATCH_VALUES // max(x.size, y.size)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples (all equal) warn, the interval is still right
        res = _st.bootstrap((x, y), _ratio_of_medians, paired=False, vectorized=True,
                            confidence_level=confidence, n_resamples=n_resamples, batch=batch,
                            method="percentile", random_state=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return (lo, hi)


def compare(by_process, reference_by_process, *, percent: bool = False) -> dict:
    """Ratio of the medians of per-process values, with its 95% cluster-bootstrap interval.

    Args:
        by_process: the arm's samples, one list per process (tok/s).
        reference_by_process: the baseline's (speedup) or host's (% of host), the same shape.
        percent: multiply by 100 (for "% of host").

    Returns:
        ``{"value": float, "ci95": [low, high] | None, "level": "process" |
        "repetition", "processes": [n_arm, n_reference]}``. ``level`` says what
        was resampled: processes, or (one process on a side) the repetitions.

    Raises:
        ValueError: empty or non-finite samples.
    """
    a, b = list(by_process), list(reference_by_process)
    pa, pb = process_values(a), process_values(b)
    value = float(np.median(pa) / np.median(pb))
    level = "process"
    if pa.size >= 2 and pb.size >= 2:
        ci = ratio_ci(pa, pb)
    else:
        level = "repetition"
        ci = ratio_ci([v for p in a for v in p], [v for p in b for v in p])
    k = 100.0 if percent else 1.0
    return {"value": value * k, "ci95": [ci[0] * k, ci[1] * k] if ci else None, "level": level,
            "processes": [int(pa.size), int(pb.size)]}


def half_width(cmp: dict | None, percent: bool) -> float | None:
    """Half the width of a comparison's interval, in points (% of host) or in percent of the ratio (speedup).

    Returns None when there is no interval.
    """
    if not cmp or not cmp.get("ci95"):
        return None
    lo, hi = cmp["ci95"]
    return (hi - lo) / 2.0 * (1.0 if percent else 100.0)


def stability_warnings(by_process, higher_is_better: bool = True) -> list[str]:
    """pyperf-style warnings about one arm's test (https://pyperf.readthedocs.io, "check").

    Args:
        by_process: samples (tok/s), one list per process, in run order.

    Returns:
        Plain sentences: too few processes for the interval (fewer than
        :data:`MIN_PROCESSES`), spread of the process values above
        :data:`SPREAD_LIMIT_PCT` % of the median, outlier processes (modified
        z-score above :data:`OUTLIER_Z`; Iglewicz and Hoaglin, 1993: 0.6745 *
        (x - median) / MAD), a slow first process (below
        :data:`SLOW_FIRST_FACTOR` times the median of the others; for a
        lower-is-better metric such as seconds, ``higher_is_better=False``:
        above the median of the others divided by that factor).
    """
    procs = [list(p) for p in by_process if len(p)]
    if not procs:
        return []
    vals = process_values(procs)
    out = []
    if vals.size < MIN_PROCESSES:
        out.append(f"only {vals.size} process(es): too few for a reliable interval (want {MIN_PROCESSES} or more)")
    med = float(np.median(vals))
    if vals.size > 1 and med > 0:
        spread = 100.0 * float(vals.max() - vals.min()) / med
        if spread > SPREAD_LIMIT_PCT:
            out.append(f"spread of the process values {spread:.1f}% > {SPREAD_LIMIT_PCT:g}%: unstable")
    if vals.size >= 3:
        mad = float(np.median(np.abs(vals - med)))
        if mad > 0:
            z = 0.6745 * (vals - med) / mad
            idx = [i + 1 for i in np.flatnonzero(np.abs(z) > OUTLIER_Z)]
            if idx:
                out.append(f"outlier process(es) by modified z-score > {OUTLIER_Z:g}: "
                           + ", ".join(f"#{i}" for i in idx))
        rest = float(np.median(vals[1:]))
        slow = vals[0] < SLOW_FIRST_FACTOR * rest if higher_is_better else vals[0] * SLOW_FIRST_FACTOR > rest
        if slow:
            out.append(f"slow first process: {vals[0]:.4g} vs {rest:.4g} for the others (warm-up too short?)")
    return out
