"""Every relative link in README.md and docs/*.md resolves: the file or folder exists
and, for `file.md#anchor`, the anchor is a heading of that file (GitHub's rule for
heading anchors: lower case, punctuation other than '-' and '_' dropped, spaces to '-')."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "evidence").glob("*/README.md"))]

# [text](target) outside code; a target has no spaces (titles are not used here)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading (without the -1, -2 suffixes of repeats)."""
    text = CODE.sub(lambda m: m.group(0).strip("`"), heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = CODE.sub("", text)
    return LINK.findall(text)


def test_slug_follows_github():
    assert slug("H200: tinyllama-1.1b with the A/A arm") == "h200-tinyllama-11b-with-the-aa-arm"
    assert slug("ncnn and `VK_DRIVER_FILES`") == "ncnn-and-vk_driver_files"
    assert slug("The seed's Metal figures, reproduced") == "the-seeds-metal-figures-reproduced"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc: Path):
    bad = []
    for target in links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor}")
        elif not str(dest).startswith(str(REPO)):
            bad.append(f"{target}: outside the repository")
    assert bad == [], f"{doc.relative_to(REPO)}: " + "; ".join(bad)


def test_a_broken_link_is_caught(tmp_path: Path):
    """The check can fail: a missing file and a missing anchor are both found."""
    (tmp_path / "a.md").write_text("# Top\n\n[x](b.md) [y](#nowhere) [z](#top) `[c](d.md)`\n")
    found = [t for t in links(tmp_path / "a.md")]
    assert found == ["b.md", "#nowhere", "#top"]
    assert "nowhere" not in anchors(tmp_path / "a.md") and "top" in anchors(tmp_path / "a.md")


def test_readme_lists_every_doc():
    """The README's table of contents names every page in docs/."""
    listed = {t.partition("#")[0] for t in links(REPO / "README.md")}
    missing = [f"docs/{p.name}" for p in (REPO / "docs").glob("*.md") if f"docs/{p.name}" not in listed]
    assert missing == []


def test_readme_has_a_table_of_contents_of_docs():
    """README.md's "Documentation" section lists every page of docs/, one table row each, and nothing else."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| [docs/")]
    listed = [re.match(r"\| \[docs/([^\]]+)\]\(docs/\1\)", line).group(1) for line in rows]
    assert sorted(listed) == sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert len(listed) == len(set(listed))


def test_every_sealed_evidence_folder_has_a_readme_indexed_in_results():
    """docs/results.md indexes each folder under evidence/ by its README (or the file itself)."""
    index = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    for p in sorted((REPO / "evidence").iterdir()):
        target = f"../evidence/{p.name}/README.md" if p.is_dir() else f"../evidence/{p.name}"
        assert f"]({target})" in index, f"docs/results.md does not index {target}"
        if p.is_dir():
            assert (p / "README.md").is_file(), f"{p.name}: no README.md"


def test_the_index_headlines_are_figures_of_the_folders_tables():
    """Each interval in a headline of docs/results.md's index appears in that folder's README (its generated
    tables or its words), so the index cannot drift from the data."""
    index = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[[^\]]+\]\(\.\./evidence/([^/)]+)/README\.md\) \|.*\| ([^|]*) \|$", index, re.M)
    assert len(rows) >= 16
    for name, headline in rows:
        readme = (REPO / "evidence" / name / "README.md").read_text(encoding="utf-8")
        for figure in re.findall(r"\[[0-9.]+–[0-9.]+\]", headline):
            assert figure in readme, f"{name}: headline figure {figure} is not in its README"
