"""The report table of one or more summaries: the model that Markdown, HTML and the terminal render.

One row per arm and series (plus the host baseline when it is not an arm):
median tok/s (median of per-process medians), min–max of the process values,
processes × repetitions, speedup vs the baseline arm with its 95% interval, %
of host, the arm's state, the path llama.cpp attested, and notes (flags,
stability warnings, configuration mismatches). The notes under the table say
the method, the A/A arm's ratio to native, the precision reached and the
bench's own notes. Numbers are formatted here and nowhere before.

A summary of another metric than llama-bench tok/s (``"metrics"`` in
summary.json, :mod:`capshim.bench.metrics`) gets the header ``median`` and
each test its unit and direction: ``wall (s, lower is better)``; its numbers
have 4 significant digits (seconds of a fast command are not 2-decimal numbers).
"""

from __future__ import annotations

import re
from pathlib import Path

from capshim.contracts.verdict import UNRELIABLE, harness_check
from capshim.summary import DISPLAY_COLUMNS, NOT_SHIM_STATES, OFF_DEVICE_STATES, display_value

__all__ = ["table", "fmt_ratio", "other_metric", "BASE_COLUMNS", "NUMERIC_PREFIXES"]

BASE_COLUMNS = ["arm", "test", "median tok/s", "min–max", "processes×reps", "speedup", "% of host", "state"]
#: Columns whose header starts with one of these are right-aligned numbers.
NUMERIC_PREFIXES = ("median", "speedup", "% of", "min", "processes")


#: A flag of a summary written before the option was named with its command: "--exclude-contaminated" is
#: the bench's (capshim report reads it in a bundle, it does not accept it).
_OLD_EXCLUDE = re.compile(r"kept \(--exclude-contaminated drops them\)")
_NEW_EXCLUDE = "kept (capshim bench --exclude-contaminated drops them)"


def _flags(arm: dict) -> list:
    """An arm's flags as stored, the option they name written with its command (:data:`_OLD_EXCLUDE`)."""
    return [_OLD_EXCLUDE.sub(_NEW_EXCLUDE, f) if isinstance(f, str) else f for f in arm.get("flags") or []]

def fmt_ratio(cmp: dict | None, unit: str) -> str:
    """``1.23x [1.20–1.26]`` (unit ``x``) or ``98.25% [97.74–98.69]`` (unit ``%``): the 95% interval in
    brackets; below the process count for an interval (``level: "range"``) the range of ratios in
    parentheses, ``1.16x (range 1.05–1.33)``; "" for None."""
    if not cmp:
        return ""
    s = f"{cmp['value']:.2f}{unit}"
    if cmp.get("ci95"):
        s += f" [{cmp['ci95'][0]:.2f}–{cmp['ci95'][1]:.2f}]"
    elif cmp.get("range"):
        s += f" (range {cmp['range'][0]:.2f}–{cmp['range'][1]:.2f})"
    return s


def other_metric(summaries: list[dict], test: str) -> dict | None:
    """The ``metrics`` entry (``{"unit", "better", ...}``) of ``test`` when it is not llama-bench
    tok/s, else None (summaries without ``metrics`` are tok/s)."""
    return next((m for s in summaries for t, m in (s.get("metrics") or {}).items()
                 if t == test and m.get("kind") != "tok/s"), None)


def _unit_text(metric: dict) -> str:
    """``TFLOP/s, higher is better`` (or ``higher is better`` without a unit), in parentheses."""
    unit = metric.get("unit")
    return f"({unit + ', ' if unit else ''}{metric.get('better')} is better)"


def _test_cell(test: str, metric: dict | None, mixed: bool) -> str:
    if metric is None:
        return f"{test} (tok/s)" if mixed else test
    return f"{test} {_unit_text(metric)}"


def _common_metric(summaries: list[dict], units: dict) -> dict | None:
    """The metric every test shares (one unit, one direction; none is llama-bench tok/s), or None:
    the table then says it once, in the median's header, instead of in every row (torch-sdpa)."""
    tests = [t for s in summaries for t in s.get("tests") or []]
    if not tests or any(t not in units for t in tests):
        return None
    kinds = {(units[t].get("unit"), units[t].get("better")) for t in tests}
    return units[tests[0]] if len(kinds) == 1 else None


def _count(st: dict) -> str:
    if "processes" not in st:  # a summary written before the process was the unit
        return f"{st['n']} samples"
    reps = st.get("repetitions_range") or [st.get("repetitions"), st.get("repetitions")]
    r = f"{reps[0]}" if reps[0] == reps[1] else f"{reps[0]}-{reps[1]}"
    return f"{st['processes']}×{r}"


def _mismatch_note(items: list[dict]) -> str:
    return "CONFIG DIFFERS: " + "; ".join(f"{m['field']} {m['value']!r} vs {m['reference']!r} ({m['against']})"
                                          for m in items)


def _aa_note(s: dict) -> str | None:
    aa = s.get("aa")
    if not aa:
        return None
    if not aa.get("reference"):
        return f"A/A arm {aa['arm']}: no unshimmed arm to compare with"
    parts = [f"{t} {fmt_ratio(c, 'x')}" for t, c in (aa.get("tests") or {}).items()]
    return (f"A/A ({aa['arm']}: shim active, stock answers) vs {aa['reference']}: "
            + (", ".join(parts) if parts else "no common test")
            + " — the harness's and the shim's own bias")


def _harness_note(s: dict) -> str | None:
    """"the harness is unreliable here: A/A aa tg128 0.97x, interval 0.91-1.05x leaves +-5%" when the
    A/A arm fails the harness check in a test (:func:`capshim.contracts.verdict.harness_check`)."""
    aa = s.get("aa") or {}
    bad = [(t, h) for t, c in (aa.get("tests") or {}).items()
           if (h := harness_check(c)) is not None and not h.reliable]
    if not bad:
        return None
    return f"{UNRELIABLE}: " + "; ".join(f"A/A {aa.get('arm')} {t} {h.value:.2f}x, {h.why}" for t, h in bad)


def _precision_note(s: dict) -> str | None:
    p = s.get("precision")
    if not p:
        return None
    worst = p.get("max_half_width")
    w = f"{worst:.2f}" if isinstance(worst, (int, float)) else "unknown"
    level = p.get("level")
    at = (f"; intervals at {100 * level:g}%, for 95% coverage although the rounds stopped when they looked "
          f"narrow" if isinstance(level, (int, float)) and level != 0.95 else "")
    if p.get("reached"):
        return (f"precision: every interval's half-width <= {p['target']:g} points (widest {w}) after {p['rounds']} "
                f"rounds{at}")
    return (f"precision NOT reached: widest half-width {w} points > {p['target']:g} after {p['rounds']} rounds "
            f"({p.get('stopped_by', 'stopped')}){at}")



def _level(summary: dict) -> str:
    """The level its intervals were computed at, as a column header says it: ``95%``, or ``97%`` under
    the precision loop (``summary["precision"]["level"]``, :data:`capshim.bench.schedule.LEVEL`)."""
    level = (summary.get("precision") or {}).get("level")
    return f"{100 * level:g}%" if isinstance(level, (int, float)) and 0 < level < 1 else "95%"

def table(summaries: list[dict], labels: list[str] | None = None) -> dict:
    """Build the report table of one or more summaries.

    Args:
        summaries: summary dicts (from :func:`capshim.bench.analysis.analyze` or
            :func:`capshim.summary.load`).
        labels: one label per summary (bundle name); when more than one summary
            is given a ``bundle`` column is added.

    Returns:
        ``{"columns": [str], "rows": [{"cells": [str], "marked": bool, "notes":
        [str], "arm", "test", "bundle", "flags": [str] (the arm's), "warnings": [str] (the
        statistics' of this test; ``notes`` is both)}], "notes": [str]}``. Numbers are
        formatted to two decimals (tok/s, ratios ``11.08x [lo–hi]``, percent
        ``98.25% [lo–hi]``); ``marked`` rows are not shim results (their state is
        one of inert, invalid, failed, wrong-output) or compare different configurations.

    Raises:
        KeyError, TypeError: a summary without the shape of the summary schema (one that
            did not come from the analysis or the summary reader); a bundle's finalize
            records it as the report step's failure.
    """
    multi = len(summaries) > 1
    labels = labels or [f"#{i + 1}" for i in range(len(summaries))]
    paths = []
    for s in summaries:
        paths += [a.get("path") or {} for a in s["arms"].values()]
        if s.get("host"):
            paths.append(s["host"].get("path") or {})
    path_cols = [c for c in DISPLAY_COLUMNS if any(display_value(p, c[1], c[2]) for p in paths)]
    columns = (["bundle"] if multi else []) + list(BASE_COLUMNS) + [c[0] for c in path_cols] + ["notes"]
    baselines = {s["baseline"] for s in summaries}
    # "(95% CI)" only when an interval is shown: below 5 processes the cells give "(range a–b)" instead
    has_ci = any((e.get(k) or {}).get("ci95") for s in summaries for a in s["arms"].values()
                 for e in (a.get("tests") or {}).values() for k in ("speedup", "pct_of_host"))
    ci = f" ({'/'.join(sorted({_level(s) for s in summaries}))} CI)" if has_ci else ""
    columns[columns.index("speedup")] = (f"speedup vs {next(iter(baselines))}{ci}"
                                         if len(baselines) == 1 else f"speedup vs baseline{ci}")
    units = {t: m for s in summaries for t in s.get("tests") or [] if (m := other_metric([s], t))}
    common = _common_metric(summaries, units)
    if units:  # one metric for every test: its unit and direction once, in the header
        columns[columns.index("median tok/s")] = "median" if common is None else "median " + _unit_text(common)
    rows = []
    notes = []
    for s, label in zip(summaries, labels):
        tests = list(s.get("tests") or [])
        host = s.get("host")
        order = []
        host_is_arm = bool(host) and host.get("name") in s["arms"]
        for t in tests:
            if host and t in (host.get("tests") or {}) and not host_is_arm:
                order.append(("host", t))
            order += [(a, t) for a in s["arms"] if t in s["arms"][a]["tests"]]
        for arm_name, t in order:
            if arm_name == "host":
                st = host["tests"][t]
                path = host.get("path") or {}
                name = host.get("name") or "host"
                state, speed, pct, flags, marked = "host", "", "100.00%", [], False
                arm_flags, warnings = [], []
                if host.get("source"):
                    flags = arm_flags = [f"measured elsewhere: {Path(host['source']).name}"]
            else:
                arm = s["arms"][arm_name]
                st = arm["tests"][t]
                path = arm.get("path") or {}
                roles = [r for r, on in (("baseline", arm_name == s["baseline"]),
                                         ("host", host_is_arm and arm_name == host.get("name")),
                                         ("A/A", (s.get("aa") or {}).get("arm") == arm_name)) if on]
                name = arm_name + (f" ({', '.join(roles)})" if roles else "")
                state = arm["state"]
                # a baseline off the probed device is no reference (its summary has no speedup): no 1.00x
                speed = (fmt_ratio(st.get("speedup"), "x") if arm_name != s["baseline"]
                         or arm["state"] in OFF_DEVICE_STATES else "1.00x")
                pct = fmt_ratio(st.get("pct_of_host"), "%")
                arm_flags, warnings = _flags(arm), list(st.get("warnings") or [])
                flags = arm_flags + warnings
                marked = state in NOT_SHIM_STATES
                if marked:
                    state = f"{state} (NOT a shim result)"
                if st.get("mismatch"):
                    marked = True
                    flags.insert(0, _mismatch_note(st["mismatch"]))
                    arm_flags.insert(0, flags[0])
            num = (lambda v: f"{v:.4g}") if t in units else (lambda v: f"{v:.2f}")
            cells = ([label] if multi else []) + [
                name, t if common else _test_cell(t, units.get(t), bool(units)), num(st["median"]),
                f"{num(st['min'])}–{num(st['max'])}", _count(st),
                speed, pct, state] + [display_value(path, b, k) for _, b, k in path_cols] + ["; ".join(flags)]
            rows.append({"cells": cells, "marked": marked, "notes": flags, "arm": arm_name, "test": t,
                         "bundle": label, "flags": arm_flags, "warnings": warnings})
        pre = label + ": " if multi else ""
        for extra in (_harness_note(s), _aa_note(s), _precision_note(s)):
            if extra:
                notes.append(pre + extra)
        notes += [pre + n for n in s.get("notes") or []]
        method = s.get("method") or {}
        notes.append(f"{pre}{method.get('statistic', 'medians')}; {_level(s)} CI: {method.get('ci', '?')}; "
                     f"spread: {method.get('spread', '?')}")
    return {"columns": columns, "rows": rows, "notes": notes}
