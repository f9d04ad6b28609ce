"""Every measured figure in the docs carries the commit it was measured at (issue 28).

A figure is a duration a run took ("took 4 min 27 s", "about 23 s", "47-56 s measured"), a count of
tests ("777 passed", "1,457 tests") or an "about N lines" claim. Each paragraph (or table row) that
states one must carry a source marker, the form docs/timings.md defines:

    (measured at `abc1234`: how)     a run made at that commit (the command, or the script that ran it)
    (as of `abc1234`)                a figure written at that commit and not measured again since

docs/timings.md's rows carry their commit in a column of their own (scripts/measure-timings writes
them). Durations that are settings, not results ("waits up to 120 s", "SIGKILL 10 s later") are not
figures: they follow none of the words below.
"""

from __future__ import annotations

import re

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_DURATION = r"\d[\d,.]*(?:\s?[-–]\s?\d[\d,.]*)?\s?(?:s|seconds?|min|minutes?|h|hours?)\b"
#: What makes a number a measured figure (see the module docstring).
FIGURE = re.compile(
    rf"\b(?:took|takes|take|taking|lasted|measured)\b[^.;:|]{{0,60}}?\b{_DURATION}"  # took 4 min 27 s
    rf"|\babout {_DURATION}"  # about 23 s
    rf"|\b{_DURATION}(?: in all)?,? measured"  # 47-56 s measured
    r"|\b\d[\d,]* (?:passed|tests)\b"  # 777 passed, 1,457 tests
    r"|\babout [\d,]+ lines\b",  # about 20 lines
    re.IGNORECASE)
#: The source marker.
MARKER = re.compile(r"\b(?:measured at|as of) `[0-9a-f]{7,40}`")
_COMMIT_CELL = re.compile(r"\|\s*[0-9a-f]{7,40}\s*\|")


def _paragraphs(text: str):
    """``(line number, text)`` of each paragraph outside code blocks; each table row on its own."""
    block, start, fenced = [], 0, False
    for no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            if block:
                yield start, " ".join(block)
            block = []
            continue
        if fenced:  # program output is not a claim; a comment on a command line is ("# 47-56 s measured")
            if "#" in line:
                yield no, line.split("#", 1)[1]
            continue
        if not line.strip() or line.lstrip().startswith("|"):
            if block:
                yield start, " ".join(block)
            block = []
            if line.strip():
                yield no, line
            continue
        if not block:
            start = no
        block.append(line.strip())
    if block and not fenced:
        yield start, " ".join(block)


def unsourced(text: str) -> list[tuple[int, str]]:
    """``(line, figure)`` for each paragraph of ``text`` that states a figure without a source marker."""
    out = []
    for no, para in _paragraphs(text):
        m = FIGURE.search(para)
        if m and not MARKER.search(para) and not _COMMIT_CELL.search(para):
            out.append((no, m.group(0)))
    return out


def test_every_figure_in_the_docs_names_the_commit_it_was_measured_at():
    missing = [f"{p.relative_to(REPO)}:{no}: {fig!r}" for p in DOCS for no, fig in unsourced(p.read_text())]
    assert not missing, ("figures without a source marker ((measured at `COMMIT`: how) or (as of `COMMIT`), "
                         "docs/timings.md):\n" + "\n".join(missing))


def test_the_rule_finds_figures_and_accepts_markers():
    assert unsourced("The suite took 9 min 0 s on two cores.") == [(1, "took 9 min")]
    assert unsourced("A bench of 777 passed.\n\nThen about 20 lines.")
    assert unsourced("capshim ablate   # 47-56 s measured")
    assert not unsourced("It took 9 min 0 s (measured at `fd37e62`: scripts/measure-timings).")
    assert not unsourced("About 20 lines for the H200 file (as of `0a1db7c`).")
    assert not unsourced("Writers wait up to 120 s; SIGKILL 10 s later.")  # settings, not figures
    assert not unsourced("```\nit took 5 s\n```")  # program output in a code block
    assert unsourced("```\ncapshim ablate   # lavapipe: 47-56 s measured\n```")  # a claim in a command's comment
    assert not unsourced("| 2026-12-01 17:01 | fd37e62 | fast | 1 min 12 s |")  # timings.md's commit column
