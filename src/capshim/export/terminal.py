"""The table for a terminal (rich), as ``capshim bench`` and ``capshim report`` print it."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from capshim.export.table import BASE_COLUMNS, NUMERIC_PREFIXES, table

__all__ = ["serialize", "render", "print_table", "COMPACT_BELOW"]

#: Narrower than this many columns, the table is compact (no min–max, no interval on % of host).
COMPACT_BELOW = 170
_SHORT = {"median tok/s": "tok/s", "shared memory": "shmem", "matrix cores": "matrix", "simdgroup red.": "sg red.",
          "simdgroup mm": "sg mm", "% of host": "% host", "processes×reps": "n"}


def render(summaries: list[dict], labels: list[str] | None = None, title: str | None = None,
           width: int | None = None):
    """The table as a :class:`rich.table.Table` (marked rows dimmed red).

    Attested-path and notes columns whose value is the same in every row move
    into the caption (``same in every row: ...``) so the table fits a normal
    terminal; numbers never wrap. Below :data:`COMPACT_BELOW` columns of
    ``width`` the table is compact: no min–max column and no interval on "% of
    host" (both stay in summary.json and report.md).
    """

    tab = table(summaries, labels)
    compact = width is not None and width < COMPACT_BELOW
    fixed = set(BASE_COLUMNS) | {"bundle"}
    cols = tab["columns"]
    keep, same = [], []
    for i, c in enumerate(cols):
        values = {r["cells"][i] for r in tab["rows"]}
        if compact and c == "min–max":
            continue
        if not (c in fixed or c.startswith(("speedup", "median"))) and len(values) <= 1 and tab["rows"]:
            v = next(iter(values))
            if v:
                same.append(f"{c} {v}")
            continue
        keep.append(i)
    t = Table(title=title, show_lines=False)
    for i in keep:
        c = cols[i]
        head = c
        if compact:
            head = "speedup (95% CI)" if c.startswith("speedup") else _SHORT.get(c, c)
        t.add_column(head, justify="right" if c.startswith(NUMERIC_PREFIXES) else "left", overflow="fold",
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


def serialize(summary: dict, title: str | None = None, width: int = 220) -> str:
    """The terminal table of one summary as plain text ``width`` columns wide (no colour)."""

    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=_Null())
    console.print(render([summary], title=title, width=width))
    return console.export_text()


class _Null:
    def write(self, _s):
        return 0

    def flush(self):
        pass


def print_table(summaries: list[dict], labels: list[str] | None = None, title: str | None = None) -> None:
    """Print the table on stdout; off a terminal (a file, a pipe) ``$COLUMNS`` wide
    when that is set to a number, else 220 columns instead of 80."""


    console = Console()
    if not console.is_terminal:
        cols = os.environ.get("COLUMNS", "")
        console = Console(width=int(cols) if cols.isdigit() and int(cols) >= 40 else 220)
    console.print(render(summaries, labels, title=title, width=console.width))
