"""Metrics of any workload: what number a run yields, its unit and direction.

``capshim bench --metric SPEC -- CMD ARGS`` benchmarks any command. SPEC is one of:

* ``wall``: the wall-clock seconds of each run's process, measured by the
  harness from start to exit (as hyperfine does; the few milliseconds of the
  ``sh -c exec`` wrapper every arm has are included). Unit ``s``, lower is
  better. One sample per run.
* ``json:PATH``: a number (one sample) or a list of numbers (one sample each,
  e.g. per-repetition times) from the JSON the command prints on stdout.
  PATH is dotted keys with ``[N]`` list indexes: ``results.fps``,
  ``runs[0].ms``, ``samples_ms``. The JSON is the whole stdout, or else the
  last JSON value that starts a line.
* ``regex:PATTERN``: every match of a Python regular expression in stdout,
  then stderr (without the shims' own banner and warning lines); the one capture
  group is the number.

``json:`` and ``regex:`` need ``--better higher|lower`` (a number's meaning
is the command's); ``--unit`` names the unit (shown in the table and
``summary.json``). Values must be finite and > 0 (ratios are taken).

The harness's statistics compare medians as ``median(arm) / median(baseline)``.
For a lower-is-better metric, :func:`annotate` turns every ratio of the
summary into ``median(baseline) / median(arm)``, so "speedup" always reads
"times faster than the baseline" and "% of host" "% of the host's speed"
(the bootstrap interval of the inverse is the inverse of the interval: the
percentile interval is invariant under a monotone map).

This module is the metric model (what a spec means, how ratios read); the
adapter that reads a run's output is
:mod:`capshim.bench.workloads.command`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from capshim.contracts import bounded
from capshim.contracts.numbers import AA_BAND_PCT
from capshim.contracts.suggest import closest
from capshim.contracts.verdict import UNRELIABLE, harness_check
from capshim.errors import CapshimError, UsageError

__all__ = ["Metric", "MetricError", "parse_spec", "json_path", "annotate", "TOK_S", "CONTROL_SUFFIX",
           "control_test", "MAX_RUN_SAMPLES", "MAX_RUN_TESTS", "check_run_size"]

#: The most values (samples) one run may yield, and the most tests (series): what the analysis of a
#: bench takes in a bounded time (it is not cut short by a signal: docs/contracts.md). Measured:
#: analysis.analyze of 2 arms x 3 processes x 3 samples takes 3.6 s for 2,000 series and 27.5 s for
#: 20,000 on a loaded 2-core machine (at 12ade4d), hence 1,000 series; 100,000 values of one series take well
#: under a second.
MAX_RUN_SAMPLES = 100_000
MAX_RUN_TESTS = 1000

KINDS = ("wall", "json", "regex")
DIRECTIONS = ("higher", "lower")
#: Test names of control workloads end with this (``NAME (control)``).
CONTROL_SUFFIX = " (control)"


class MetricError(CapshimError):
    """A run's output does not yield the metric; names the flag, the spec and the file (exit 2)."""


@dataclass(frozen=True)
class Metric:
    """One metric.

    Attributes:
        kind: ``wall``, ``json``, ``regex`` or ``tok/s`` (llama-bench rows).
        arg: the json PATH or the regex PATTERN (None for wall and tok/s).
        unit: the unit shown (``s`` for wall, ``tok/s``; free text otherwise, may be "").
        better: ``higher`` or ``lower``.
        name: the test name its records carry.
        flag: the option it came from (named in errors).
    """

    kind: str
    arg: str | None
    unit: str
    better: str
    name: str
    flag: str = "--metric"

    @property
    def spec(self) -> str:
        """The spec as written: ``wall``, ``json:PATH``, ``regex:PATTERN``."""
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"

    def to_dict(self) -> dict:
        """``{"spec", "kind", "unit", "better", "ratio"}`` for summary.json (``ratio`` says how speedups read)."""
        ratio = ("median(arm) / median(baseline)" if self.better == "higher"
                 else "median(baseline) / median(arm)")
        return {"spec": self.spec, "kind": self.kind, "unit": self.unit, "better": self.better,
                "ratio": f"{ratio}: above 1.00x is better ({self.better} is better)"}

    def label(self) -> str:
        """``s, lower is better`` for table cells."""
        return f"{self.unit + ', ' if self.unit else ''}{self.better} is better"


#: llama-bench and the built-in llama.cpp workload: tokens per second, higher is better.
TOK_S = Metric("tok/s", None, "tok/s", "higher", "", flag="llama-bench")


def control_test(name: str, test: str | None = None) -> str:
    """The test name of a control workload's records: ``NAME (control)`` or ``NAME test (control)``."""
    return f"{name}{' ' + test if test else ''}{CONTROL_SUFFIX}"


def parse_spec(spec: str, unit: str | None = None, better: str | None = None, flag: str = "--metric",
               name: str | None = None) -> Metric:
    """Parse a metric spec.

    Args:
        spec: ``wall``, ``json:PATH`` or ``regex:PATTERN``.
        unit: the unit (default ``s`` for wall, "" otherwise).
        better: ``higher`` or ``lower`` (default lower for wall; required otherwise).
        flag: the option named in errors.
        name: the test name (default ``wall``, PATH, or ``regex``).

    Raises:
        UsageError: unknown kind, empty PATH/PATTERN, a PATH or PATTERN that does
            not compile, a missing or bad direction; the message names ``flag``.
    """
    kind, sep, arg = (spec or "").partition(":")
    kind = kind.strip()
    if kind not in KINDS:
        hint = closest(kind, KINDS)
        hint = f" (did you mean '{hint}{sep}{arg}'?)" if hint else ""
        raise UsageError(f"{flag} {spec!r}: expected wall, json:PATH or regex:PATTERN{hint}")
    if kind == "wall":
        if sep:
            raise UsageError(f"{flag} {spec!r}: 'wall' takes no argument")
        arg = None
    elif not arg:
        raise UsageError(f"{flag} {spec!r}: {kind}: needs a {'PATH' if kind == 'json' else 'PATTERN'}")
    if kind == "json":
        _path_parts(arg, f"{flag} {spec!r}")
    if kind == "regex":
        bounded.text(arg, f"{flag} regex:PATTERN")
        try:
            rx = re.compile(arg)
        except re.error as exc:
            raise UsageError(f"{flag} {spec!r}: not a valid regular expression: {exc}") from None
        if rx.groups != 1:
            raise UsageError(f"{flag} {spec!r}: use exactly one capture group around the number, "
                             r"e.g. 'regex:elapsed_ms=([0-9.]+)'")
    if better is None:
        if kind != "wall":
            raise UsageError(f"{flag} {spec!r}: say whether higher or lower is better with --better higher|lower")
        better = "lower"
    if better not in DIRECTIONS:
        raise UsageError(f"--better {better!r}: expected higher or lower")
    if unit is None:
        unit = "s" if kind == "wall" else ""
    return Metric(kind, arg, unit, better, name or {"wall": "wall", "regex": "regex"}.get(kind, arg), flag)


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _path_parts(path: str, where: str) -> list[str | int]:
    parts: list[str | int] = []
    pos = 0
    while pos < len(path):
        if path[pos] == "." and parts and pos + 1 < len(path):
            pos += 1
        m = _PART.match(path, pos)
        if not m:
            raise UsageError(f"{where}: bad PATH at character {pos + 1} (use keys.joined.by.dots and [N])")
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not parts:
        raise UsageError(f"{where}: empty PATH")
    return parts


def json_path(value, path: str, where: str):
    """Follow PATH (``a.b[0].c``) into a decoded JSON value.

    Raises:
        MetricError: a key is missing or an index is out of range (names ``where`` and the step).
    """
    cur = value
    done = ""
    for part in _path_parts(path, where):
        if isinstance(part, int):
            if not isinstance(cur, list) or part >= len(cur):
                raise MetricError(f"{where}: {done or 'the JSON'} has no item [{part}]")
            cur = cur[part]
            done += f"[{part}]"
        else:
            if not isinstance(cur, dict) or part not in cur:
                raise MetricError(f"{where}: key {part!r} not found" + (f" under {done}" if done else ""))
            cur = cur[part]
            done += ("." if done else "") + part
    return cur


def _invert(cmp: dict | None, scale: float = 1.0) -> dict | None:
    """``{"value": v, "ci95": [lo, hi]}`` of a ratio r (times ``scale``) -> the same of 1/r (times ``scale``)."""
    if not cmp or not cmp.get("value"):
        return cmp
    k = scale * scale
    ci, rng = cmp.get("ci95"), cmp.get("range")
    out = {**cmp, "value": k / cmp["value"],
           "ci95": [k / ci[1], k / ci[0]] if ci and ci[0] > 0 and ci[1] > 0 else ci}
    if rng:
        out["range"] = [k / rng[1], k / rng[0]] if rng[0] > 0 and rng[1] > 0 else None
    return out


#: What one process's samples are, per metric kind (the method line of the report).
_SAMPLES = {"wall": "its wall-clock seconds", "json": "the number(s) at {arg} in its JSON output",
            "regex": "every match of {arg} in its output"}


def annotate(summary: dict, metrics: dict[str, Metric], controls: list[str] | None = None) -> dict:
    """Add metric directions and control-workload verdicts to an analysis summary (in place).

    Args:
        summary: :func:`capshim.bench.analysis.analyze` output: ``arms[name]["tests"][test]`` with
            ``speedup`` and ``pct_of_host`` as ``{"value", "ci95"}``.
        metrics: ``{test: Metric}``; tests not named are llama-bench tok/s (:data:`TOK_S`).
        controls: names of the control workloads (their tests end in :data:`CONTROL_SUFFIX`).

    Returns:
        The summary with ``"metrics": {test: Metric.to_dict()}``, ``method.statistic`` saying
        what a process's samples are when a test is not tok/s; for lower-is-better tests
        ``speedup``, ``pct_of_host`` and the A/A ratio (``aa.tests``) inverted (baseline/arm); ``"controls": {name: {"expectation":
        "no change", "tests": [test], "arms": {arm: {test: {"ratio", "ci95", "moved": bool}}}}}``
        (``moved``: the harness check fails, :func:`capshim.contracts.verdict.harness_check`: the 95%
        interval, or below 5 processes the range, excludes 1.00x or leaves +-5%); a flag on each arm whose control moved, and
        ``"notes"`` ([str]) the report prints under the table.
    """
    summary["metrics"] = {t: (metrics.get(t) or TOK_S).to_dict() for t in summary.get("tests") or []}
    notes = summary.setdefault("notes", [])
    other = {t: m for t, m in metrics.items() if t in summary["metrics"]}
    if other and isinstance(summary.get("method"), dict):
        summary["method"]["statistic"] = (
            "median of per-process medians (each process one run; its samples: "
            + "; ".join(f"{t}: {_SAMPLES[m.kind].format(arg=m.arg)}" for t, m in other.items())
            + ("; other tests: llama-bench samples_ts" if len(other) < len(summary["metrics"]) else "") + ")")
    for t, m in metrics.items():
        if m.better == "lower" and t in summary["metrics"]:
            for arm in summary["arms"].values():
                entry = (arm.get("tests") or {}).get(t)
                if not entry:
                    continue
                entry["speedup"] = _invert(entry.get("speedup"))
                entry["pct_of_host"] = _invert(entry.get("pct_of_host"), 100.0)
            aa_tests = (summary.get("aa") or {}).get("tests") or {}
            if aa_tests.get(t):
                aa_tests[t] = _invert(aa_tests[t])
    lower = [t for t in summary["metrics"] if summary["metrics"][t]["better"] == "lower"]
    if lower:
        notes.append(f"lower is better for {', '.join(lower)}: speedup = median(baseline) / median(arm), "
                     "% of host = 100 * median(host) / median(arm)")
    out_controls = {}
    for name in controls or []:
        tests = [t for t in summary.get("tests") or [] if t.startswith(name) and t.endswith(CONTROL_SUFFIX)]
        per_arm: dict = {}
        for arm_name, arm in summary["arms"].items():
            for t in tests:
                sp = (arm.get("tests") or {}).get(t, {}).get("speedup")
                if not sp or arm_name == summary.get("baseline"):
                    continue
                # the harness check of the A/A arm (below 5 processes: the range): a control that
                # should not move but excludes 1.00x or leaves +-5% says the harness is unreliable here
                h = harness_check(sp)
                moved = h is not None and not h.reliable
                per_arm.setdefault(arm_name, {})[t] = {"ratio": sp["value"], "ci95": sp.get("ci95"), "moved": moved}
                if moved:
                    arm.setdefault("flags", []).append(
                        f"control {name} moved: {sp['value']:.2f}x, {h.why} (expected no change): {UNRELIABLE}")
        out_controls[name] = {"expectation": "no change", "tests": tests, "arms": per_arm}
    if out_controls:
        summary["controls"] = out_controls
        notes.append(f"control workloads ({', '.join(out_controls)}): expectation no change (1.00x); "
                     f"a control whose 95% interval (below 5 processes: range) excludes 1.00x or leaves +-{AA_BAND_PCT:g}% "
                     "is flagged")
    return summary


def check_run_size(records: list[dict], source: str) -> None:
    """Refuse one run's analysis records over :data:`MAX_RUN_SAMPLES` values or :data:`MAX_RUN_TESTS` tests.

    Raises:
        MetricError: naming ``source`` (the run's stdout file) and the limit.
    """
    if len(records) > MAX_RUN_SAMPLES:
        raise MetricError(f"{source}: more than {MAX_RUN_SAMPLES} values in one run (the most capshim analyses)")
    tests = {r.get("test") for r in records}
    if len(tests) > MAX_RUN_TESTS:
        raise MetricError(f"{source}: {len(tests)} tests (series) in one run, more than the {MAX_RUN_TESTS} "
                          "capshim analyses")
