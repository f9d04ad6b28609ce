"""The coverage simulation: benches of known truth, to choose and check the interval of :mod:`capshim.bench.stats`.

A simulated bench has two arms of ``n`` processes with ``k`` repetitions each.
Process ``i`` of an arm with true scale ``s`` has the value ``s * exp(e_i)``,
where ``e_i`` is the process effect drawn from a *process model*, and each of
its repetitions adds a within-process noise of 0.5% (what the H200 showed:
repetitions of one process agree within about 0.5%, processes differ by 2-3%).
The arm's truth is ``0.99`` of the reference's, so a method's interval covers
the truth when it contains 0.99.

Process models (:data:`MODELS`):

- ``normal``: effects N(0, 2%).
- ``bimodal``: a bulk N(0, 1%) and, with probability 0.3, a cluster 4.5%
  faster: the shape of the H200's pp512 process values
  (``evidence/h200-tinyllama-aa``: bulk near the median, a cluster 4-5% above).
- ``heavy``: Student t with 3 degrees of freedom, scale 1.2%.
- ``outliers``: N(0, 1.2%) and, with probability 0.08, a process 25% slower.
- ``empirical``: the process values of a real bundle, resampled (each test's
  values divided by that arm's median, pooled over the arms given).

Run ``python -m capshim.bench.coverage --help``; docs/statistics.md holds the
table this module printed and the command that printed it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats as _st

from capshim.bench import stats

__all__ = ["MODELS", "TRUTH", "process_effects", "simulate", "coverage", "empirical_pool", "median_bootstrap"]

#: The true ratio of every simulated bench.
TRUTH = 0.99
#: Within-process noise of one repetition (relative standard deviation).
WITHIN = 0.005
#: The process models, by name (see the module's docstring).
MODELS = ("normal", "bimodal", "heavy", "outliers", "empirical")


def process_effects(model: str, n: int, rng: np.random.Generator, pool: np.ndarray | None = None) -> np.ndarray:
    """``n`` log-scale process effects drawn from ``model``.

    Raises:
        ValueError: an unknown model, or ``empirical`` without a pool.
    """
    if model == "normal":
        return rng.normal(0.0, 0.02, n)
    if model == "bimodal":
        return np.where(rng.random(n) < 0.3, 0.045, 0.0) + rng.normal(0.0, 0.01, n)
    if model == "heavy":
        return 0.012 * rng.standard_t(3, n)
    if model == "outliers":
        return rng.normal(0.0, 0.012, n) + np.where(rng.random(n) < 0.08, np.log(0.75), 0.0)
    if model == "empirical":
        if pool is None or len(pool) < 2:
            raise ValueError("the empirical model needs a pool of at least 2 process values")
        return np.log(rng.choice(pool, n, replace=True))
    raise ValueError(f"unknown process model {model!r} (one of {', '.join(MODELS)})")


def simulate(model: str, n: int, rng: np.random.Generator, k: int = 5,
             pool: np.ndarray | None = None) -> tuple[list[list[float]], list[list[float]]]:
    """One bench: (arm, reference), each ``n`` processes of ``k`` repetitions; the arm's truth is :data:`TRUTH`."""
    sides = []
    for scale in (TRUTH, 1.0):
        e = process_effects(model, n, rng, pool)
        reps = scale * np.exp(e[:, None] + rng.normal(0.0, WITHIN, (n, k)))
        sides.append(reps.tolist())
    return sides[0], sides[1]


def median_bootstrap(arm, ref, rng: np.random.Generator, n_resamples: int = 2000) -> tuple[float, float]:
    """The method until December 2026, for comparison: percentile bootstrap of the ratio of medians of
    process values (both sides resampled independently)."""
    a, b = stats.process_values(arm), stats.process_values(ref)
    res = _st.bootstrap((a, b), lambda x, y, axis=-1: np.median(x, axis=axis) / np.median(y, axis=axis),
                        paired=False, vectorized=True, n_resamples=n_resamples, method="percentile",
                        random_state=rng)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def coverage(model: str, n: int, benches: int, seed: int = 20261201, pool: np.ndarray | None = None,
             method: str = "capshim") -> dict:
    """Simulate ``benches`` benches and measure a method's interval.

    Args:
        model: one of :data:`MODELS`.
        n: processes per arm.
        benches: simulated benches.
        method: ``capshim`` (:func:`capshim.bench.stats.ratio_ci` of the process values: the interval the bench reports from :data:`capshim.bench.stats.MIN_PROCESSES` processes on) or
            ``median-bootstrap`` (:func:`median_bootstrap`).

    Returns:
        ``{"model", "n", "benches", "method", "coverage": fraction of intervals holding the truth,
        "half_width": median half-width in percent of the ratio, "intervals": benches that had one}``.
    """
    rng = np.random.default_rng(seed)
    hits, widths, made = 0, [], 0
    for _ in range(benches):
        arm, ref = simulate(model, n, rng, pool=pool)
        if method == "capshim":
            ci = stats.ratio_ci(stats.process_values(arm), stats.process_values(ref))
        elif method == "median-bootstrap":
            ci = median_bootstrap(arm, ref, rng)
        else:
            raise ValueError(f"unknown method {method!r}")
        if ci is None:
            continue
        made += 1
        hits += ci[0] <= TRUTH <= ci[1]
        widths.append(100.0 * (ci[1] - ci[0]) / 2.0 / TRUTH)
    return {"model": model, "n": n, "benches": benches, "method": method,
            "coverage": hits / made if made else None,
            "half_width": float(np.median(widths)) if widths else None, "intervals": made}


def empirical_pool(summary_path: Path, test: str, arms: list[str]) -> np.ndarray:
    """The process values of ``test`` in a bundle's summary.json, each arm's divided by its median, pooled.

    Raises:
        capshim.summary.AnalysisError: the file is not a summary (names it).
        KeyError: an arm or test the summary does not have.
    """
    from capshim.summary import load  # storage contract; imported here to keep `python -m` light

    s = load(summary_path)
    out: list[float] = []
    for arm in arms:
        entry = s["arms"][arm]["tests"][test]
        vals = stats.process_values(entry["by_process"])
        out.extend((vals / np.median(vals)).tolist())
    return np.asarray(out)


def main(argv: list[str] | None = None) -> int:
    """Print the coverage table (markdown) for the models, process counts and methods asked for."""
    ap = argparse.ArgumentParser(prog="python -m capshim.bench.coverage", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="normal,bimodal,heavy,outliers", help="comma-separated, from: "
                    + ", ".join(MODELS))
    ap.add_argument("--n", default="3,5,8,14", help="processes per arm, comma-separated")
    ap.add_argument("--benches", type=int, default=2000, help="simulated benches per cell")
    ap.add_argument("--methods", default="capshim,median-bootstrap")
    ap.add_argument("--bundle", type=Path, help="a bundle for the empirical model (its summary.json)")
    ap.add_argument("--test", default="pp512")
    ap.add_argument("--arms", default="native,aa,vm-unlocked", help="arms pooled by the empirical model")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    pool = empirical_pool(a.bundle / "summary.json", a.test, a.arms.split(",")) if a.bundle else None
    rows = [coverage(m, int(n), a.benches, pool=pool, method=meth)
            for m in a.models.split(",") for n in a.n.split(",") for meth in a.methods.split(",")]
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        return 0
    print("| model | processes per arm | method | coverage | median half-width (%) |")
    print("| --- | ---: | --- | ---: | ---: |")
    for r in rows:
        cov = f"{100 * r['coverage']:.1f}%" if r["coverage"] is not None else "no interval"
        hw = f"±{r['half_width']:.2f}" if r["half_width"] is not None else ""
        print(f"| {r['model']} | {r['n']} | {r['method']} | {cov} | {hw} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
