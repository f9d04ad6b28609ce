"""The fleet's compatibility matrix as a terminal table, Markdown and HTML (``capshim db matrix``).

Input: the dict of :func:`capshim.db.matrix.matrix` (plain data: this module imports no storage).
One row per shimmed arm and test of a stored bench; the cells are formatted once
(:func:`cells`) and laid out three ways: :func:`terminal_parts` (the shared layout of
:mod:`capshim.export.terminal`: fits the width, ``--wide`` for the full table),
:func:`markdown` (a GitHub pipe table) and :func:`html` (one self-contained page).
Ratios are :func:`capshim.export.table.fmt_ratio`'s: ``98.25% [97.74–98.69]`` with a 95%
interval, ``1.16x (range 1.05–1.33)`` below 5 processes (docs/statistics.md).
"""

from __future__ import annotations

import html as _html

from rich.text import Text

from capshim.contracts.names import escape
from capshim.contracts.numbers import AA_BAND_PCT
from capshim.export import terminal
from capshim.export.markdown import pipe_table
from capshim.export.table import fmt_ratio

__all__ = ["HEADERS", "cells", "notes", "terminal_parts", "markdown", "html"]

#: The columns, in order.
HEADERS = ("device", "host OS", "guest OS", "build", "arm", "test", "% of host (95% CI)",
           "speedup vs baseline", "A/A", "verdict", "bundle")
#: In the terminal's tables (the columns after the combination's four): the key columns
#: (repeated in every table when one is split to fit), arm and test; the columns placed first:
#: verdict, % of host, speedup, bundle.
_KEYS = (0, 1)
_PRIORITY = (5, 2, 3, 6)
#: Verdicts shown in red.
_BAD = ("below host", "unreliable", "no result")


def _aa(aa: dict | None) -> str:
    if aa is None:
        return ""
    return {True: "clean", False: "biased", None: "?"}[aa.get("clean")]


def cells(m: dict) -> list[list[str]]:
    """One list of :data:`HEADERS` cells per row of the matrix ``m`` (unknown values ``?``; text from
    the bundles, which any host of the fleet wrote, with control characters escaped:
    :func:`capshim.contracts.names.escape`)."""
    return [[escape(str(c)) for c in (r["device"] or "?", r["host_os"] or "?", r["guest_os"] or "?",
                                      r["build"] or "?", r["arm"], r["test"])]
            + [fmt_ratio(r["pct_of_host"], "%"), fmt_ratio(r["speedup"], "x"), _aa(r["aa"]),
               r["verdict"] + (f" ({r['why']})" if r.get("why") else ""), f"#{r['bundle_id']}"] for r in m["rows"]]


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in ids)


def notes(m: dict) -> list[str]:
    """The lines under the table: the counts, each bundle's baseline, the A/A column, the rule."""
    out = []
    if m["counts"]:
        out.append("verdicts: " + ", ".join(f"{n} {v}" for v, n in m["counts"].items()))
    base: dict[str, list[int]] = {}
    for r in m["rows"]:
        ids = base.setdefault(escape(str(r["baseline"] or "?")), [])
        if r["bundle_id"] not in ids:
            ids.append(r["bundle_id"])
    if base:
        out.append("speedup: times the bundle's baseline arm (" +
                   "; ".join(f"{b} in {_ids(sorted(ids))}" for b, ids in base.items()) + ")")
    out.append("A/A: the bench's A/A arm (stock answers through the app layer) holds 1.00x within "
               f"+-{AA_BAND_PCT:g}% (clean) or not (biased: the harness is unreliable here); empty: the bench had none")
    if any(r["host_os"] is None for r in m["rows"]):
        out.append("host OS ?: the host baseline came from elsewhere and its bundle is not in the store "
                   "(or several stored bundles on different OSes have its name)")
    return out + [m["rule"]]


def _title(m: dict) -> str:
    return f"compatibility matrix: {len(m['rows'])} rows from {m['bundles']} bundle(s)"


def _group(row: list[str]) -> str:
    """The title of a row's combination: ``NVIDIA H200 · host Linux-6.18.44 · guest Linux-6.18.44 ·
    build 11669``."""
    return f"{row[0]} · host {row[1]} · guest {row[2]} · build {row[3]}"


def terminal_parts(m: dict, limit: int | None) -> list:
    """The matrix laid out for ``limit`` columns (None: the full table) by
    :func:`capshim.export.terminal.grid`: one table per combination (device, host OS, guest OS,
    build: its title), the rows' arm and test repeated when a table is split to fit; print with
    :func:`capshim.export.terminal.emit`."""
    rows = cells(m)
    styles = ["red" if r["verdict"] in _BAD else None for r in m["rows"]]
    heads = HEADERS[4:]
    parts: list = [Text(_title(m), style="bold")]
    for label in dict.fromkeys(_group(r) for r in rows):
        mine = [n for n, r in enumerate(rows) if _group(r) == label]
        parts += terminal.grid(heads, [rows[n][4:] for n in mine], limit, keys=_KEYS, numeric=(2, 3, 6),
                               title=label, styles=[styles[n] for n in mine], priority=_PRIORITY)
    return parts + [Text(n) for n in notes(m)]


def markdown(m: dict) -> str:
    """The matrix as GitHub Markdown: a title, the pipe table, the notes as a list."""
    return f"# {_title(m)}\n\n" + pipe_table(list(HEADERS), cells(m)) + "\n" + "".join(f"- {n}\n" for n in notes(m))


_STYLE = ("body{font-family:sans-serif}table{border-collapse:collapse}"
          "th,td{border:1px solid #bbb;padding:2px 6px}td.n{text-align:right;white-space:nowrap}"
          "tr.bad td{color:#b00}")


def html(m: dict) -> str:
    """The matrix as one self-contained HTML page (UTF-8, every cell escaped; rows whose verdict is
    below host, unreliable or no result in red)."""
    e = _html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in HEADERS)
    body = []
    for r, row in zip(m["rows"], cells(m)):
        tds = "".join(f'<td class="n">{e(c)}</td>' if i in (6, 7, 10) else f"<td>{e(c)}</td>"
                      for i, c in enumerate(row))
        cls = ' class="bad"' if r["verdict"] in _BAD else ""
        body.append(f"<tr{cls}>{tds}</tr>")
    items = "".join(f"<li>{e(n)}</li>" for n in notes(m))
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + e(_title(m)) + "</title><style>"
            + _STYLE + "</style></head><body>\n<h1>" + e(_title(m)) + "</h1>\n<table><thead><tr>" + head
            + "</tr></thead><tbody>\n" + "\n".join(body) + "\n</tbody></table>\n<ul>" + items
            + "</ul>\n</body></html>\n")
