"""Statistics: descriptive values, bootstrap intervals (reproducible), ratios."""

from __future__ import annotations

import pytest

from capshim.bench import stats


def test_describe_known_values():
    d = stats.describe([10.0, 12.0, 11.0, 13.0, 100.0])
    assert d["n"] == 5 and d["median"] == 12.0 and d["min"] == 10.0 and d["max"] == 100.0
    assert d["q25"] == 11.0 and d["q75"] == 13.0 and d["iqr"] == 2.0
    assert d["spread_pct"] == pytest.approx(750.0)
    assert d["iqr_pct"] == pytest.approx(100 * 2 / 12)
    assert stats.describe([5.0])["stdev"] is None


def test_describe_rejects_empty_and_nan():
    with pytest.raises(ValueError, match="no samples"):
        stats.describe([])
    with pytest.raises(ValueError, match="finite"):
        stats.describe([1.0, float("nan")])


def test_ratio_ci_reproducible_and_brackets_point():
    a = [100.0, 102.0, 98.0, 101.0, 99.0, 103.0]
    b = [50.0, 51.0, 49.0, 50.5, 49.5, 52.0]
    c1 = stats.ratio_ci(a, b)
    c2 = stats.ratio_ci(a, b)
    assert c1 == c2
    point = stats.compare(a, b)["value"]
    assert c1[0] <= point <= c1[1]
    assert 1.8 < c1[0] < c1[1] < 2.2


def test_ratio_ci_needs_two_samples_each():
    assert stats.ratio_ci([1.0], [1.0, 2.0]) is None
    assert stats.compare([4.0], [2.0]) == {"value": 2.0, "ci95": None}


def test_percent():
    r = stats.compare([98.0, 99.0, 100.0], [100.0, 100.0, 100.0], percent=True)
    assert r["value"] == pytest.approx(99.0)
    assert r["ci95"][0] <= 99.0 <= r["ci95"][1]
