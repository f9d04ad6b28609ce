"""report.md: the table as GitHub Markdown, with the method notes below it."""

from __future__ import annotations

from capshim.export.table import NUMERIC_PREFIXES, table

__all__ = ["serialize", "render", "pipe_table"]


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def pipe_table(cols: list[str], rows: list[list]) -> str:
    """A GitHub Markdown pipe table: header, ``---`` rule, one line per row (cells as ``str``,
    ``|`` escaped and newlines folded, so a cell never breaks the table); ends with a newline."""
    lines = ["| " + " | ".join(_cell(str(c)) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    return "\n".join(lines + ["| " + " | ".join(_cell(str(c)) for c in r) + " |" for r in rows]) + "\n"


def render(summaries: list[dict], labels: list[str] | None = None, title: str | None = None) -> str:
    """The table of one or more summaries as Markdown (marked rows struck through).

    Raises:
        KeyError, TypeError: a summary of another shape (see :func:`capshim.export.table.table`).
    """
    tab = table(summaries, labels)
    cols = tab["columns"]
    right = {i for i, c in enumerate(cols) if c.startswith(NUMERIC_PREFIXES)}
    out = [f"# {title}", ""] if title else []
    out.append("| " + " | ".join(_cell(c) for c in cols) + " |")
    out.append("|" + "|".join("---:" if i in right else "---" for i in range(len(cols))) + "|")
    for r in tab["rows"]:
        cells = [_cell(c) for c in r["cells"]]
        if r["marked"]:
            cells = [f"~~{c}~~" if c and i != len(cells) - 1 and cols[i] != "state" else c
                     for i, c in enumerate(cells)]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out += [f"- {n}" for n in tab["notes"]]
    out.append("- Rows struck through are not shim results (the shim was inert or invalid, "
               "the runs failed, the output was wrong, or the configuration differs).")
    return "\n".join(out) + "\n"


def serialize(summary: dict, title: str | None = None) -> str:
    """report.md of one summary."""
    return render([summary], title=title)
