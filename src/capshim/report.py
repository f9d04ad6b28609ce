"""Tables and charts of benchmark summaries (the seed-style table).

One row per arm and test (plus the host baseline when there is one): median
tok/s, min–max, speedup vs the baseline arm with its 95% bootstrap interval,
% of host, the arm's state, and the path llama.cpp attested (GPU family,
simdgroup matrix multiply, fp16, shared memory, matrix cores ...). Rendered
with rich for the terminal, as Markdown (``report.md``), or as HTML; the chart
is drawn with matplotlib's Agg backend.

The analysis itself lives in :mod:`capshim.bench.analysis`; ``analyze`` and
``host_from_file`` are re-exported here.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from capshim.bench.analysis import (AnalysisError, analyze, arms_from_files,  # noqa: F401 (re-export)
                                    host_from_file, NOT_SHIM_STATES)
from capshim.bench.attest import DISPLAY_COLUMNS, display_value

__all__ = ["analyze", "host_from_file", "load_summary", "table", "render_rich", "render_markdown",
           "render_html", "draw_chart", "report_from_files"]

_BASE_COLUMNS = ["arm", "test", "median tok/s", "min–max", "speedup", "% of host", "state"]


def load_summary(bundle: str | Path) -> dict:
    """Read ``summary.json`` of a bundle folder (or a summary file itself).

    Raises:
        AnalysisError: missing file, invalid JSON, or not a capshim summary;
            names the file.
    """
    p = Path(bundle)
    f = p / "summary.json" if p.is_dir() else p
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AnalysisError(f"{f}: cannot read summary: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise AnalysisError(f"{f}: invalid JSON: {exc}") from None
    if not isinstance(data, dict) or "arms" not in data or "baseline" not in data:
        raise AnalysisError(f"{f}: not a capshim summary (keys 'arms' and 'baseline' expected)")
    return data


def _fmt_ratio(cmp: dict | None, unit: str) -> str:
    if not cmp:
        return ""
    if unit == "x":
        s = f"{cmp['value']:.2f}x"
        if cmp.get("ci95"):
            s += f" [{cmp['ci95'][0]:.2f}–{cmp['ci95'][1]:.2f}]"
        return s
    s = f"{cmp['value']:.2f}%"
    if cmp.get("ci95"):
        s += f" [{cmp['ci95'][0]:.2f}–{cmp['ci95'][1]:.2f}]"
    return s


def table(summaries: list[dict], labels: list[str] | None = None) -> dict:
    """Build the report table of one or more summaries.

    Args:
        summaries: summary dicts (from :func:`analyze` or :func:`load_summary`).
        labels: one label per summary (bundle name); when more than one summary
            is given a ``bundle`` column is added.

    Returns:
        ``{"columns": [str], "rows": [{"cells": [str], "marked": bool, "notes":
        [str], "arm", "test", "bundle"}], "notes": [str]}``. Numbers are
        formatted to two decimals (tok/s, ratios ``11.08x [lo–hi]``, percent
        ``98.25% [lo–hi]``); ``marked`` rows are not shim results (their state is
        one of inert, invalid, failed, wrong-output).
    """
    multi = len(summaries) > 1
    labels = labels or [f"#{i + 1}" for i in range(len(summaries))]
    # which attested-path columns have a value anywhere
    paths = []
    for s in summaries:
        paths += [a.get("path") or {} for a in s["arms"].values()]
        if s.get("host"):
            paths.append(s["host"].get("path") or {})
    path_cols = [c for c in DISPLAY_COLUMNS if any(display_value(p, c[1], c[2]) for p in paths)]
    columns = (["bundle"] if multi else []) + list(_BASE_COLUMNS) + [c[0] for c in path_cols] + ["notes"]
    baselines = {s["baseline"] for s in summaries}
    columns[columns.index("speedup")] = (f"speedup vs {next(iter(baselines))} (95% CI)"
                                         if len(baselines) == 1 else "speedup vs baseline (95% CI)")
    # Other metrics than llama-bench tok/s (capshim.bench.metrics): the unit goes with each test.
    units = {t: m for s in summaries for t, m in (s.get("metrics") or {}).items() if m.get("kind") != "tok/s"}
    if units:
        columns[columns.index("median tok/s")] = "median"
    rows = []
    notes = []
    for s, label in zip(summaries, labels):
        tests = list(s.get("tests") or [])
        host = s.get("host")
        order = []
        # A host that is an arm of this bench (capshim bench's "native") is shown once, as that arm.
        host_is_arm = bool(host) and host.get("name") in s["arms"]
        for t in tests:
            if host and t in host["tests"] and not host_is_arm:
                order.append(("host", t))
            order += [(a, t) for a in s["arms"] if t in s["arms"][a]["tests"]]
        for arm_name, t in order:
            if arm_name == "host":
                st = host["tests"][t]
                path = host.get("path") or {}
                name = host.get("name") or "host"
                state, speed, pct, flags, marked = "host", "", "100.00%", [], False
                if host.get("source"):
                    flags = [f"measured elsewhere: {Path(host['source']).name}"]
            else:
                arm = s["arms"][arm_name]
                st = arm["tests"][t]
                path = arm.get("path") or {}
                roles = [r for r, on in (("baseline", arm_name == s["baseline"]),
                                         ("host", host_is_arm and arm_name == host.get("name"))) if on]
                name = arm_name + (f" ({', '.join(roles)})" if roles else "")
                state = arm["state"]
                speed = _fmt_ratio(st.get("speedup"), "x") if arm_name != s["baseline"] else "1.00x"
                pct = _fmt_ratio(st.get("pct_of_host"), "%")
                flags = list(arm.get("flags") or [])
                marked = state in NOT_SHIM_STATES
                if marked:
                    state = f"{state} (NOT a shim result)"
            num = (lambda v: f"{v:.4g}") if t in units else (lambda v: f"{v:.2f}")
            tcell = f"{t} ({units[t]['unit'] + ', ' if units[t]['unit'] else ''}{units[t]['better']} is better)" \
                if t in units else (f"{t} (tok/s)" if units else t)
            cells = ([label] if multi else []) + [
                name, tcell, num(st['median']), f"{num(st['min'])}–{num(st['max'])}",
                speed, pct, state] + [display_value(path, b, k) for _, b, k in path_cols] + ["; ".join(flags)]
            rows.append({"cells": cells, "marked": marked, "notes": flags, "arm": arm_name, "test": t,
                         "bundle": label})
        n = {a: max((v["n"] for v in s["arms"][a]["tests"].values()), default=0) for a in s["arms"]}
        notes.append(f"{label + ': ' if multi else ''}medians of per-repetition samples "
                     f"(samples per arm and test: {', '.join(f'{a} {k}' for a, k in n.items())}); "
                     f"95% CI: {s['method']['ci']}; spread: {s['method']['spread']}")
        notes += [f"{label + ': ' if multi else ''}{note}" for note in s.get("notes") or []]
    return {"columns": columns, "rows": rows, "notes": notes}


def print_table(summaries: list[dict], labels: list[str] | None = None, title: str | None = None) -> None:
    """Print the table on stdout; off a terminal (a file, a pipe) 220 columns wide instead of 80."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=220)
    console.print(render_rich(summaries, labels, title=title, width=console.width))


def render_rich(summaries: list[dict], labels: list[str] | None = None, title: str | None = None,
                width: int | None = None):
    """The table as a :class:`rich.table.Table` (marked rows dimmed red).

    For the terminal, attested-path and notes columns whose value is the same
    in every row are moved into the caption (``same in every row: ...``) so the
    table fits a normal terminal; numbers never wrap. Markdown and HTML keep
    every column. Below 170 columns of ``width`` the table is compact: no
    min–max column and no interval on "% of host" (both stay in summary.json
    and report.md).
    """
    from rich.table import Table

    tab = table(summaries, labels)
    compact = width is not None and width < 170
    fixed = set(_BASE_COLUMNS) | {"bundle"}
    cols = tab["columns"]
    keep, same = [], []
    for i, c in enumerate(cols):
        values = {r["cells"][i] for r in tab["rows"]}
        is_base = c in fixed or c.startswith(("speedup", "median"))
        if compact and c == "min–max":
            continue
        if not is_base and len(values) <= 1 and tab["rows"]:
            v = next(iter(values))
            if v:
                same.append(f"{c} {v}")
            continue
        keep.append(i)
    t = Table(title=title, show_lines=False)
    short = {"median tok/s": "tok/s", "shared memory": "shmem", "matrix cores": "matrix", "simdgroup red.": "sg red.",
             "simdgroup mm": "sg mm", "% of host": "% host"}
    for i in keep:
        c = cols[i]
        numeric = c.startswith(("median", "speedup", "% of", "min"))
        head = c
        if compact:
            head = "speedup (95% CI)" if c.startswith("speedup") else short.get(c, c)
        t.add_column(head, justify="right" if numeric else "left", overflow="fold",
                     no_wrap=compact and c in ("arm", "test"))
    for r in tab["rows"]:
        cells = [r["cells"][i] for i in keep]
        if compact:
            cells = [c.split(" [")[0] if cols[i] == "% of host" else c for i, c in zip(keep, cells)]
        t.add_row(*cells, style="red dim" if r["marked"] else None)
    caption = list(tab["notes"])
    if compact:
        caption.insert(0, next((c for c in cols if c.startswith("speedup")), ""))
    if same:
        caption.insert(0, "same in every row: " + "; ".join(same))
    t.caption = "\n".join(caption)
    return t


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(summaries: list[dict], labels: list[str] | None = None, title: str | None = None) -> str:
    """The table as GitHub Markdown (report.md), with the method notes below it."""
    tab = table(summaries, labels)
    cols = tab["columns"]
    right = {i for i, c in enumerate(cols) if c.startswith(("median", "speedup", "% of", "min"))}
    out = [f"# {title}", ""] if title else []
    out.append("| " + " | ".join(_md_cell(c) for c in cols) + " |")
    out.append("|" + "|".join("---:" if i in right else "---" for i in range(len(cols))) + "|")
    for r in tab["rows"]:
        cells = [_md_cell(c) for c in r["cells"]]
        if r["marked"]:
            cells = [f"~~{c}~~" if c and i not in (len(cells) - 1,) and cols[i] not in ("state",) else c
                     for i, c in enumerate(cells)]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out += [f"- {n}" for n in tab["notes"]]
    out.append("- Rows struck through are not shim results (the shim was inert or invalid, "
               "the runs failed, or the output was wrong).")
    return "\n".join(out) + "\n"


def render_html(summaries: list[dict], labels: list[str] | None = None, title: str | None = None,
                chart: str | None = None) -> str:
    """The table as a standalone HTML page; ``chart`` is an image path to embed by reference."""
    tab = table(summaries, labels)
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in tab["columns"])
    body = []
    for r in tab["rows"]:
        cls = ' class="marked"' if r["marked"] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{e(c)}</td>" for c in r["cells"]) + "</tr>")
    notes = "".join(f"<li>{e(n)}</li>" for n in tab["notes"])
    img = f'<p><img src="{e(chart)}" alt="chart"></p>' if chart else ""
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{e(title or 'capshim report')}</title><style>"
            "body{font-family:sans-serif}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
            "td:nth-child(-n+2){text-align:left}tr.marked{color:#a00;text-decoration:line-through}"
            f"</style></head><body><h1>{e(title or 'capshim report')}</h1>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<ul>{notes}</ul>{img}</body></html>\n")


def draw_chart(summaries: list[dict], path: str | Path, labels: list[str] | None = None,
               title: str | None = None) -> Path:
    """Draw grouped bars of median tok/s per test (one panel per test), min–max whiskers.

    Bars of arms that are not shim results are hatched and grey; the speedup vs
    the baseline is written above each bar. Writes a PNG at ``path``.

    Returns:
        ``Path(path)``.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    tab_tests: list[str] = []
    for s in summaries:
        for t in s.get("tests") or []:
            if t not in tab_tests:
                tab_tests.append(t)
    labels = labels or [f"#{i + 1}" for i in range(len(summaries))]
    multi = len(summaries) > 1
    n = max(1, len(tab_tests))
    fig, axes = plt.subplots(1, n, figsize=(max(5.0, 4.2 * n), 4.2), squeeze=False)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, t in zip(axes[0], tab_tests):
        # other metrics than tok/s (capshim.bench.metrics) carry their unit and direction
        unit = next((m for s in summaries for tt, m in (s.get("metrics") or {}).items()
                     if tt == t and m.get("kind") != "tok/s"), None)
        bars = []
        for s, label in zip(summaries, labels):
            pre = f"{label}:" if multi else ""
            host = s.get("host")
            if host and t in host["tests"] and host.get("name") not in s["arms"]:
                bars.append((pre + (host.get("name") or "host"), host["tests"][t], None, False))
            for a, arm in s["arms"].items():
                if t in arm["tests"]:
                    st = arm["tests"][t]
                    sp = st.get("speedup") if a != s["baseline"] else None
                    bars.append((pre + a, st, sp, arm["state"] in NOT_SHIM_STATES))
        for i, (name, st, sp, marked) in enumerate(bars):
            color = "#bbbbbb" if marked else palette[i % len(palette)]
            ax.bar(i, st["median"], color=color, hatch="//" if marked else None, edgecolor="black",
                   linewidth=0.5, yerr=[[st["median"] - st["min"]], [st["max"] - st["median"]]], capsize=4)
            txt = (f"{st['median']:.4g}" if unit else f"{st['median']:.1f}") + (f"\n{sp['value']:.2f}x" if sp else "")
            ax.annotate(txt, (i, st["max"]), textcoords="offset points", xytext=(0, 3),
                        ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(bars)), [b[0] for b in bars], rotation=30, ha="right", fontsize=8)
        ax.set_title(t)
        ax.set_ylabel(f"{unit['unit'] or 'value'} (median, min–max; {unit['better']} is better)" if unit
                      else "tok/s (median, min–max)")
        ax.margins(y=0.2)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return out


def report_from_files(arm_specs: list[tuple[str, list[str]]], host: str | None = None,
                      baseline: str | None = None) -> dict:
    """Analyse llama-bench files made elsewhere (``capshim report --arm``).

    Args:
        arm_specs: ``[(arm name, [llama-bench json file, ...]), ...]`` in display order.
        host: a llama-bench file or bundle folder measured on the host, or None.
        baseline: the baseline arm (default: the first).

    Returns:
        The summary dict (see :func:`capshim.bench.analysis.analyze`).

    Raises:
        AnalysisError / LlamaBenchError naming the file or arm.
    """
    if not arm_specs:
        raise AnalysisError("no --arm given")
    records, arms = arms_from_files(arm_specs)
    base = baseline or arm_specs[0][0]
    return analyze(records, arms, base, host_from_file(host) if host else None)
