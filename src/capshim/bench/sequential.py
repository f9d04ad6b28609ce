"""The coverage simulation of the WHOLE precision loop: allocation, peeking after every round, stopping.

:mod:`capshim.bench.coverage` checks the interval at a fixed number of processes. A bench with a
precision target does more: after every round it looks at the intervals, gives the next round only
to the arms whose comparison is still wide (:mod:`capshim.bench.schedule`), and stops when every
interval is narrow enough or the cap is hit. Stopping when the data *look* precise is optional
stopping: the benches that stop early are over-represented among those whose spread happened to
come out small, and a naive rule undercovers. This module simulates that procedure, many benches
at once (numpy arrays of shape (benches, arms, processes)), and counts how often each reported 95%
interval holds the known truth.

A simulated bench: a reference arm and ``len(scales)`` other arms, each of true ratio
:data:`capshim.bench.coverage.TRUTH` to the reference; process ``i`` of an arm has the log value
``scale * e_i + noise``, ``e_i`` from a process model of :mod:`capshim.bench.coverage` (the same
models: normal, bimodal, heavy, outliers, empirical) and the noise the median of ``k``
repetitions of :data:`capshim.bench.coverage.WITHIN`. The default scales ``1, 1, 0.25`` make one
arm much steadier than the others (the H200's vm-stock against native, issue 31).

The interval is :func:`capshim.bench.stats.ratio_ci`'s, computed for every bench at once
(:func:`intervals`: Welch's t on the logarithms, or Yuen's 20%-trimmed one when a side has a far
outlier by :func:`capshim.bench.stats.trim_for`'s rule); a test checks the two agree.

Run ``python -m capshim.bench.sequential --help``; docs/statistics.md holds the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats as _st

from capshim.bench import coverage, schedule, stats

__all__ = ["intervals", "run_procedure", "main"]


def _nan_median(v: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.nanmedian(v, axis=-1)


def _has_outlier(logs: np.ndarray, n: np.ndarray) -> np.ndarray:
    """:func:`capshim.bench.stats._outliers` of each row of ``logs`` (NaN-padded, ``n`` values each)."""
    med = _nan_median(logs)[:, None]
    dev = np.abs(logs - med)
    mad = _nan_median(dev)[:, None]
    with np.errstate(all="ignore"):
        mean_ad = np.nanmean(dev, axis=-1)[:, None]
        z = np.where(mad > 0, 0.6745 * dev / mad, np.where(mean_ad > 0, dev / (1.253314 * mean_ad), 0.0))
    far = dev > np.log1p(stats.TRIM_FROM_PCT / 100.0)
    hit = np.nan_to_num(far & (z > stats.OUTLIER_Z)).astype(bool)
    return hit.any(axis=-1) & (n >= 3)


def _trimmed(logs: np.ndarray, n: np.ndarray, trim: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trimmed mean, squared standard error d, kept count h) of each row, as Yuen (scipy's ttest_ind trim)."""
    srt = np.sort(logs, axis=-1)  # NaN padding sorts last
    g = np.floor(trim * n).astype(int)
    h = n - 2 * g
    idx = np.arange(logs.shape[-1])[None, :]
    keep = (idx >= g[:, None]) & (idx < (n - g)[:, None])
    mean = np.where(keep, srt, 0.0).sum(-1) / h
    lo = np.take_along_axis(srt, g[:, None], -1)
    hi = np.take_along_axis(srt, (n - g - 1)[:, None], -1)
    valid = idx < n[:, None]
    win = np.where(valid, np.clip(srt, lo, hi), np.nan)
    with np.errstate(all="ignore"):
        wvar = np.nanvar(win, axis=-1, ddof=1)
        d = (n - 1) * wvar / (h * (h - 1))
    return mean, d, h


def intervals(x: np.ndarray, nx: np.ndarray, y: np.ndarray, ny: np.ndarray,
              confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The log-ratio interval of :func:`capshim.bench.stats.ratio_ci` for many benches at once.

    Args:
        x, y: log process values, shape (benches, width), NaN past each row's count.
        nx, ny: the counts, shape (benches,), each at least 2.
        confidence: the level.

    Returns:
        (centre, half-width) on the log scale, shape (benches,).
    """
    trim = np.where(_has_outlier(x, nx) | _has_outlier(y, ny), stats.TRIM, 0.0)
    mx, dx, hx = _trimmed(x, nx, trim)
    my, dy, hy = _trimmed(y, ny, trim)
    with np.errstate(all="ignore"):
        df = (dx + dy) ** 2 / (dx ** 2 / (hx - 1) + dy ** 2 / (hy - 1))
        half = _st.t.ppf(0.5 + confidence / 2.0, df) * np.sqrt(dx + dy)
    return mx - my, np.nan_to_num(half, nan=0.0)


def _model_mean(model: str, pool: np.ndarray | None) -> float:
    """The mean log effect of ``model`` (exact), so that scaling an arm's effects keeps its truth."""
    means = {"normal": 0.0, "heavy": 0.0, "bimodal": 0.3 * 0.045}
    if model == "empirical" and pool is not None:
        return float(np.log(pool).mean())
    return means.get(model, 0.0)


def _draw(model: str, benches: int, arms: int, cap: int, k: int, scales: np.ndarray,
          rng: np.random.Generator, pool: np.ndarray | None) -> np.ndarray:
    """Log process values, shape (benches, arms, cap); arm 0 is the reference (scale 1, truth 1)."""
    shape, scale = (benches, arms, cap), np.r_[1.0, scales][None, :, None]
    if model == "outliers":  # the bulk scales; a slow process stays 25% slow (contamination: truth is the bulk's)
        e = scale * rng.normal(0.0, 0.012, shape) + np.where(rng.random(shape) < 0.08, np.log(0.75), 0.0)
    else:  # centred, so that a scaled arm keeps its true ratio
        e = scale * (coverage.process_effects(model, benches * arms * cap, rng, pool).reshape(shape)
                     - _model_mean(model, pool))
    noise = np.median(rng.normal(0.0, coverage.WITHIN, (benches, arms, cap, k)), axis=-1)
    truth = np.r_[0.0, np.full(arms - 1, np.log(coverage.TRUTH))]
    return truth[None, :, None] + e + noise


def run_procedure(model: str, target: float, benches: int, *, scales=(1.0, 1.0, 0.25), minimum: int | None = None,
                  cap: int = 40, level: float | None = None, k: int = 5, seed: int = 20261202,
                  pool: np.ndarray | None = None) -> dict:
    """Simulate ``benches`` benches of the precision loop and measure its reported intervals.

    Each round after ``minimum`` processes a side: compute every comparison's interval at ``level``
    (arm vs the reference, in points of % of host); stop when all half-widths are at most
    ``target`` or no arm in a wide comparison is below ``cap``; otherwise the next round runs the
    reference and the arms of the wide comparisons (:func:`capshim.bench.schedule.next_round`'s
    rule). The reported interval is that interval at the stop, and it should hold the truth in
    95% of benches.

    Args:
        model: a process model of :data:`capshim.bench.coverage.MODELS`.
        target: the half-width asked for, in points.
        scales: the other arms' process-effect scales relative to the reference's.
        minimum, level: the rule's (default :data:`capshim.bench.schedule.MINIMUM` and ``LEVEL``).
        cap: processes per arm at most.

    Returns:
        ``{"model", "target", "coverage": the fraction of reported intervals (every arm's) holding the
        truth, "worst": the worst arm's, "by_arm": each arm's,
        "coverage_all": fraction of benches where every arm's did, "processes": mean processes per arm
        (reference first), "capped": fraction of benches that stopped at the cap, "half_width": median
        reported half-width (points), "reached": fraction of benches whose every interval met the target}``.
    """
    minimum = schedule.MINIMUM if minimum is None else minimum
    level = schedule.LEVEL if level is None else level
    rng = np.random.default_rng(seed)
    sc = np.asarray(scales, dtype=float)
    arms = sc.size + 1
    vals = _draw(model, benches, arms, cap, k, sc, rng, pool)
    n = np.full((benches, arms), minimum)
    live = np.ones(benches, bool)
    cover = np.zeros((benches, arms - 1), bool)
    widths = np.zeros((benches, arms - 1))
    capped = np.zeros(benches, bool)
    idx = np.arange(cap)[None, :]
    while live.any():
        b = np.flatnonzero(live)
        nb = n[b]
        logs = np.where(idx[None] < nb[:, :, None], vals[b], np.nan)
        half = np.empty((b.size, arms - 1))
        centre = np.empty_like(half)
        for a in range(1, arms):
            centre[:, a - 1], half[:, a - 1] = intervals(logs[:, a], nb[:, a], logs[:, 0], nb[:, 0], level)
        pts = 100.0 * np.exp(centre) * np.sinh(half)  # (e^(c+h) - e^(c-h)) / 2, in points of % of host
        wide = pts > target
        can = wide & (nb[:, 1:] < cap)
        stop = ~can.any(axis=1)
        done = b[stop]
        cover[done] = np.abs(centre[stop] - np.log(coverage.TRUTH)) <= half[stop]
        widths[done] = pts[stop]
        capped[done] = wide[stop].any(axis=1)
        live[done] = False
        go = b[~stop]
        n[go, 1:] += can[~stop]
        n[go, 0] += nb[~stop, 0] < cap
    return {"model": model, "target": target, "benches": benches, "coverage": float(cover.mean()),
            "worst": float(cover.mean(0).min()),
            "by_arm": [round(float(c), 4) for c in cover.mean(0)],
            "coverage_all": float(cover.all(1).mean()), "processes": [round(float(v), 1) for v in n.mean(0)],
            "capped": float(capped.mean()), "half_width": float(np.median(widths.max(1))),
            "reached": float((widths.max(1) <= target).mean()), "minimum": minimum, "level": level, "cap": cap}


def main(argv: list[str] | None = None) -> int:
    """Print the table (markdown) of the precision loop's coverage for the models and targets asked for."""
    ap = argparse.ArgumentParser(prog="python -m capshim.bench.sequential", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="normal,bimodal,heavy,outliers",
                    help="comma-separated, from: " + ", ".join(coverage.MODELS))
    ap.add_argument("--targets", default="2,1", help="half-widths asked for, in points")
    ap.add_argument("--benches", type=int, default=2000, help="simulated benches per row")
    ap.add_argument("--minimum", default=str(schedule.MINIMUM), help="processes per arm before the first check "
                    "(comma-separated to compare)")
    ap.add_argument("--level", default=str(schedule.LEVEL), help="the level the intervals are computed at, "
                    "checked and reported (comma-separated to compare)")
    ap.add_argument("--cap", type=int, default=40)
    ap.add_argument("--scales", default="1,1,0.25", help="the other arms' spread relative to the reference's")
    ap.add_argument("--bundle", type=Path, help="a bundle for the empirical model (its summary.json)")
    ap.add_argument("--test", default="pp512")
    ap.add_argument("--arms", default="native,aa,vm-unlocked", help="arms pooled by the empirical model")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        pool = coverage.empirical_pool(a.bundle / "summary.json", a.test, a.arms.split(",")) if a.bundle else None
        scales = tuple(float(s) for s in a.scales.split(","))
        rows = [run_procedure(m, float(t), a.benches, scales=scales, minimum=int(mn), cap=a.cap, level=float(lv),
                              pool=pool)
                for m in a.models.split(",") for t in a.targets.split(",") for mn in a.minimum.split(",")
                for lv in a.level.split(",")]
    except (ValueError, KeyError, OSError) as exc:  # a bad model, number, arm or bundle: one line, exit 2
        print(f"python -m capshim.bench.sequential: {exc}", file=sys.stderr)
        return 2
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        return 0
    print("| model | target | minimum | level | coverage | worst arm | processes per arm "
          "(reference first) | capped | median widest |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for r in rows:
        print(f"| {r['model']} | ±{r['target']:g} | {r['minimum']} | {100 * r['level']:g}% | {100 * r['coverage']:.1f}% | "
              f"{100 * r['worst']:.1f}% | {', '.join(f'{p:g}' for p in r['processes'])} | "
              f"{100 * r['capped']:.1f}% | ±{r['half_width']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
