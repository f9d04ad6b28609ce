"""Tables for a terminal (rich), as every capshim command prints them, and the one width rule.

The width rule (:func:`width`, used by every command that prints a table):

- ``--wide``: the full table, as wide as it needs (or the terminal's width when
  that is wider); nothing is moved or wrapped;
- stdout is a terminal: the terminal's width (rich reads it, ``$COLUMNS`` first);
- stdout is a file or a pipe: ``$COLUMNS`` when set to a number, else
  :data:`PIPE_WIDTH` (80: what a terminal shows, so ``| less`` reads the same).

Below :data:`MIN_WIDTH` the width is :data:`MIN_WIDTH`.

The layout (:func:`grid`) never splits a number, a word or a name across
lines: a numeric column is as wide as its widest cell; a text column is at
least as wide as its longest word (and :data:`TEXT_MIN`, when its text is that
long), so rich wraps it between words only. The key columns (an arm, a test)
are in every table; the other columns, in their order, go into the first table
they fit in, and a column that fits in none starts another table below (the
same rows, the key columns repeated). Only when the key columns and one column
cannot fit side by side are the rows printed as records (``header: value``
lines). Per-row notes become numbered footnotes (:func:`footnotes`): each note
is said once under the table, the rows carry ``[1]``, ``[1,2]``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from capshim.export.table import BASE_COLUMNS, NUMERIC_PREFIXES, table
from capshim.summary import DISPLAY_COLUMNS

__all__ = ["serialize", "render", "print_table", "width", "grid", "footnotes", "emit", "to_text",
           "print_grid", "print_rows", "print_lines", "PIPE_WIDTH", "MIN_WIDTH", "TEXT_MIN", "PROSE"]

#: Width off a terminal (a file, a pipe) when ``$COLUMNS`` is not set.
PIPE_WIDTH = 80
#: The narrowest layout: a smaller terminal or ``$COLUMNS`` is taken as this.
MIN_WIDTH = 40
#: A text column is at least this wide (or its text's width, when shorter): no one-word-per-line cells.
TEXT_MIN = 12
#: A text column longer than this wraps (between words) before it moves to another table.
PROSE = 30
#: Shorter headers of the report table when it is laid out for a width (not --wide).
_SHORT = {"processes×reps": "procs×reps"}
#: Columns of the table's frame: one border per column, one more, and one space each side of a cell.
_PER_COLUMN = 3


def width(wide: bool = False) -> int | None:
    """The width a table is laid out for (the rule in the module docstring); None with ``wide``
    (as wide as the table needs)."""
    if wide:
        return None
    console = Console()
    if console.is_terminal:
        return max(MIN_WIDTH, console.width)
    cols = os.environ.get("COLUMNS", "").strip()
    return max(MIN_WIDTH, int(cols)) if cols.isdigit() and len(cols) < 6 else PIPE_WIDTH


def footnotes(per_row: Sequence[Sequence[str]]) -> tuple[list[str], list[str]]:
    """``(markers, notes)``: one marker per row (``""``, ``"[1]"``, ``"[1,3]"``) and each distinct
    note once, numbered from 1 in order of first appearance (``"[1] text"``)."""
    numbers: dict[str, int] = {}
    markers = []
    for notes in per_row:
        ids = [numbers.setdefault(n, len(numbers) + 1) for n in dict.fromkeys(notes) if n]
        markers.append("[" + ",".join(map(str, ids)) + "]" if ids else "")
    return markers, [f"[{i}] {n}" for n, i in numbers.items()]


def _lines(s: str) -> list[str]:
    return s.split("\n") or [""]


def _widths(headers: list[str], rows: list[list[str]], numeric: set[int]):
    """Per column ``(natural, minimum, wanted)`` widths in terminal cells: natural (header and
    cells on one line each), the least that splits no word or number, and the width packed with
    (a header may wrap between words; text longer than :data:`PROSE` wraps)."""
    out = []
    for i, h in enumerate(headers):
        cells = [r[i] for r in rows]
        cell_nat = max([cell_len(x) for c in cells for x in _lines(c)] + [1])
        nat = max([cell_nat] + [cell_len(x) for x in _lines(h)])
        head_word = max([cell_len(w) for w in h.split()] + [1])
        if i in numeric:
            low = max(cell_nat, head_word)
            out.append((nat, low, low))
            continue
        word = max([cell_len(w) for c in cells for w in c.split()] + [head_word])
        low = max(word, min(cell_nat, TEXT_MIN))
        out.append((nat, low, max(low, min(cell_nat, PROSE))))
    return out


def _cost(widths: list[int]) -> int:
    return sum(widths) + _PER_COLUMN * len(widths) + 1


def _plan(sizes, keys: list[int], limit: int | None,
          priority: Sequence[int]) -> list[tuple[list[int], list[int]]] | None:
    """The tables: ``[(column indices, widths)]``; None when the key columns and one more cannot fit."""
    n = len(sizes)
    if limit is None:
        return [(list(range(n)), [s[0] for s in sizes])]
    rest = [i for i in dict.fromkeys([*priority, *range(n)]) if i not in keys and 0 <= i < n]
    # text at its wanted width, else wrapped down to its minimum when that needs fewer tables (the
    # key columns stay at their wanted width: a row's name on one line)
    groups = min((_pack(rest, keys, [s[2] if i in keys else s[k] for i, s in enumerate(sizes)], limit)
                  for k in (2, 1)), key=len)
    plans = []
    for g in groups or [[]]:
        cols = sorted(keys + g)
        w = {i: sizes[i][2] for i in cols}
        over = _cost(list(w.values())) - limit
        while over > 0:  # shrink text toward its longest word, the most shrinkable first
            j = max(cols, key=lambda i: w[i] - sizes[i][1])
            if w[j] <= sizes[j][1]:
                return None
            step = min(over, w[j] - sizes[j][1])
            w[j] -= step
            over -= step
        spare = -over
        for i in cols:  # grow toward the natural width, left to right
            add = min(spare, sizes[i][0] - w[i])
            w[i] += add
            spare -= add
        plans.append((cols, [w[i] for i in cols]))
    return plans


def _pack(rest: list[int], keys: list[int], size: list[int], limit: int) -> list[list[int]]:
    """First fit of the columns ``rest`` (in order of priority: the first table holds what matters
    most) into tables that each hold the key columns; widths ``size``."""
    groups: list[list[int]] = []
    for i in rest:
        for g in groups:
            if _cost([size[j] for j in keys + g + [i]]) <= limit:
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


def grid(headers: Sequence[str], rows: Sequence[Sequence[object]], limit: int | None, *,
         keys: Sequence[int] = (0,), numeric: Sequence[int] = (), title: str | None = None,
         styles: Sequence[str | None] | None = None, notes: Sequence[str] = (),
         priority: Sequence[int] = ()) -> list:
    """Lay a table out for ``limit`` columns (None: as wide as it needs) as rich renderables.

    Args:
        headers: column headers; rows: the cells (``str()`` of each; never read as markup).
        limit: the width, from :func:`width`.
        keys: the indices of the columns repeated in every table (the row's name).
        numeric: the indices of right-aligned columns whose cells never wrap (the column is as
            wide as its widest cell; its header wraps between words).
        title: centred above the first table, or a line of its own (wrapped between words at the
            width) when it is wider than that table.
        styles: one rich style (or None) per row; notes: paragraphs printed under the tables.
        priority: the indices of the columns to place first (the first table holds them when
            they fit), then the others in their order; within a table columns keep their order.

    Returns:
        A list for :func:`emit` or :func:`to_text`: one or more tables, or the rows as records
        when the key columns and one more column cannot fit side by side, then the notes.
    """
    heads = [str(h) for h in headers]
    cells = [[str(c) for c in r] for r in rows]
    styles = list(styles) if styles is not None else [None] * len(cells)
    num = set(numeric)
    sizes = _widths(heads, cells, num)
    plans = _plan(sizes, list(keys), limit, priority)
    parts: list = []
    if plans is None:
        parts += [Text(title, style="bold")] if title else []
        for r, style in zip(cells, styles):
            order = [*keys, *(i for i in range(len(heads)) if i not in keys)]
            parts += [Text(f"{'' if n == 0 else '  '}{heads[i]}: {r[i]}", style="bold" if n == 0 else style or "")
                      for n, i in enumerate(order) if r[i] or i in keys]
    else:
        above = bool(title) and max(cell_len(x) for x in _lines(title)) > _cost(plans[0][1])
        parts += [Text(title, style="bold")] if above else []
        for n, (cols, widths) in enumerate(plans):
            t = Table(title=title if n == 0 and not above else None)
            for i, w in zip(cols, widths):
                t.add_column(Text(heads[i]), width=w, overflow="fold",
                             justify="right" if i in num else "left")
            for r, style in zip(cells, styles):
                t.add_row(*(Text(r[i]) for i in cols), style=style)
            parts.append(t)
    return parts + [Text(n) for n in notes]


def _needed(parts: list) -> int:
    probe = Console(width=100_000, file=_Null())
    return max([probe.measure(p).maximum for p in parts if isinstance(p, Table)] + [1])


def _console(limit: int | None, parts: list, **kw) -> Console:
    """The console to print ``parts`` on: ``limit`` wide, or (None) as wide as the widest table
    or the terminal, whichever is wider."""
    if limit is None:
        term = Console()
        limit = max(_needed(parts), term.width if term.is_terminal else PIPE_WIDTH)
    return Console(width=limit, **kw)


def emit(parts: list, limit: int | None) -> None:
    """Print :func:`grid`'s renderables on stdout, ``limit`` columns wide (None: as wide as needed)."""
    console = _console(limit, parts)
    for p in parts:
        console.print(p)


def to_text(parts: list, limit: int | None) -> str:
    """:func:`grid`'s renderables as plain text (no colour), ``limit`` columns wide (None: as wide as needed)."""
    console = _console(limit, parts, record=True, color_system=None, force_terminal=False, file=_Null())
    for p in parts:
        console.print(p)
    return console.export_text()


def print_grid(headers: Sequence[str], rows: Sequence[Sequence[object]], wide: bool = False, **kw) -> None:
    """:func:`grid` at :func:`width` (``wide``: the full table), printed on stdout."""
    limit = width(wide)
    emit(grid(headers, rows, limit, **kw), limit)


def print_lines(lines: Sequence[str], wide: bool = False) -> None:
    """Paragraphs on stdout, each wrapped between words at :func:`width` (``wide``: not wrapped)."""
    parts = [Text(line) for line in lines]
    limit = width(wide)
    emit(parts, limit if limit is not None else max([cell_len(t.plain) for t in parts] + [PIPE_WIDTH]))


def print_rows(rows: Sequence[dict], notes: Sequence[str], title: str, wide: bool = False) -> None:
    """A study's rows (``[{column: value}]``, e.g. ablate's and tune's) and its notes (``- note``)
    on stdout; the first column is the key, columns whose values are all numbers or ratios
    (``0.98x [0.95–1.00]``) never wrap."""
    heads = list(rows[0]) if rows else []
    cells = [[str(v) for v in r.values()] for r in rows]
    numeric = [i for i in range(len(heads)) if cells and all(_numberish(r[i]) for r in cells)]
    print_grid(heads, cells, wide, keys=(0,) if heads else (), numeric=numeric, title=title,
               notes=[f"- {n}" for n in notes])


def _numberish(cell: str) -> bool:
    """A cell that is a number, a ratio or a percentage, with or without its interval (or empty)."""
    head = cell.split(" [")[0].rstrip("x%")
    try:
        float(head)
    except ValueError:
        return cell in ("", "—")
    return True


def render(summaries: list[dict], labels: list[str] | None = None, title: str | None = None,
           limit: int | None = None, lead_path: bool = False) -> list:
    """The report table of summaries as :func:`grid`'s renderables (marked rows dimmed red).

    Path and note columns whose value is the same in every row become one line
    under the table (``same in every row: ...``); each row's notes become
    numbered footnotes (:func:`footnotes`). Numbers never wrap; columns that do
    not fit ``limit`` go to a second table below (None: one table, full width).
    ``lead_path``: the path columns (what the program chose: kernels, features) go into the first
    table, before the figures (a CPU device, where the path is the result and no speed effect is
    expected).
    """
    tab = table(summaries, labels)
    cols = tab["columns"]
    rows = tab["rows"]
    fixed = set(BASE_COLUMNS) | {"bundle"}
    keep, same = [], []
    # fitted to a width: what every row repeats is said once (issue 28: the torch-sdpa table was 7)
    one_test = limit is not None and len({r["test"] for r in rows}) == 1 and len(rows) > 1
    host_is_base = limit is not None and all((s.get("host") or {}).get("name") == s["baseline"] for s in summaries)
    for i, c in enumerate(cols):
        if c == "notes":
            continue
        if (one_test and c == "test") or (host_is_base and c == "% of host"):
            same.append(f"test {rows[0]['test']}" if c == "test" else
                        f"% of host = speedup x 100 ({summaries[0]['baseline']} is the baseline and the host)")
            continue
        values = {r["cells"][i] for r in rows}
        if not (c in fixed or c.startswith(("speedup", "median"))) and len(values) <= 1 and rows:
            v = next(iter(values))
            if v:
                same.append(f"{c} {v}")
            continue
        keep.append(i)
    if lead_path:  # the path columns right after the row's name, and first into the first table
        names = {name for name, _api, _key in DISPLAY_COLUMNS}
        keep = ([i for i in keep if cols[i] in ("bundle", "arm", "test")] + [i for i in keep if cols[i] in names]
                + [i for i in keep if cols[i] not in names and cols[i] not in ("bundle", "arm", "test")])
    markers, notes = footnotes([r["notes"] for r in rows])
    heads = [cols[i] if limit is None else _SHORT.get(cols[i], cols[i]) for i in keep]
    cells = [[r["cells"][i] for i in keep] for r in rows]
    if any(markers):
        heads.append("notes")
        cells = [c + [m] for c, m in zip(cells, markers)]
    numeric = [j for j, i in enumerate(keep) if cols[i].startswith(NUMERIC_PREFIXES)] + (
        [len(keep)] if any(markers) else [])
    below = notes + (["same in every row: " + "; ".join(same)] if same else []) + list(tab["notes"])
    first = [j for j, h in enumerate(heads) if h.startswith(("median", "% of", "speedup")) or h in ("state", "notes")]
    if lead_path:
        first = [j for j, i in enumerate(keep) if cols[i] in names] + first
    styles = ["red dim" if r["marked"] else None for r in rows]
    keys = [heads.index(k) for k in ("bundle", "arm", "test") if k in heads]
    parts = grid(heads, cells, limit, keys=keys, numeric=numeric, title=title, priority=first, styles=styles,
                 notes=below)
    if "bundle" not in heads or limit is None or sum(isinstance(p, Table) for p in parts) == 1:
        return parts
    # several bundles that do not fit side by side: one layout per bundle, titled with its name
    b = heads.index("bundle")
    drop = [h for j, h in enumerate(heads) if j != b]
    fix = [j - (j > b) for j in numeric if j != b]
    prio = [j - (j > b) for j in first if j != b]
    parts = [Text(title, style="bold")] if title else []
    for label in dict.fromkeys(r["bundle"] for r in rows):
        mine = [n for n, r in enumerate(rows) if r["bundle"] == label]
        parts += grid(drop, [[c for j, c in enumerate(cells[n]) if j != b] for n in mine], limit,
                      keys=[k - 1 for k in keys if k != b], numeric=fix, title=label, priority=prio,
                      styles=[styles[n] for n in mine])
    return parts + [Text(n) for n in below]


def serialize(summary: dict, title: str | None = None, width: int | None = PIPE_WIDTH) -> str:
    """The terminal table of one summary as plain text ``width`` columns wide (None: the full
    table), no colour."""
    return to_text(render([summary], title=title, limit=width), width)


class _Null:
    def write(self, _s):
        return 0

    def flush(self):
        pass


def print_table(summaries: list[dict], labels: list[str] | None = None, title: str | None = None,
                wide: bool = False, lead_path: bool = False) -> None:
    """Print the report table on stdout at :func:`width` (``wide``: the full table; ``lead_path``:
    see :func:`render`)."""
    limit = width(wide)
    emit(render(summaries, labels, title=title, limit=limit, lead_path=lead_path), limit)
