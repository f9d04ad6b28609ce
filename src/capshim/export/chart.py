"""chart.png: grouped bars of median tok/s per series (one panel each), min–max whiskers.

A series of another metric (``--metric``, ``--workload ncnn``) is labelled with
its unit and direction (:func:`capshim.export.table.other_metric`).

Drawn with matplotlib's Agg backend, without the software tag so that the same
summary gives the same bytes.
"""

from __future__ import annotations

import io
import math

from capshim.export.table import other_metric
from capshim.summary import NOT_SHIM_STATES

__all__ = ["serialize", "png"]


#: Bars and whiskers are drawn clipped at this many tok/s (the label keeps the real value):
#: a workload printing 1e308 must not break the chart's axis arithmetic.
CLIP = 1e12


#: At most this many series get a panel; the chart says how many were left out.
MAX_PANELS = 24


def _clip(v: float) -> float:
    return min(v, CLIP) if math.isfinite(v) else CLIP


def _err(st: dict) -> list[list[float]]:
    med = _clip(st["median"])
    lo, hi = med - _clip(st["min"]), _clip(st["max"]) - med
    return [[lo if math.isfinite(lo) and lo > 0 else 0.0], [hi if math.isfinite(hi) and hi > 0 else 0.0]]


def _figure(summaries: list[dict], labels: list[str] | None, title: str | None):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    tests: list[str] = []
    for s in summaries:
        for t in s.get("tests") or []:
            if t not in tests:
                tests.append(t)
    labels = labels or [f"#{i + 1}" for i in range(len(summaries))]
    multi = len(summaries) > 1
    cut = len(tests) - MAX_PANELS if len(tests) > MAX_PANELS else 0
    if cut:  # a panel each: thousands of series would take minutes and exceed the image size limit
        tests = tests[:MAX_PANELS]
        title = f"{title + ' - ' if title else ''}first {MAX_PANELS} of {MAX_PANELS + cut} series (the table has all)"
    n = max(1, len(tests))
    fig, axes = plt.subplots(1, n, figsize=(max(5.0, 4.2 * n), 4.2), squeeze=False)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, t in zip(axes[0], tests):
        metric = other_metric(summaries, t)
        bars = []
        for s, label in zip(summaries, labels):
            pre = f"{label}:" if multi else ""
            host = s.get("host")
            if host and t in (host.get("tests") or {}) and host.get("name") not in s["arms"]:
                bars.append((pre + (host.get("name") or "host"), host["tests"][t], None, False))
            for a, arm in s["arms"].items():
                if t in arm["tests"]:
                    st = arm["tests"][t]
                    sp = st.get("speedup") if a != s["baseline"] else None
                    bars.append((pre + a, st, sp, arm["state"] in NOT_SHIM_STATES or bool(st.get("mismatch"))))
        for i, (name, st, sp, marked) in enumerate(bars):
            color = "#bbbbbb" if marked else palette[i % len(palette)]
            ax.bar(i, _clip(st["median"]), color=color, hatch="//" if marked else None, edgecolor="black",
                   linewidth=0.5, yerr=_err(st), capsize=4)
            txt = (f"{st['median']:.4g}" if metric else f"{st['median']:.1f}") + (f"\n{sp['value']:.2f}x" if sp else "")
            ax.annotate(txt, (i, _clip(st["max"])),
                        textcoords="offset points", xytext=(0, 3), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=30, ha="right", fontsize=8)
        ax.set_title(t, fontsize=9)
        ax.set_ylabel(f"{metric.get('unit') or 'value'} (median of processes, min–max; {metric.get('better')} is better)"
                      if metric else "tok/s (median of processes, min–max)")
        top = max((_clip(max(b[1]["max"], b[1]["median"])) for b in bars), default=1.0)
        ax.set_ylim(0, top * 1.25)  # room for the labels
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig, plt


def png(summaries: list[dict], labels: list[str] | None = None, title: str | None = None) -> bytes:
    """The chart of one or more summaries as PNG bytes (the same summary gives the same bytes).

    Bars of arms that are not shim results (or compare different configurations)
    are hatched and grey; the speedup vs the baseline is written above each bar.
    At most :data:`MAX_PANELS` series are drawn (the first ones); the title
    then says how many there were.

    Raises:
        ValueError, OverflowError: matplotlib refuses the values (a bundle's finalize records it).
    """
    fig, plt = _figure(summaries, labels, title)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    finally:
        plt.close(fig)
    return buf.getvalue()


def serialize(summary: dict, title: str | None = None) -> bytes:
    """chart.png of one summary, as PNG bytes (:func:`png`).

    Raises:
        ValueError, OverflowError: as :func:`png`.
    """
    return png([summary], None, title)
