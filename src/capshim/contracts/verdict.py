"""The one verdict rule: "improvement", "regression", "same" or "unclear", and the harness check.

Every place that says whether something got better or worse goes through
:func:`decide` (``db compare``, ``db trend``, ``db matrix``, the studies'
confirmations); every place that judges the harness itself (the A/A arm, the
control workloads) goes through :func:`harness_check`. Issue 28: two bundles
of 2 processes a side, both contaminated, were called "improvement 2.319x".

The rule (docs/statistics.md), for a ratio read "times better" (above 1.00x
the second side is better, whichever the metric's direction) with its 95%
interval:

1. Fewer than :data:`~capshim.contracts.numbers.MIN_PROCESSES` processes on
   either side (the process is the sample): "unclear (2 processes a side;
   need 5)". Below that the bench gives a range, not an interval, and a range
   of 2 processes says little.
2. Either side mostly contaminated (more than half of its kept processes
   flagged by the bench's telemetry, ``runs[i]["contaminated"]`` in
   summary.json): "unclear (A mostly contaminated: 4 of 5 processes)".
3. No interval (values not all positive): "unclear (no interval)".
4. The whole interval above ``1 + T/100``: "improvement"; below ``1 - T/100``:
   "regression" (T: the threshold, percent, default
   :data:`~capshim.contracts.numbers.DEFAULT_THRESHOLD`).
5. The whole interval inside ``[1 - T/100, 1 + T/100]`` (the equivalence band):
   "same".
6. Otherwise "unclear (interval crosses 1.00x)" or "... crosses 1.02x".

% of host is the same rule on ``pct / 100`` (:func:`decide` with
``percent=True`` writes the reasons in percent).

The harness check: an A/A arm (the app layer active, stock answers) or a
control workload expected not to move is *unreliable* when its interval
(below 5 processes: its range) excludes 1.00x or reaches beyond 1.00x +-
:data:`~capshim.contracts.numbers.AA_BAND_PCT` percent: then the harness's own
noise or bias is as large as the effects measured, and the table says so
(:data:`UNRELIABLE`).

Only the standard library: exporters, storage, the bench and the studies all import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from capshim.contracts.numbers import AA_BAND_PCT, DEFAULT_THRESHOLD, MIN_PROCESSES

__all__ = ["IMPROVEMENT", "REGRESSION", "SAME", "UNCLEAR", "WORDS", "DIRECTIONS", "UNRELIABLE", "Side",
           "Verdict", "gate", "decide", "decide_cmp", "side", "contamination", "HarnessCheck", "harness_check",
           "interval_of", "RULE"]

IMPROVEMENT = "improvement"
REGRESSION = "regression"
SAME = "same"
UNCLEAR = "unclear"
#: Every word :func:`decide` gives.
WORDS = (IMPROVEMENT, REGRESSION, SAME, UNCLEAR)
#: The words that claim a direction.
DIRECTIONS = (IMPROVEMENT, REGRESSION)
#: What a table says when the harness check fails (:func:`harness_check`).
UNRELIABLE = "the harness is unreliable here"

#: The rule in one line, for the lines under a table ({t}: the threshold, percent).
RULE = (f"improvement/regression: both sides {MIN_PROCESSES}+ processes, neither mostly contaminated, and the "
        "95% interval entirely beyond {t:g}%; same: the interval inside +-{t:g}%; otherwise unclear (why)")


@dataclass(frozen=True)
class Side:
    """One side of a comparison: how many processes it has and how many of them are contaminated.

    Attributes:
        processes: processes (the statistical unit) that gave the side's values, >= 0.
        contaminated: of the side's kept runs, how many the telemetry flagged (0 when not recorded).
        runs: the side's kept runs (the denominator of "mostly"); None: ``processes``.
        label: how a reason names the side ("A", "native", "host"); empty: "a side".
    """

    processes: int
    contaminated: int = 0
    runs: int | None = None
    label: str = ""

    @property
    def mostly_contaminated(self) -> bool:
        """More than half of the side's kept runs contaminated."""
        total = self.processes if self.runs is None else self.runs
        return total > 0 and 2 * self.contaminated > total


@dataclass(frozen=True)
class Verdict:
    """A verdict: ``word`` (one of :data:`WORDS`) and, for "unclear", why (a few words).

    ``str(v)`` is ``"unclear (2 processes a side; need 5)"`` or ``"same"``.
    """

    word: str
    why: str = ""

    def __str__(self) -> str:
        return f"{self.word} ({self.why})" if self.why else self.word

    @property
    def directed(self) -> bool:
        """Whether the verdict claims a direction (improvement or regression)."""
        return self.word in DIRECTIONS

    def to_json(self) -> dict:
        """``{"verdict": word, "why": str | None}``."""
        return {"verdict": self.word, "why": self.why or None}


def _processes_reason(a: Side, b: Side) -> str | None:
    if min(a.processes, b.processes) >= MIN_PROCESSES:
        return None
    if a.processes == b.processes:
        return f"{a.processes} process{'es' if a.processes != 1 else ''} a side; need {MIN_PROCESSES}"
    return f"{a.processes} and {b.processes} processes; need {MIN_PROCESSES} a side"


def _contamination_reason(a: Side, b: Side) -> str | None:
    dirty = [s for s in (a, b) if s.mostly_contaminated]
    if not dirty:
        return None
    if len(dirty) == 2:
        return "both sides mostly contaminated"
    s = dirty[0]
    total = s.processes if s.runs is None else s.runs
    return f"{s.label or 'a side'} mostly contaminated ({s.contaminated} of {total} runs)"


def gate(a: Side, b: Side) -> str | None:
    """Rules 1 and 2 alone: why no direction can be claimed between ``a`` and ``b`` whatever the
    interval ("2 processes a side; need 5", "A mostly contaminated (3 of 5 runs)"), or None. For a
    selection rule of its own (ablate's smallest raise profile) that still must not read noise."""
    return _processes_reason(a, b) or _contamination_reason(a, b)


def decide(value: float | None, ci95, a: Side, b: Side, threshold: float = DEFAULT_THRESHOLD, *,
           percent: bool = False) -> Verdict:
    """The verdict of one comparison (the module's rule).

    Args:
        value: the ratio, "times better" (above 1 the second side is better); with ``percent``
            in percent (100 = the same). None: no ratio ("unclear (no ratio)").
        ci95: its 95% interval ``[lo, hi]`` (same unit as ``value``), or None. A *range* of
            ratios (below 5 processes) is never an interval: rule 1 decides first.
        a, b: the two sides (the reference and the other), :class:`Side`.
        threshold: T, percent of the ratio (points of % of host with ``percent``), finite, >= 0.
        percent: ``value`` and ``ci95`` are percentages (% of host).

    Returns:
        A :class:`Verdict`.
    """
    k = 100.0 if percent else 1.0
    why = gate(a, b)
    if why:
        return Verdict(UNCLEAR, why)
    if value is None:
        return Verdict(UNCLEAR, "no ratio")
    if not ci95:
        return Verdict(UNCLEAR, "no interval")
    lo, hi = ci95[0] / k, ci95[1] / k
    up, down = 1.0 + threshold / 100.0, 1.0 - threshold / 100.0
    if lo > up:
        return Verdict(IMPROVEMENT)
    if hi < down:
        return Verdict(REGRESSION)
    if lo >= down and hi <= up:
        return Verdict(SAME)
    edge = 1.0 if lo <= 1.0 <= hi else (up if lo > 1.0 else down)
    return Verdict(UNCLEAR, f"interval crosses {_fmt(edge, percent)}")


def _fmt(ratio: float, percent: bool) -> str:
    return f"{ratio * 100:.0f}%" if percent else f"{ratio:.2f}x"


def interval_of(cmp: dict | None) -> tuple[float, float] | None:
    """The 95% interval of a summary comparison (``speedup``, ``pct_of_host``, an A/A test), or None
    (below 5 processes it has a range instead: never read as an interval here)."""
    ci = cmp.get("ci95") if isinstance(cmp, dict) else None
    return (float(ci[0]), float(ci[1])) if ci else None


def contamination(runs) -> tuple[int, int]:
    """``(contaminated, kept)`` of an arm's runs as summary.json records them (``arms[NAME]["runs"]``:
    ``{"contaminated": [reasons] | bool, "excluded": bool, ...}``); excluded runs are in neither count."""
    kept = [r for r in runs or [] if isinstance(r, dict) and not r.get("excluded")]
    return sum(1 for r in kept if r.get("contaminated")), len(kept)


def side(processes: int | None, runs=None, label: str = "") -> Side:
    """A :class:`Side` from a process count (None: 0) and the arm's summary.json runs (contamination)."""
    dirty, kept = contamination(runs)
    return Side(int(processes or 0), dirty, kept or None, label)


def decide_cmp(cmp: dict | None, runs_a=None, runs_b=None, threshold: float = DEFAULT_THRESHOLD, *,
               labels: tuple[str, str] = ("", ""), percent: bool = False) -> Verdict:
    """:func:`decide` of a summary.json comparison ``{"value", "ci95", "processes": [n_arm, n_ref]}``.

    ``runs_a``/``runs_b``: the reference's and the arm's runs (summary.json ``arms[NAME]["runs"]``)
    for contamination (None: not recorded). ``processes`` is [arm, reference]: A is the reference.
    A comparison without ``processes`` (a summary written before it existed) has no process count:
    "unclear (processes not recorded)".
    """
    if not isinstance(cmp, dict) or cmp.get("value") is None:
        return Verdict(UNCLEAR, "no ratio")
    procs = cmp.get("processes")
    if not (isinstance(procs, list) and len(procs) == 2):
        return Verdict(UNCLEAR, "processes not recorded")
    a, b = side(procs[1], runs_a, labels[0]), side(procs[0], runs_b, labels[1])
    return decide(cmp["value"], interval_of(cmp), a, b, threshold, percent=percent)


@dataclass(frozen=True)
class HarnessCheck:
    """The harness check of one A/A or control comparison.

    Attributes:
        reliable: False when the interval (or range) excludes 1.00x or leaves +-AA_BAND_PCT.
        value: the ratio; bounds: the interval or range; kind: "interval" or "range".
        why: what failed ("range 0.81-2.19x leaves +-5%"), empty when reliable.
    """

    reliable: bool
    value: float
    bounds: tuple[float, float]
    kind: str
    why: str = ""

    def text(self, what: str) -> str:
        """``"the harness is unreliable here: A/A aa pp512 1.42x, range 0.81-2.19x leaves +-5%"``
        (``what`` names the comparison); empty when reliable."""
        return f"{UNRELIABLE}: {what} {self.value:.2f}x, {self.why}" if not self.reliable else ""


def harness_check(cmp: dict | None, band_pct: float = AA_BAND_PCT) -> HarnessCheck | None:
    """Judge an A/A or control comparison (``{"value", "ci95" | "range"}``, a ratio, 1.00x expected).

    Returns:
        None when there is neither an interval nor a range (a single sample: nothing to judge);
        else a :class:`HarnessCheck`, unreliable when the interval (below 5 processes: the range)
        excludes 1.00x or reaches outside ``[1 - band_pct/100, 1 + band_pct/100]``.
    """
    if not isinstance(cmp, dict) or cmp.get("value") is None:
        return None
    kind, b = ("interval", cmp.get("ci95")) if cmp.get("ci95") else ("range", cmp.get("range"))
    if not b:
        return None
    lo, hi = float(b[0]), float(b[1])
    shown = f"{kind} {lo:.2f}-{hi:.2f}x"
    if not lo <= 1.0 <= hi:
        why = f"{shown} excludes 1.00x"
    elif lo < 1.0 - band_pct / 100.0 or hi > 1.0 + band_pct / 100.0:
        why = f"{shown} leaves +-{band_pct:g}%"
    else:
        why = ""
    return HarnessCheck(not why, float(cmp["value"]), (lo, hi), kind, why)
