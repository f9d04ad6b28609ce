"""The bench's output on a CPU device: the mechanism first, no speed claim (issue 28).

On a CPU device (lavapipe) the answers change which path llama.cpp takes but not its speed, so
the terminal output (:func:`render_cpu`) is, in order:

1. the title;
2. the mechanism: one row per arm with the answers its shims changed (attested by their status
   files, ``arms[NAME]["answers"]``, :mod:`capshim.bench.answers`) and the path the program took
   (attested from its own log, ``arms[NAME]["path"]``, :mod:`capshim.bench.attest`); what every
   arm shares is one line under it;
3. one short line: speed is not the claim here (:data:`SPEED_LINE`);
4. a busy machine, said once (:func:`busy_line`): the load during the runs and how many runs it
   touched, instead of a footnote per arm;
5. the figures, without speedup or % of host columns (they stay in summary.json, report.md and
   results.csv of the bundle); the statistics' warnings (spread, few processes) counted in one
   line, the arms' other flags as footnotes.

Reads only the summary (:mod:`capshim.summary`) and the table model (:mod:`capshim.export.table`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.text import Text

from capshim.export.table import table
from capshim.export.terminal import emit, footnotes, grid, width
from capshim.summary import DISPLAY_COLUMNS, display_value

__all__ = ["render_cpu", "print_cpu", "cpu_notes", "WORKLOAD_HEAD", "ANSWERS_HEAD", "busy_line", "answers_cell", "path_line", "SPEED_LINE", "MECHANISM_HEAD",
           "SPEED_COLUMNS"]

#: The one line, before the figures, that says what a CPU run is not.
SPEED_LINE = "On a CPU device speed is not the claim: the figures show each arm ran."
#: The line over the mechanism table (llama.cpp: the built-in workload and llama-bench).
MECHANISM_HEAD = "Each arm's answers (its shims' records) and the path llama.cpp took (its log):"
#: ... of another workload whose log attested a path (torch-sdpa, ncnn).
WORKLOAD_HEAD = "Each arm's answers (its shims' records) and the path the program took (its log):"
#: ... of a ``--metric`` command: no log to attest a path from, so no path column.
ANSWERS_HEAD = "Each arm's answers (its shims' records):"
#: Columns left out of the CPU figures (ratios: results only on a GPU; the bundle keeps them).
SPEED_COLUMNS = ("speedup", "% of host")
_CONTAMINATED = re.compile(r"^\d+ of \d+ runs contaminated")


def answers_cell(arm: dict) -> str:
    """What one arm answered, as table text: ``maxComputeSharedMemorySize 24576, shaderFloat16 false``;
    ``the device's own (no shim)``; ``the stock values again: ...`` when every answer it changed is
    back at the device's value (a restore profile over a simulation)."""
    answers = arm.get("answers") or {}
    spec = arm.get("spec") or {}
    if not answers:
        if not arm.get("runs") and "runs" in arm:  # nothing attested it: an interrupted or failed arm
            return "not known: no run finished"
        if not (spec.get("profile") or spec.get("simulate")):
            return "the device's own (no shim)"
        if "answers" not in arm:  # a summary written before the answers were recorded
            return "not recorded (a summary of an earlier capshim)"
        return "the device's own (the shim changed nothing)"
    text = ", ".join(f"{k} {v.get('answer')}" for k, v in answers.items())
    if all(v.get("answer") == v.get("stock") for v in answers.values()):
        return f"the device's own again: {text}"
    return text


def _load(run: dict) -> list[float]:
    tel = run.get("telemetry") or {}
    out = []
    for side in ("before", "after"):
        load = (tel.get(side) or {}).get("load")
        if isinstance(load, list) and load and isinstance(load[0], (int, float)):
            out.append(float(load[0]))
    return out


def busy_line(summary: dict) -> str | None:
    """The busy machine in one line, or None when no run was contaminated:
    ``Busy machine: load 2.2-3.9 on 2 cores during the runs; 9 of 9 runs contaminated (kept;
    capshim bench --exclude-contaminated drops them).`` The load is the 1-minute load average before and after
    each run (telemetry); contamination as the bench flagged it (:mod:`capshim.bench.telemetry`)."""
    runs = [r for a in summary["arms"].values() for r in a.get("runs") or [] if isinstance(r, dict)]
    dirty = [r for r in runs if r.get("contaminated")]
    if not dirty:
        return None
    loads = [x for r in runs for x in _load(r)]
    cores = next((((r.get("telemetry") or {}).get("before") or {}).get("cores") for r in runs
                  if ((r.get("telemetry") or {}).get("before") or {}).get("cores")), None)
    load = ""
    if loads:
        lo, hi = min(loads), max(loads)
        load = f"load {lo:.1f}" + (f"-{hi:.1f}" if f"{hi:.1f}" != f"{lo:.1f}" else "")
        load += f" on {cores} cores" if cores else ""
        load += " during the runs; "
    excluded = sum(1 for r in dirty if r.get("excluded"))
    return (f"Busy machine: {load}{len(dirty)} of {len(runs)} runs contaminated "
            + (f"({excluded} excluded)." if excluded else "(kept; capshim bench --exclude-contaminated drops them)."))


def _mechanism(summary: dict, limit: int | None) -> list:
    arms = summary["arms"]
    cols = [c for c in DISPLAY_COLUMNS if any(display_value(a.get("path") or {}, c[1], c[2]) for a in arms.values())]
    values = {c: [display_value(a.get("path") or {}, c[1], c[2]) for a in arms.values()] for c in cols}
    differ = [c for c in cols if len(set(values[c])) > 1]
    same = [f"{c[0]} {values[c][0]}" for c in cols if c not in differ and values[c][0]]
    rows = [[name, answers_cell(arm)] + [display_value(arm.get("path") or {}, c[1], c[2]) for c in differ]
            for name, arm in arms.items()]
    heads = ["arm", "answers"] + [c[0] for c in differ]
    # llama.cpp's tests are tok/s; another kind is a --metric command or a workload measured through one
    metric = any(isinstance(m, dict) and m.get("kind") not in (None, "tok/s")
                 for m in (summary.get("metrics") or {}).values())
    head = WORKLOAD_HEAD if metric else MECHANISM_HEAD
    if not cols and metric:  # nothing attested a path, and nothing was expected to
        head = ANSWERS_HEAD
    elif not cols:  # llama.cpp logs its path: say that this one's log did not
        heads.append("path")
        rows = [r + ["not attested"] for r in rows]
    notes = ["same in every arm: " + "; ".join(same)] if same else []
    line = path_line(summary)
    return [Text(head)] + grid(heads, rows, limit, keys=(0,), notes=notes) + ([Text(line)] if line else [])


def path_line(summary: dict) -> str | None:
    """What the answers did to the path, in one sentence, against the first arm without a shim:
    ``Against native's path: vm-stock took another, vm-unlocked the same.``; None without an
    unshimmed arm or an attested path."""
    arms = summary["arms"]
    ref = next((n for n, a in arms.items() if not ((a.get("spec") or {}).get("profile")
                                                   or (a.get("spec") or {}).get("simulate"))), None)
    if ref is None or not arms[ref].get("path"):
        return None
    cols = [c for c in DISPLAY_COLUMNS if c[0] not in ("Vulkan device", "CUDA device")]
    key = lambda a: [display_value(a.get("path") or {}, c[1], c[2]) for c in cols]  # noqa: E731
    said = []
    for name, arm in arms.items():
        if name == ref or not arm.get("path"):
            continue
        said.append(f"{name} {'the same' if key(arm) == key(arms[ref]) else 'took another'}")
    return (f"Against {ref}'s path: " + ", ".join(said) + ".") if said else None


def render_cpu(summary: dict, title: str | None = None, limit: int | None = None,
               skip_notes: Sequence[str] = ()) -> list:
    """The CPU-device output of one bench summary as rich renderables (the module docstring).

    Args:
        summary: the bench's summary (summary.json).
        title: the title line.
        limit: the width (:func:`capshim.export.terminal.width`; None: as wide as needed).
        skip_notes: summary notes not repeated (the plan's CPU note, said by :data:`SPEED_LINE`).

    Returns:
        A list for :func:`capshim.export.terminal.emit`.
    """
    parts: list = [Text(title, style="bold")] if title else []
    parts += _mechanism(summary, limit)
    idle = [name for name, arm in summary["arms"].items() if "runs" in arm and not arm.get("runs")]
    parts.append(Text(SPEED_LINE if not idle else
                      f"On a CPU device speed is not the claim; no run of {', '.join(idle)} finished "
                      "(the figures show the arms that ran).", style="bold"))
    busy = busy_line(summary)
    if busy:
        parts.append(Text(busy))
    tab = table([summary])
    if not tab["rows"]:
        return parts + [Text("No figures: no run finished.")]
    path_names = {c[0] for c in DISPLAY_COLUMNS}
    keep = [i for i, c in enumerate(tab["columns"])
            if not c.startswith(SPEED_COLUMNS) and c not in path_names and c != "notes"]
    flags = [[f for f in r["flags"] if not _CONTAMINATED.match(f)] for r in tab["rows"]]
    markers, notes = footnotes(flags)
    heads = [tab["columns"][i] for i in keep] + (["notes"] if any(markers) else [])
    heads = ["procs×reps" if h == "processes×reps" else h for h in heads]
    cells = [[r["cells"][i] for i in keep] + ([m] if any(markers) else []) for r, m in zip(tab["rows"], markers)]
    aa = (summary.get("aa") or {}).get("arm")
    for r, c in zip(tab["rows"], cells):  # no baseline or host role: no ratio is shown here
        c[heads.index("arm")] = r["arm"] + (" (A/A)" if r["arm"] == aa else "")
    numeric = [j for j, h in enumerate(heads) if h.startswith(("median", "min", "procs")) or h == "notes"]
    warned = sum(len(r["warnings"]) for r in tab["rows"])
    if warned:
        notes.append(f"{warned} warnings on the spread of these figures are in summary.json (no speed is claimed "
                     "from them)")
    skip = set(skip_notes)
    # the last is the method (in summary.json); a legend of the speedup column is not said without the column
    notes += [n for n in tab["notes"][:-1] if n not in skip and "speedup = " not in n]
    styles = ["red dim" if r["marked"] else None for r in tab["rows"]]
    keys = [heads.index(k) for k in ("arm", "test") if k in heads]
    return parts + grid(heads, cells, limit, keys=keys, numeric=numeric, styles=styles, notes=notes)


def cpu_notes(summary: dict, device: dict | None) -> list[str]:
    """The notes of a summary that say its device is a CPU device (the bench plan's note,
    :data:`capshim.bench.plan.CPU_NOTE`: ``"<device name> is a CPU device: ..."``): what the bench said
    on stderr before its runs and :data:`SPEED_LINE` says again, so :func:`render_cpu` skips them."""
    name = (device or {}).get("name")
    return [n for n in summary.get("notes") or [] if name and isinstance(n, str)
            and n.startswith(f"{name} is a CPU device")]


def print_cpu(summary: dict, title: str | None = None, wide: bool = False, skip_notes: Sequence[str] = ()) -> None:
    """Print :func:`render_cpu` on stdout at :func:`capshim.export.terminal.width` (``wide``: as wide as needed)."""
    limit = width(wide)
    emit(render_cpu(summary, title, limit, skip_notes), limit)
