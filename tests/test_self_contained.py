"""The suite needs nothing outside the repository (issue 9, item 7): no test reaches beside the clone,
and every fixture folder of copied data says where it came from."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_no_test_reads_outside_the_repository():
    me = Path(__file__).name
    bad = []
    for f in (REPO / "tests").rglob("*.py"):
        if f.name == me:
            continue
        text = f.read_text(encoding="utf-8")
        for needle in ("REPO.parent", "../shared", "/work/shared"):
            if needle in text:
                bad.append(f"{f.relative_to(REPO)}: {needle}")
    assert bad == []


def test_copied_fixture_data_names_its_source():
    for d in (REPO / "tests" / "fixtures").iterdir():
        if d.is_dir() and any(p.suffix in (".json", ".stderr", ".jsonl") for p in d.iterdir()):
            assert (d / "SOURCE.md").is_file() or (d / "README.md").is_file(), d
