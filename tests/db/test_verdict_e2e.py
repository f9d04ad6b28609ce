"""Issue 28 end to end: the same bench run twice and compared is "unclear" or "same", never a
direction; a bundle whose A/A arm is 1.42x (range 0.81-2.19) is called out under db compare's table."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from capshim.cli import main
from capshim.db import query
from capshim.db.ingest import read_bundle
from capshim.db.store import Store
from tests.conftest import run_capshim
from tests.db.conftest import EVIDENCE


def _cli(*args):
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "300"})


def _bench(out, runs: int):
    """A real ``capshim bench`` of one arm (``--metric wall`` of a short sleep; ``runs`` processes)."""
    r = run_capshim("bench", "--metric", "wall", "--arm", "stock=", "-r", str(runs), "--warmup", "0",
                    "--out", str(out), "--", "sh", "-c", "sleep 0.05", timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def twice(tmp_path_factory):
    """The same bench run twice, with 2 processes (the issue's case) and with 5."""
    root = tmp_path_factory.mktemp("twice")
    return {name: _bench(root / name, runs) for name, runs in
            (("two-1", 2), ("two-2", 2), ("five-1", 5), ("five-2", 5))}


@pytest.mark.slow
def test_the_same_bench_twice_is_never_a_direction(twice, tmp_path):
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    with Store.open(url) as st:
        for b in twice.values():
            st.add(read_bundle(b))
        (row,) = query.compare(st, {"name": "two-1"}, {"name": "two-2"})["rows"]
        assert (row["verdict"], row["why"]) == ("unclear", "2 processes a side; need 5")
        (five,) = query.compare(st, {"name": "five-1"}, {"name": "five-2"})["rows"]
        assert five["verdict"] in ("same", "unclear"), five
        # unclear says why: the interval crosses the band, or (a busy machine) a side mostly contaminated
        assert (five["why"] is None) == (five["verdict"] == "same"), five
    r = _cli("db", "compare", "two-1", "two-2", "--fail-on-regression", "--db", url)
    assert r.exit_code == 0, r.output
    assert "unclear (2 processes a side; need 5)" in r.output
    assert "improvement" not in r.output.replace("improvement/regression", "")
    assert "regression" not in r.output.replace("improvement/regression", "").replace("--fail-on-regression", "")
    data = json.loads(_cli("db", "compare", "five-1", "five-2", "--json", "--db", url).output)
    assert [x["verdict"] for x in data["rows"]] in (["same"], ["unclear"]) and data["regressions"] == 0


def test_an_a_a_of_1_42x_is_called_out_under_the_compare_table(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    with Store.open(url) as st:
        st.add(read_bundle(EVIDENCE / "h200-tinyllama-aa"))
    real = Store.summary

    def biased(self, bid):
        s = real(self, bid)
        if s.get("aa"):
            s["aa"]["tests"]["pp512"] = {"value": 1.42, "ci95": None, "range": [0.81, 2.19], "level": "range",
                                         "processes": [2, 2]}
        return s
    monkeypatch.setattr(Store, "summary", biased)
    r = _cli("db", "compare", "h200-tinyllama-aa", "h200-tinyllama-aa", "--test", "pp512", "--db", url)
    assert r.exit_code == 0, r.output
    line = " ".join(r.output.split())
    assert ("the harness is unreliable here: #1 h200-tinyllama-aa: A/A aa pp512 1.42x, range 0.81-2.19x "
            "leaves +-5%") in line
    # the same bundle against itself, 29 processes a side: every ratio 1.00x, never a direction; "same"
    # where the interval lies within +-2% (pp512), else unclear (tg128's intervals are about +-3%)
    with Store.open(url) as st:
        res = query.compare(st, {"name": "h200-tinyllama-aa"}, {"name": "h200-tinyllama-aa"})
    verdicts = {(x["test"], x["verdict"], x["why"]) for x in res["rows"]}
    assert verdicts == {("pp512", "same", None), ("tg128", "unclear", "interval crosses 1.00x")}
