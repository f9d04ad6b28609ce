"""Statistics for A/B benchmark samples (tok/s, seconds), with the process as the unit.

Method (after pyperf: a benchmark's variance lives mostly *between* processes,
https://pyperf.readthedocs.io/en/latest/analyze.html): every process warms up
in-process, then runs k timed repetitions; the median of its k samples is the
process's value. An arm's figure in the tables is the median of its process
values (descriptive). A ratio (speedup, % of host, A/A) is the ratio of the
geometric means of the two sides' process values, and its 95% interval is
Welch's t interval on the logarithms of the process values, back-transformed
(``scipy.stats.ttest_ind(equal_var=False).confidence_interval``): the unit of
the interval is the process, so the between-process variance is in it.

Why not the median and a bootstrap (the method until December 2026): on the
H200 the process values are bimodal (a bulk and a cluster about 4-5% faster,
``evidence/h200-tinyllama-aa``), and the median of a bimodal sample jumps
between the modes. :mod:`capshim.bench.coverage` simulates benches of known
truth under normal, bimodal, heavy-tailed (t, 3 df) and slow-outlier process
effects and by resampling the H200's own process values; the geometric-mean
ratio's interval keeps 95% coverage in all of them and is about 25% narrower
than the bootstrapped median on the H200 data (the table and the command that
made it: docs/statistics.md). An outlier process widens the interval instead of
biasing a median silently, and :func:`stability_warnings` names it.

With fewer than :data:`MIN_PROCESSES` processes on a side there is no 95%
interval (``ci95`` is None) and the ratio is the ratio of the medians the tables
show (a mean of 3 values is at the mercy of one): the comparison gives the *range* of ratios any
two processes show, ``[min(a)/max(b), max(a)/min(b)]``, and says why
(``level: "range"``). With one process on a side the range comes from that
side's repetitions. Values that are not all positive (a regex metric can
read 0) have no logarithm: the ratio is then the ratio of medians, with the
range.
"""

from __future__ import annotations

import math
import warnings

# numpy and scipy are imported in the functions that use them: capshim's small commands (evidence verify,
# db list, --help) import this module and must not pay for them (issue 28; tests/test_import_cost.py).

from capshim.contracts.numbers import MIN_PROCESSES  # defined once: no interval, and no verdict, below it

__all__ = ["describe", "process_values", "ratio", "ratio_ci", "compare", "stability_warnings", "half_width",
           "SPREAD_DEFINITION", "CI_METHOD", "ci_method", "MIN_PROCESSES", "SPREAD_LIMIT_PCT",
           "OUTLIER_Z", "SLOW_FIRST_FACTOR", "TRIM", "TRIM_FROM_PCT", "trim_for"]

#: Spread of the process values above this (% of the median) is flagged (pyperf warns at 10%).
SPREAD_LIMIT_PCT = 10.0
#: A process value whose modified z-score (Iglewicz and Hoaglin, 1993) exceeds this is an outlier.
OUTLIER_Z = 3.5
#: The first process slower than the median of the others by this factor is flagged as a slow first run.
SLOW_FIRST_FACTOR = 0.90
#: Proportion trimmed from each end when a side has an outlier process (Yuen, 1974; Wilcox recommends 20%).
TRIM = 0.2
#: A process this far (percent) from its side's median, and an outlier by modified z-score, makes the means trimmed.
TRIM_FROM_PCT = 10.0
#: What ``spread_pct`` and ``iqr_pct`` mean, written into summary.json.
SPREAD_DEFINITION = ("over the per-process medians: spread_pct = 100 * (max - min) / median; "
                     "iqr = q75 - q25 (linear interpolation); iqr_pct = 100 * iqr / median")
#: How the intervals are computed, written into summary.json.
CI_METHOD = (f"95% Welch t interval of the ratio of geometric means of per-process medians (logarithms, "
             f"scipy.stats.ttest_ind, unequal variances; the process is the unit); when a side has an outlier "
             f"process (modified z > {OUTLIER_Z:g} and over {TRIM_FROM_PCT:g}% from the median) both sides' means "
             f"are {int(TRIM * 100)}% trimmed (Yuen); "
             f"fewer than {MIN_PROCESSES} processes on a side: no interval, the range of ratios instead")


def ci_method(confidence: float = 0.95) -> str:
    """:data:`CI_METHOD`, and at a level above 0.95 why (a bench whose precision loop chose when to stop)."""
    if confidence == 0.95:
        return CI_METHOD
    level = f"{100 * confidence:g}%"
    return (f"{CI_METHOD.replace('95% Welch', level + ' Welch', 1)}; {level}, not 95%, because the precision loop stopped when the "
            f"intervals looked narrow enough: at that level they still hold the truth at least 95% of the time "
            f"(coverage simulation of the whole loop, docs/statistics.md)")


def _clean(samples, what: str) -> np.ndarray:
    import numpy as np
    a = np.asarray(list(samples), dtype=float)
    if a.size == 0:
        raise ValueError(f"{what}: no samples")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: samples must be finite numbers")
    return a


def _scale(a: np.ndarray) -> float:
    """A power of two (exact to divide by) that brings finite values near 1e308 down, so that a median of
    two of them or a mean does not overflow to inf; 1.0 for ordinary values."""
    import numpy as np
    m = float(np.max(np.abs(a))) if a.size else 0.0
    return 1.0 if m < 1e150 else math.ldexp(1.0, math.frexp(m)[1] - 1)


def _median(a) -> float:
    """``np.median`` that does not overflow (the median of 1e308 and 1.7e308 is not inf)."""
    import numpy as np
    a = np.asarray(a, dtype=float)
    k = _scale(a)
    return float(np.median(a / k)) * k


def process_values(by_process) -> np.ndarray:
    """The value of each process: the median of its repetitions.

    Args:
        by_process: one sequence of samples (tok/s) per process, each non-empty.

    Returns:
        A float array, one median per process (tok/s).

    Raises:
        ValueError: no process, an empty process, or non-finite samples.
    """
    import numpy as np
    procs = list(by_process)
    if not procs:
        raise ValueError("process values: no processes")
    return np.array([_median(_clean(p, f"process {i + 1}")) for i, p in enumerate(procs)])


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
    import numpy as np
    a = _clean(samples, "describe")
    k = _scale(a)  # values near 1e308 are computed on a / k, so no sum or difference overflows
    b = a / k
    med = float(np.median(b))
    q25, q75 = (float(x) for x in np.percentile(b, [25, 75]))
    return {
        "n": int(a.size),
        "median": med * k,
        "mean": float(b.mean()) * k,
        "stdev": float(b.std(ddof=1)) * k if a.size > 1 else None,
        "min": float(a.min()),
        "max": float(a.max()),
        "q25": q25 * k,
        "q75": q75 * k,
        "iqr": (q75 - q25) * k,
        "spread_pct": 100.0 * float(b.max() - b.min()) / med if med else None,
        "iqr_pct": 100.0 * (q75 - q25) / med if med else None,
    }


def _outliers(logs: np.ndarray) -> bool:
    """Whether a side has a far outlier process: modified z-score above :data:`OUTLIER_Z` (Iglewicz and
    Hoaglin, 1993: 0.6745 * (x - median) / MAD, on the logarithms) AND more than :data:`TRIM_FROM_PCT`
    percent from the median. The second condition keeps the H200's 4-5% cluster of fast processes (a
    real part of the distribution, not an accident) from switching the estimator: in the coverage
    simulation that switch cost 2 points of coverage."""
    import numpy as np
    if logs.size < 3:
        return False
    med = np.median(logs)
    far = np.abs(logs - med) > np.log1p(TRIM_FROM_PCT / 100.0)
    return bool(np.any(far & (_modified_z(logs) > OUTLIER_Z)))


def _modified_z(v: np.ndarray) -> np.ndarray:
    """|modified z-score| of each value: 0.6745 * |x - median| / MAD (Iglewicz and Hoaglin, 1993); when more
    than half the values are equal (MAD 0: a metric read in whole numbers) the mean absolute deviation
    stands in, |x - median| / (1.253314 * MeanAD), as is usual, so the one odd value among equal ones is
    still an outlier. All zeros when every value is the median."""
    import numpy as np
    med = np.median(v)
    dev = np.abs(v - med)
    mad = np.median(dev)
    if mad > 0:
        return 0.6745 * dev / mad
    mean_ad = dev.mean()
    return dev / (1.253314 * mean_ad) if mean_ad > 0 else np.zeros_like(dev)


def trim_for(x, y) -> float:
    """The proportion cut from each end of both sides: 0 (plain means, the efficient choice for the
    H200's bimodal processes), or :data:`TRIM` when either side has an outlier process (Yuen's trimmed
    means, so one slow process moves neither the ratio nor the interval much). ``x``, ``y``: positive."""
    import numpy as np
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    return TRIM if _outliers(lx) or _outliers(ly) else 0.0


def ratio(numerator, denominator) -> float:
    """The ratio of (trimmed, see :func:`trim_for`) geometric means of two positive value sets; the ratio
    of medians if a value is not positive.

    Raises:
        ValueError: empty or non-finite values, or a denominator whose median is 0.
    """
    import numpy as np
    from scipy import stats as _st
    x = _clean(numerator, "ratio numerator")
    y = _clean(denominator, "ratio denominator")
    if x.min() > 0 and y.min() > 0:
        t = trim_for(x, y)
        return float(np.exp(_st.trim_mean(np.log(x), t) - _st.trim_mean(np.log(y), t)))
    if _median(y) == 0:
        raise ValueError("ratio: the reference's median is 0")
    return _median(x) / _median(y)


def ratio_ci(numerator, denominator, *, confidence: float = 0.95) -> tuple[float, float] | None:
    """Welch t interval (Yuen's when trimmed, :func:`trim_for`) of the ratio of geometric means.

    Args:
        numerator, denominator: independent positive value sets (process values, tok/s or s).
        confidence: the interval's level (0.95).

    Returns:
        ``(low, high)`` as plain ratios, or None when a side has fewer than two
        values or a value is not positive.

    Raises:
        ValueError: empty or non-finite values.
    """
    import numpy as np
    from scipy import stats as _st
    x = _clean(numerator, "ratio numerator")
    y = _clean(denominator, "ratio denominator")
    if x.size < 2 or y.size < 2 or x.min() <= 0 or y.min() <= 0:
        return None
    lx, ly = np.log(x), np.log(y)
    t = trim_for(x, y)
    # no spread left in what the means are taken of (every value equal, or every value the trim keeps)
    if _kept_spread(lx, t) == 0 and _kept_spread(ly, t) == 0:
        v = float(np.exp(_st.trim_mean(lx, t) - _st.trim_mean(ly, t)))
        return (v, v) if math.isfinite(v) else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = _st.ttest_ind(lx, ly, equal_var=False, trim=t).confidence_interval(confidence)
    lo, hi = float(np.exp(ci.low)), float(np.exp(ci.high))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return (lo, hi)


def _kept_spread(v: np.ndarray, trim: float) -> float:
    """max - min of the values a ``trim``-trimmed mean keeps (Yuen's winsorized variance is 0 when this is)."""
    import numpy as np
    g = int(trim * v.size)
    kept = np.sort(v)[g:v.size - g]
    return float(np.ptp(kept)) if kept.size else 0.0


def _range(a: np.ndarray, b: np.ndarray) -> list[float] | None:
    """``[min(a)/max(b), max(a)/min(b)]``: every ratio of one value of a to one of b lies inside."""
    if b.min() <= 0 or a.min() < 0:
        return None
    return [float(a.min() / b.max()), float(a.max() / b.min())]


def _finite_ratio(value: float) -> float:
    """``value`` when it is a finite number; a ratio past the largest float (values 1e300 against 1e-300)
    has no place in summary.json (strict JSON).

    Raises:
        ValueError: "ratio overflow", naming the value.
    """
    if not math.isfinite(value):
        raise ValueError(f"ratio overflow: the two sides' values are too far apart for a float ratio ({value})")
    return value


def compare(by_process, reference_by_process, *, percent: bool = False, confidence: float = 0.95) -> dict:
    """Ratio of the geometric means of per-process values, with its 95% interval or, below
    :data:`MIN_PROCESSES` processes on a side, the range and the reason.

    Args:
        by_process: the arm's samples, one list per process (tok/s, or seconds).
        reference_by_process: the baseline's (speedup) or host's (% of host), the same shape.
        percent: multiply by 100 (for "% of host").
        confidence: the level ``ci95`` is computed at: 0.95, or higher where the bench's rounds
            stopped when the intervals looked narrow enough, so that the interval still holds the
            truth 95% of the time (:data:`capshim.bench.schedule.LEVEL`, docs/statistics.md).

    Returns:
        ``{"value": float, "ci95": [low, high] | None, "level": "process" | "range",
        "processes": [n_arm, n_reference]}``, plus ``"range": [low, high] | None`` and
        ``"why": str`` when ``level`` is ``"range"``.

    Raises:
        ValueError: empty or non-finite samples.
    """
    import numpy as np
    a, b = list(by_process), list(reference_by_process)
    pa, pb = process_values(a), process_values(b)
    k = 100.0 if percent else 1.0
    if min(pb) <= 0 and _median(pb) == 0:
        raise ValueError("comparison: the reference's median is 0")
    out = {"value": None, "ci95": None, "level": "process", "processes": [int(pa.size), int(pb.size)]}
    positive = pa.min() > 0 and pb.min() > 0
    if positive and pa.size >= MIN_PROCESSES and pb.size >= MIN_PROCESSES:
        out["value"] = _finite_ratio(ratio(pa, pb) * k)
        ci = ratio_ci(pa, pb, confidence=confidence)
        out["ci95"] = [ci[0] * k, ci[1] * k] if ci else None
        return out
    # too few processes for a mean to mean much: the ratio of the medians the tables show
    with np.errstate(over="ignore", divide="ignore"):
        out["value"] = _finite_ratio(float(_median(pa) / _median(pb) * k))
    va = pa if pa.size >= 2 else _clean([v for p in a for v in p], "arm samples")
    vb = pb if pb.size >= 2 else _clean([v for p in b for v in p], "reference samples")
    rng = _range(va, vb)
    out.update(level="range", range=[rng[0] * k, rng[1] * k] if rng else None,
               why=(f"{min(pa.size, pb.size)} process(es) on a side: fewer than {MIN_PROCESSES}, too few for a "
                    f"95% interval" if positive else "values not all positive: no interval"))
    return out


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
    import numpy as np
    procs = [list(p) for p in by_process if len(p)]
    if not procs:
        return []
    vals = process_values(procs)
    scale = _scale(vals)  # spread and z-scores are the same on vals / scale, and do not overflow
    vals = vals / scale
    out = []
    if vals.size < MIN_PROCESSES:
        out.append(f"only {vals.size} process(es): too few for a 95% interval, the range is shown (want {MIN_PROCESSES} or more)")
    med = float(np.median(vals))
    if vals.size > 1 and med > 0:
        spread = 100.0 * float(vals.max() - vals.min()) / med
        if spread > SPREAD_LIMIT_PCT:
            out.append(f"spread of the process values {spread:.1f}% > {SPREAD_LIMIT_PCT:g}%: unstable")
    if vals.size >= 3:
        odd = _modified_z(vals) > OUTLIER_Z
        if np.median(np.abs(vals - med)) == 0:  # among equal values only a far one is named (not 2.0001 among 2s)
            odd &= np.abs(vals - med) > TRIM_FROM_PCT / 100.0 * abs(med)
        idx = [i + 1 for i in np.flatnonzero(odd)]
        if idx:
            out.append(f"outlier process(es) by modified z-score > {OUTLIER_Z:g}: "
                       + ", ".join(f"#{i}" for i in idx))
        rest = float(np.median(vals[1:]))
        slow = vals[0] < SLOW_FIRST_FACTOR * rest if higher_is_better else vals[0] * SLOW_FIRST_FACTOR > rest
        if slow:
            out.append(f"slow first process: {vals[0] * scale:.4g} vs {rest * scale:.4g} for the others "
                       "(warm-up too short?)")
    return out
