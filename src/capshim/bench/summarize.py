"""The one recipe from a bench's records to its ``summary.json``, and the bench's finalize steps.

Every summary of a bench is made here (issue 29): the runner's precision loop, the
finalize steps a bench hands its bundle (:meth:`capshim.evidence.Bundle.finalize`:
the analysis, its fallbacks when it raised or a signal cut it short, results.csv,
report.md, chart.png) and the results store's comparisons (:mod:`capshim.db.query`)
all call :meth:`Recipe.summary`, so each applies the same metric directions, control
verdicts, A/A arm, notes, contamination exclusion, comparability rule and precision
record. The host rule (an arm that plays the host) is :func:`host_of_arm`.

The presentation files come from :mod:`capshim.export` (below the bench); the bench
never imports :mod:`capshim.report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from capshim.bench import analysis, metrics, stats
from capshim.errors import CapshimError
from capshim.evidence import finalize as _finalize
from capshim.evidence.finalize import Step
from capshim.export import chart as _chart
from capshim.export import csv as _csv
from capshim.export import markdown as _markdown

__all__ = ["Recipe", "Precision", "host_of_arm", "comparisons", "steps", "bundle_steps", "empty_summary"]


def host_of_arm(records: list[dict], arm: str, path: dict | None = None, source: str | None = None) -> dict:
    """The host baseline an arm of the same bench plays (``native`` as bare metal): the rule the
    bench and the results store share.

    Args:
        records: analysis records (``{"arm", "run", "test", "tok_s"}``); the arm's are grouped
            by process (``run``), the process being the unit.
        arm: the host arm's name.
        path: its attested path (the arm's ``path``), or None.
        source: where the host came from (default ``"arm ARM of this bench"``).

    Returns:
        ``{"name", "tests": {test: [[value, ...] per process]}, "path", "source"}`` as
        :func:`capshim.bench.analysis.analyze` takes ``host``.
    """
    tests: dict[str, dict[object, list[float]]] = {}
    for rec in records:
        if rec["arm"] == arm:
            tests.setdefault(rec["test"], {}).setdefault(rec.get("run"), []).append(rec["tok_s"])
    return {"name": arm, "tests": {t: list(v.values()) for t, v in tests.items()},
            "path": path or {}, "source": source or f"arm {arm} of this bench"}


def comparisons(summary: dict, tests: list[str] | None = None) -> list[tuple[str, str, float | None]]:
    """``(arm, series, half-width in points)`` of every interval a precision target applies to.

    Against the host where the series has one (% of host), else against the baseline
    (percent of the speedup); only the series named in ``tests`` (whole name or first word)
    when given.
    """
    out = []
    host = summary.get("host") or {}
    for name, arm in summary["arms"].items():
        for t, st in arm["tests"].items():
            if tests and t not in tests and t.split()[0] not in tests:
                continue
            if host.get("tests") and t in host["tests"]:
                if name == host.get("name"):
                    continue
                out.append((name, t, stats.half_width(st.get("pct_of_host"), percent=True)))
            elif name != summary["baseline"]:
                out.append((name, t, stats.half_width(st.get("speedup"), percent=False)))
    return out


def widest(summary: dict, tests: list[str] | None = None) -> float | None:
    """The widest half-width of :func:`comparisons`; None when one is unknown or there is none."""
    widths = [w for _, _, w in comparisons(summary, tests)]
    return None if any(w is None for w in widths) or not widths else max(widths)


@dataclass
class Precision:
    """A precision target's record in summary.json (``"precision"``).

    Attributes:
        target: the half-width asked for, in points.
        cap: processes per arm at most (``--max-runs``).
        tests: the tests it applies to (None: all).
        rounds: recorded rounds so far.
        reached: the precision loop's last verdict (None: it never checked).
        interrupted: a stop signal or an error ended the runs.
        level: the level the intervals were computed at (:data:`capshim.bench.schedule.LEVEL`).
    """

    target: float
    cap: int
    tests: list[str] | None = None
    rounds: int = 0
    reached: bool | None = None
    interrupted: bool = False
    level: float = 0.95

    def record(self, summary: dict) -> dict:
        """``{"target", "reached", "max_half_width", "rounds", "cap", "tests", "stopped_by", "level"}`` of ``summary``."""
        worst = widest(summary, self.tests)
        reached = worst is not None and worst <= self.target
        return {"target": self.target, "reached": reached, "max_half_width": worst, "rounds": self.rounds,
                "cap": self.cap, "tests": list(self.tests) if self.tests else "all",
                "stopped_by": ("target reached" if reached else "interrupted" if self.interrupted
                               else f"--max-runs {self.cap} reached"), "level": self.level}


@dataclass
class Recipe:
    """Everything that turns a bench's records into its summary; :meth:`summary` makes it.

    Attributes:
        records: analysis records of the finished runs, the excluded (contaminated) runs left
            out already (:func:`capshim.bench.analysis.analyze`'s ``records``).
        arms: ``{name: {"spec", "state", "path", "runs", ...}}`` in display order.
        baseline: the arm the speedups are relative to.
        host_arm: an arm of this bench that plays the host (:func:`host_of_arm`), or None.
        host: a host baseline measured elsewhere (used when ``host_arm`` is None), or None.
        metric_tests: ``{test: Metric}`` of the workload and its controls (tests not named are
            llama-bench tok/s, higher is better).
        controls: the control workloads' names.
        aa_arm, notes, bench_warnings, allow_mismatch: as for ``analyze``.
        precision: the precision target's record, or None without a target.
        confidence: the level of the intervals (:data:`capshim.bench.schedule.LEVEL` when the
            precision loop decided when to stop, else 0.95; see docs/statistics.md).
        refused: set by :meth:`summary` when the configurations differ and mismatches were not
            allowed: the summary is then made with the rows marked and a ``refused:`` note, and
            the caller raises this error after the seal.
    """

    records: list[dict]
    arms: dict
    baseline: str
    host_arm: str | None = None
    host: dict | None = None
    metric_tests: dict = field(default_factory=dict)
    controls: list[str] = field(default_factory=list)
    aa_arm: str | None = None
    notes: list[str] = field(default_factory=list)
    bench_warnings: list[str] = field(default_factory=list)
    allow_mismatch: bool = False
    precision: Precision | None = None
    refused: analysis.ComparabilityError | None = None
    confidence: float = 0.95

    def host_dict(self) -> dict | None:
        """The host baseline ``analyze`` takes: the host arm's (:func:`host_of_arm`), else ``host``."""
        if self.host_arm is None:
            return self.host
        return host_of_arm(self.records, self.host_arm, (self.arms.get(self.host_arm) or {}).get("path"))

    def summary(self, with_host: bool = True) -> dict:
        """summary.json's content: the analysis, metric directions and control verdicts
        (:func:`capshim.bench.metrics.annotate`), the precision record.

        ``with_host=False``: without the host baseline (the fallback when it cannot be used).

        Raises:
            AnalysisError: bad records (names the record); never ComparabilityError (see ``refused``).
        """
        host = self.host_dict() if with_host else None
        try:
            out = self._analyze(host, self.allow_mismatch, self.notes)
        except analysis.ComparabilityError as exc:  # seal what finished (rows marked), then refuse
            self.refused = exc
            out = self._analyze(host, True, [*self.notes, f"refused: {exc}"])
        if self.precision is not None:
            out["precision"] = self.precision.record(out)
        return out

    def _analyze(self, host: dict | None, allow_mismatch: bool, notes: list[str]) -> dict:
        lower = {t for t, m in self.metric_tests.items() if m.better == "lower"}
        out = analysis.analyze(self.records, self.arms, self.baseline, host, allow_mismatch=allow_mismatch,
                               aa_arm=self.aa_arm, notes=notes, lower_is_better=lower,
                               bench_warnings=self.bench_warnings, confidence=self.confidence)
        return metrics.annotate(out, self.metric_tests, self.controls) if self.metric_tests else out


def empty_summary(arms: dict, baseline: str) -> dict:
    """The summary of a bench whose analysis failed: every arm with its state and no tests."""
    return {"schema": "capshim-summary/1", "baseline": baseline, "tests": [], "host": None,
            "arms": {a: {"state": (v or {}).get("state"), "tests": {}} for a, v in arms.items()}}


def _chart_png(summary: dict, title: str | None) -> bytes | None:
    """chart.png of a bench's summary, or None when no arm has a measured test (no chart)."""
    if not any((a or {}).get("tests") for a in (summary.get("arms") or {}).values()):
        return None
    return _chart.serialize(summary, title)


def steps(recipe: Recipe, all_records: list[dict] | None = None, title: str | None = None) -> list[Step]:
    """The finalize steps of a bench bundle, in order, for :meth:`capshim.evidence.Bundle.finalize`.

    The summary (``summary.json``): :meth:`Recipe.summary` with the host baseline (step
    ``"host baseline"``, when the recipe has one), else without it (``"analysis"``), else
    :func:`empty_summary`; none of them is cut short by a stop signal. Then ``results.csv`` (one row per sample of ``all_records``,
    excluded runs included; never skipped), ``report.md`` and ``chart.png`` (none when
    nothing was measured).

    Args:
        recipe: the bench's recipe.
        all_records: every finished run's records (default ``recipe.records``).
        title: the heading of report.md and the chart (default ``"capshim bench"``).

    Returns:
        A list of :class:`capshim.evidence.Step`; each raises what its maker raises, which
        finalize records instead of stopping.
    """
    heading = title or "capshim bench"
    rows = recipe.records if all_records is None else all_records
    states = {a: (v or {}).get("state") for a, v in recipe.arms.items()}
    out = []
    # The summary steps are not slow steps: a stop signal (the first, a second, the end of the
    # grace) waits for them, so a bench stopped while analysing seals the summary the full
    # analysis writes. Their time is bounded by the records' (bounded metric output, run caps).
    if recipe.host_arm is not None or recipe.host is not None:
        out.append(Step("host baseline", _finalize.SUMMARY, recipe.summary, slow=False))
    out += [
        Step("analysis", _finalize.SUMMARY, lambda: recipe.summary(with_host=False), slow=False),
        Step("empty summary", _finalize.SUMMARY, lambda: empty_summary(recipe.arms, recipe.baseline), slow=False),
        Step("results.csv", "results.csv", lambda _s: _csv.serialize_records(rows, states), slow=False),
        Step("report", _finalize.REPORT, lambda s: _markdown.render([s], title=heading)),
        Step("chart", _finalize.CHART, lambda s: _chart_png(s, title)),
    ]
    return out


def bundle_steps(records: list[dict], arms: dict, baseline: str, host: dict | None = None,
                 title: str | None = None) -> list[Step]:
    """:func:`steps` of a plain recipe: ``records`` analysed as they are, ``host`` measured elsewhere.

    For bundles made outside a bench run (tests, ``capshim report``'s callers); a bench
    builds its full :class:`Recipe`.
    """
    return steps(Recipe(list(records), arms, baseline, host=host), records, title)


def precision_check(recipe: Recipe, target: float, rounds: int, cap: int,
                    tests: list[str] | None = None) -> dict:
    """Whether every interval is at most ``target`` points wide (half-width) in ``recipe``'s summary.

    Returns:
        ``{"target", "reached", "max_half_width", "rounds", "cap", "comparisons"}`` (``comparisons``:
        :func:`comparisons` of the summary, which :func:`capshim.bench.schedule.next_round` reads;
        empty when the analysis failed), plus ``"unknown_tests"`` and
        ``"known_tests"`` when ``tests`` names a test the results do not have.
    """
    try:
        summary = recipe.summary()
    except CapshimError:
        return {"target": target, "reached": False, "max_half_width": None, "rounds": rounds, "cap": cap,
                "comparisons": []}
    worst = widest(summary, tests)
    out = {"target": target, "reached": worst is not None and worst <= target, "max_half_width": worst,
           "rounds": rounds, "cap": cap, "comparisons": comparisons(summary, tests)}
    known = sorted({t for arm in summary["arms"].values() for t in arm["tests"]})
    unknown = [x for x in tests or [] if known and not any(t == x or t.split()[0] == x for t in known)]
    if unknown:
        out["unknown_tests"], out["known_tests"] = unknown, known
    return out
