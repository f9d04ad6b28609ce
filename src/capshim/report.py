"""``capshim report``: read summaries (shape-checked) or raw llama-bench files, and present them.

The analysis lives in :mod:`capshim.bench.analysis` (``analyze`` and
``host_from_file`` are re-exported here), the table model and its renderings
in :mod:`capshim.export` (Markdown, terminal, CSV, JSON, chart); this module
reads inputs and adds the HTML page. The finalize steps of a bench bundle are the
bench's (:func:`capshim.bench.summarize.steps`; ``bundle_steps`` is re-exported here).
"""

from __future__ import annotations

import html
from pathlib import Path

from capshim.contracts import output
from capshim.bench.analysis import (  # noqa: F401 (re-export)
    AnalysisError,
    analyze,
    arms_from_files,
    host_from_file,
)
from capshim.bench.summarize import bundle_steps  # noqa: F401 (re-export)
from capshim.export import chart as _chart
from capshim.export import markdown as _markdown
from capshim.export import terminal as _terminal
from capshim.export.table import table  # noqa: F401 (re-export)

__all__ = ["analyze", "host_from_file", "table", "render_markdown",
           "render_html", "draw_chart", "report_from_files", "print_table", "bundle_steps"]


print_table = _terminal.print_table
render_markdown = _markdown.render


def draw_chart(summaries: list[dict], path: str | Path, labels: list[str] | None = None,
               title: str | None = None, **rule) -> Path:
    """Write the chart of one or more summaries (:func:`capshim.export.chart.png`) as a PNG at ``path``.

    Written by the output rule (:func:`capshim.contracts.output.write_file`; ``rule``: its
    keywords, ``flag``, ``replace``, ``inputs`` ...): new or replaced only when asked, never
    through a link or into a FIFO or device, whole or not at all.

    Returns:
        ``Path(path)``.

    Raises:
        UsageError: (exit 2) the rule refuses ``path``.
        CapshimError: (exit 4) the write failed (a full disk), naming the file; nothing partial is left.
    """
    return output.write_file(path, _chart.png(summaries, labels, title), **rule)


def render_html(summaries: list[dict], labels: list[str] | None = None, title: str | None = None,
                chart: str | None = None) -> str:
    """The table as a standalone HTML page (every cell escaped); ``chart`` is an image path to embed by reference.

    Raises:
        KeyError, TypeError: a summary of another shape (see :func:`capshim.export.table.table`).
    """
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


def report_from_files(arm_specs: list[tuple[str, list[str]]], host: str | None = None,
                      baseline: str | None = None, allow_mismatch: bool = False) -> dict:
    """Analyse llama-bench files made elsewhere (``capshim report --arm``).

    Args:
        arm_specs: ``[(arm name, [llama-bench json file, ...]), ...]`` in display order.
        host: a llama-bench file or bundle folder measured on the host, or None.
        baseline: the baseline arm (default: the first).
        allow_mismatch: compare files measured with different configurations, marking the rows.

    Returns:
        The summary dict (see :func:`capshim.bench.analysis.analyze`).

    Raises:
        AnalysisError / LlamaBenchError naming the file or arm; ComparabilityError naming the
            field and both values when configurations differ (unless ``allow_mismatch``).
    """
    if not arm_specs:
        raise AnalysisError("no --arm given")
    records, arms = arms_from_files(arm_specs)
    base = baseline or arm_specs[0][0]
    return analyze(records, arms, base, host_from_file(host) if host else None, allow_mismatch=allow_mismatch)
