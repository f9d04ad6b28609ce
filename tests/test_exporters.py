"""The exporters (capshim.export): golden files for report.md and the terminal table from a fixed
summary, and each format's serialize(summary).

The fixed summary is tests/fixtures/golden/summary.json (made by make_summary.py beside it).
After an intended change of the table, rewrite the golden files with
``CAPSHIM_UPDATE_GOLDEN=1 pytest tests/test_exporters.py`` and review the diff.
"""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from capshim import evidence
from capshim import summary as summary_contract
from capshim.export import chart, markdown, terminal
from capshim.export import csv as csv_export
from tests.conftest import REPO

GOLDEN = REPO / "tests" / "fixtures" / "golden"


@pytest.fixture(scope="module")
def summary() -> dict:
    return summary_contract.load(GOLDEN / "summary.json")


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CAPSHIM_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; see the module docstring"


def test_report_md_golden(summary):
    _golden("report.md", markdown.serialize(summary, title="capshim bench — golden"))


def test_terminal_table_golden(summary):
    _golden("table.txt", terminal.serialize(summary, title="capshim bench — golden", width=220))


def test_the_table_says_what_the_method_needs(summary):
    md = markdown.serialize(summary)
    assert "| 6×3 |" in md  # processes x repetitions per arm
    assert "A/A (aa: shim active, stock answers) vs native: pp512 ngl=0 " in md
    assert "precision NOT reached: widest half-width 2.71 points > 2 after 6 rounds (--max-runs 6 reached)" in md
    assert "no speed effect is expected" in md
    assert "slow first process" in md  # a pyperf-style warning in the row's notes
    assert "1 of 6 runs contaminated (run 2: load 3.1 > 2 cores)" in md
    fitted = terminal.serialize(summary, width=120)  # columns that do not fit go to a second table
    assert "A/A (aa" in fitted and "min–max" in fitted and fitted.count("┏") == 2
    assert max(len(line) for line in fitted.splitlines()) <= 120


def test_csv_json_and_chart_serialize(summary):
    rows = list(csv.DictReader(io.StringIO(csv_export.serialize(summary))))
    assert len(rows) == 8 and rows[0]["arm"] == "native" and rows[0]["test"] == "pp512 ngl=0"
    un = next(r for r in rows if r["arm"] == "vm-unlocked")
    assert float(un["speedup_ci_low"]) < float(un["speedup"]) < float(un["speedup_ci_high"])
    assert un["processes"] == "6" and un["repetitions"] == "3" and un["ci_level"] == "process"
    assert json.loads(evidence.strict_json(summary)) == summary  # summary.json: the bundle's strict JSON
    with pytest.raises(ValueError):
        evidence.strict_json({**summary, "bad": float("nan")})
    png = chart.serialize(summary)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == chart.serialize(summary)  # reproducible bytes


def test_chart_survives_huge_samples(summary):
    big = json.loads(json.dumps(summary))
    st = big["arms"]["native"]["tests"]["pp512 ngl=0"]
    st.update(median=1e308, min=1e308, max=1.7e308)
    assert chart.serialize(big)[:4] == b"\x89PNG"


def test_pipe_table_escapes_what_would_break_a_row():
    from capshim.export.markdown import pipe_table

    text = pipe_table(["arm", "answers"], [["a|b", "x\ny"], [1, None]])
    assert text == "| arm | answers |\n|---|---|\n| a\\|b | x y |\n| 1 | None |\n"
