"""The torch-sdpa table at 80 columns (issue 28): one or two tables, not seven; the unit and the
direction once, in the header; what every row repeats said once under the tables."""

from __future__ import annotations

import json

from capshim.export import terminal
from tests.conftest import REPO

BUNDLE = REPO / "evidence" / "h200-torch-sdpa"


def test_torch_sdpa_table_is_at_most_two_tables_at_80_columns():
    s = json.loads((BUNDLE / "summary.json").read_text(encoding="utf-8"))
    text = terminal.to_text(terminal.render([s], title="t", limit=80), 80)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert text.count("┏") <= 2, text
    assert text.count("TFLOP/s") == 1 and text.count("higher is") == 1  # once, in the median's header
    flat = " ".join(text.split())
    assert "test sdpa-8x32x4096x128" in flat and "(native is the baseline and the host)" in flat
    for value in ("657.8", "0.54x [0.53–0.55]", "flash", "8.0", "5×10", "349.8–353.1"):
        assert value in text, value
    wide = terminal.to_text(terminal.render([s], title="t", limit=None), None)
    assert "53.77% [52.80–54.76]" in wide and "% of host" in wide  # the full table keeps every column


def test_mixed_metrics_keep_the_unit_in_each_row():
    s = json.loads((BUNDLE / "summary.json").read_text(encoding="utf-8"))
    test = s["tests"][0]
    s["metrics"]["wall"] = {"unit": "s", "better": "lower", "kind": "wall"}
    s["tests"].append("wall")
    for arm in s["arms"].values():
        arm["tests"]["wall"] = {**arm["tests"][test], "speedup": None, "pct_of_host": None}
    text = terminal.to_text(terminal.render([s], title="t", limit=None), None)
    assert "(TFLOP/s, higher is better)" in text and "wall (s, lower is better)" in text
