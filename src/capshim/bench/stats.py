"""Statistics for A/B benchmark samples (tok/s).

Method (docs/contracts.md, "Published figures", following the seed): the figure of an arm and a
test is the median of all its per-repetition samples (llama-bench
``samples_ts``), pooled over runs. Ratios are ratios of medians. Their 95%
interval is a percentile bootstrap (``scipy.stats.bootstrap``, both sample
sets resampled independently, 10,000 resamples, a fixed seed so a report is
reproducible byte for byte).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats as _st

__all__ = ["describe", "ratio_ci", "compare", "SPREAD_DEFINITION", "CI_METHOD", "SEED", "N_RESAMPLES"]

#: The seed of the bootstrap generator: results are reproducible.
SEED = 20260809
#: Bootstrap resamples per interval.
N_RESAMPLES = 10_000
#: What ``spread_pct`` and ``iqr_pct`` mean, written into summary.json.
SPREAD_DEFINITION = ("spread_pct = 100 * (max - min) / median; iqr = q75 - q25 "
                     "(linear interpolation); iqr_pct = 100 * iqr / median")
#: How the intervals are computed, written into summary.json.
CI_METHOD = (f"95% percentile bootstrap of the ratio of medians, both sample sets resampled "
             f"independently (scipy.stats.bootstrap, {N_RESAMPLES} resamples, seed {SEED})")


def _clean(samples, what: str) -> np.ndarray:
    a = np.asarray(list(samples), dtype=float)
    if a.size == 0:
        raise ValueError(f"{what}: no samples")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: samples must be finite numbers")
    return a


def describe(samples) -> dict:
    """Summarise one set of samples.

    Args:
        samples: iterable of floats (tok/s), at least one.

    Returns:
        ``{"n", "median", "mean", "stdev", "min", "max", "q25", "q75", "iqr",
        "spread_pct", "iqr_pct"}``; tok/s except ``n`` (count) and the ``_pct``
        values (percent of the median; see :data:`SPREAD_DEFINITION`). ``stdev``
        is the sample standard deviation (ddof=1), None for one sample.

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
    """Bootstrap interval for ``median(numerator) / median(denominator)``.

    Args:
        numerator, denominator: sample sets (tok/s), independent of each other.
        confidence: the interval's level (0.95).
        n_resamples: bootstrap resamples.
        seed: generator seed (fixed: the same input gives the same interval).

    Returns:
        ``(low, high)`` as plain ratios, or None when either set has fewer than
        two samples (no interval can be estimated).

    Raises:
        ValueError: empty or non-finite samples.
    """
    x = _clean(numerator, "ratio numerator")
    y = _clean(denominator, "ratio denominator")
    if x.size < 2 or y.size < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples (all equal) warn, the interval is still right
        res = _st.bootstrap((x, y), _ratio_of_medians, paired=False, vectorized=True,
                            confidence_level=confidence, n_resamples=n_resamples,
                            method="percentile", random_state=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return (lo, hi)


def compare(samples, reference, *, percent: bool = False) -> dict:
    """Ratio of medians with its 95% bootstrap interval.

    Args:
        samples: the arm's samples (tok/s).
        reference: the baseline's (speedup) or host's (% of host) samples.
        percent: multiply by 100 (for "% of host").

    Returns:
        ``{"value": float, "ci95": [low, high] | None}``.
    """
    a = _clean(samples, "compare samples")
    b = _clean(reference, "compare reference")
    value = float(np.median(a) / np.median(b))
    ci = ratio_ci(a, b)
    k = 100.0 if percent else 1.0
    return {"value": value * k, "ci95": [ci[0] * k, ci[1] * k] if ci else None}
