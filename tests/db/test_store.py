"""The results store on both backends (SQLite file, real PostgreSQL server) with the committed bundles."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from capshim.bench.analysis import analyze
from capshim.contracts import verdict as vd
from capshim.cli import main
from capshim.db import query
from capshim.db.ingest import IngestError, read_bundle
from capshim.db.store import DbError, Store, resolve_url
from tests.conftest import run_capshim
from tests.db.conftest import BUNDLES, EVIDENCE, REPO, distinct_copy

FIXTURE = REPO / "tests" / "fixtures" / "llama-bench" / "cpu-tiny.json"


def _summary(name):
    return json.loads((EVIDENCE / name / "summary.json").read_text())


def _csv_rows(name):
    with open(EVIDENCE / name / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture
def full(db_url):
    """A store holding the three committed bundles."""
    with Store.open(db_url) as st:
        for b in BUNDLES:
            assert st.add(read_bundle(EVIDENCE / b))[1] is True
        yield st


def _cli(*args):
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "300"})


@pytest.mark.slow
def test_add_keeps_every_sample_and_twice_is_a_no_op(full):
    rows = full.select()
    assert [r["name"] for r in rows] == ["h200-tinyllama-r10", "lavapipe-default", "h200-ablation"]  # by start time
    for r in rows:
        stored = [s for s in full.samples([r["id"]]) if s["role"] == "arm"]
        expected = _csv_rows(r["name"])
        assert [(s["arm"], s["run"], s["test"], s["tok_s"]) for s in stored] == \
            [(e["arm"], int(e["run"]), e["test"], float(e["tok_s"])) for e in expected]
        host = [s["tok_s"] for s in full.samples([r["id"]]) if s["role"] == "host" and s["test"] == "pp512"]
        assert host == _summary(r["name"])["host"]["tests"]["pp512"]["samples"]
        assert full.summary(r["id"]) == _summary(r["name"])
    bid, added = full.add(read_bundle(EVIDENCE / "h200-ablation"))
    assert added is False and bid == rows[2]["id"]
    assert len(full.select()) == 3
    assert len(full.samples([bid])) == len(_csv_rows("h200-ablation")) + 12  # 6 host samples per test


@pytest.mark.slow
def test_metadata_is_stored_and_filters_select(full):
    r10 = full.select({"name": "h200-tinyllama-r10"})[0]
    assert (r10["device"], r10["driver"], r10["workload_build"], r10["workload_commit"], r10["model"]) == \
        ("NVIDIA H200", "NVIDIA 580.159.04", "11669", "620d222-dirty", "llama 1B Q4_0")
    assert r10["host"] == "vm" and r10["os"].startswith("Linux-6.18")
    assert r10["config"]["n_gpu_layers"] == 99 and r10["config"]["n_threads"] == 16
    unlocked = next(a for a in r10["arms"] if a["name"] == "vm-unlocked")
    assert unlocked["profile_sha256"].startswith("0db42aeab9eb") and unlocked["simulate_name"] == "vulkan-paravirt"
    names = lambda f, match="exact": [r["name"] for r in full.select(f, match)]  # noqa: E731
    assert names({"device": "NVIDIA H200"}) == ["h200-tinyllama-r10", "h200-ablation"]
    assert names({"device": "h200"}) == []  # exact by default
    assert names({"device": "nvidia"}, "prefix") == names({"device": "*h200"}, "glob") == \
        ["h200-tinyllama-r10", "h200-ablation"]
    assert names({"model": "*F16"}, "glob") == ["lavapipe-default"]
    assert names({"build": "b64739e"}) == names({"build": "9190"}) == ["lavapipe-default"]
    assert names({"profile": "no-coopmat"}) == ["h200-ablation"]
    assert names({"profile": "0e16d96c33c0"}, "prefix") == ["h200-tinyllama-r10", "lavapipe-default",
                                                             "h200-ablation"]
    assert names({"profile": "0e16d96c33c0"}) == []
    assert names({"since": "2026-11-30T02:00:00Z"}) == ["h200-ablation"]
    assert names({"until": "2026-11-29"}) == []
    assert names({"until": "2026-11-30", "device": "llvmpipe*"}, "glob") == ["lavapipe-default"]
    with pytest.raises(DbError, match="since='yesterday': expected a date"):
        full.select({"since": "yesterday"})
    with pytest.raises(DbError, match="unknown"):
        full.select({"colour": "red"})


@pytest.mark.slow
def test_trend_gives_the_numbers_of_the_bundles_summaries(full):
    tr = query.trend(full, "vm-unlocked")
    assert [(p["bundle"], p["test"]) for p in tr["points"]] == [
        ("h200-tinyllama-r10", "pp512"), ("h200-tinyllama-r10", "tg128"),
        ("lavapipe-default", "pp512"), ("lavapipe-default", "tg128")]
    for p in tr["points"]:
        want = _summary(p["bundle"])["arms"]["vm-unlocked"]["tests"][p["test"]]["pct_of_host"]
        assert p["pct_of_host"] == want["value"] and p["ci95"] == want["ci95"]
    assert tr["min_pct"] is None and tr["regressions"] == 0
    tr98 = query.trend(full, "vm-unlocked", min_pct=98)
    assert tr98["all_above"] is False
    assert [(p["bundle"], p["test"]) for p in tr98["points"] if p["flags"]] == [("h200-tinyllama-r10", "tg128")]
    assert query.trend(full, "vm-unlocked", tests=["pp512"], min_pct=98)["all_above"] is True
    with pytest.raises(DbError, match="no stored bundle has it"):
        query.trend(full, "vm-nothing")


@pytest.mark.slow
def test_compare_uses_capshims_analysis_and_matches_the_summaries(full):
    res = query.compare(full, {"name": "h200-tinyllama-r10"}, {"name": "h200-ablation"}, pairs={"vm-stock": "paravirt"})
    rows = {(r["arm"], r["test"]): r for r in res["rows"]}
    assert set(rows) == {("native", "pp512"), ("native", "tg128"), ("vm-stock", "pp512"), ("vm-stock", "tg128")}
    # each side is the bundle's own summary figure (a one-bundle selection is that bundle)
    for (arm, t), r in rows.items():
        a_sum = _summary("h200-tinyllama-r10")["arms"][arm]["tests"][t]
        b_sum = _summary("h200-ablation")["arms"][r["arm_b"]]["tests"][t]
        assert r["a"]["median"] == a_sum["median"] and r["b"]["median"] == b_sum["median"]
        if arm != "native":  # the host arm against itself: 100% (newer analyze gives no interval)
            # both bundles were sealed by the median-and-bootstrap method; the store analyses their samples
            # with today's (docs/statistics.md): each reading lies inside the other's interval
            for side, summ in (("a", a_sum), ("b", b_sum)):
                got, old = r[side]["pct_of_host"], summ["pct_of_host"]
                assert got["ci95"][0] <= old["value"] <= got["ci95"][1]
                assert old["ci95"][0] <= got["value"] <= old["ci95"][1]
    # the change is analyze()'s speedup of B over A on the bundles' own samples
    a = [float(e["tok_s"]) for e in _csv_rows("h200-tinyllama-r10") if e["arm"] == "vm-stock" and e["test"] == "pp512"]
    b = [float(e["tok_s"]) for e in _csv_rows("h200-ablation") if e["arm"] == "paravirt" and e["test"] == "pp512"]
    recs = ([{"arm": "A", "run": i, "test": "pp512", "tok_s": v} for i, v in enumerate(a)]
            + [{"arm": "B", "run": i, "test": "pp512", "tok_s": v} for i, v in enumerate(b)])
    want = analyze(recs, {"A": {}, "B": {}}, "A")["arms"]["B"]["tests"]["pp512"]["speedup"]
    assert rows[("vm-stock", "pp512")]["change"] == want
    # these bundles differ by a few percent; no row claims a direction the one rule does not allow
    assert all(r["verdict"] in ("same", "unclear") for r in res["rows"])
    same = query.compare(full, {"id": "1"}, {"id": "1"})
    assert all(r["change"]["value"] == 1.0 for r in same["rows"])


@pytest.mark.slow
def test_compare_flags_a_real_drop_and_refuses_unlike_configurations(full, db_url):
    res = query.compare(full, {"name": "h200-tinyllama-r10"}, {"name": "h200-ablation"}, pairs={"vm-unlocked": "no-coopmat"},
                        arms=["vm-unlocked"], tests=["pp512"])
    (row,) = res["rows"]
    assert row["verdict"] == "regression" and row["change"]["ci95"][1] < 1 and res["regressions"] == 1
    back = query.compare(full, {"name": "h200-ablation"}, {"name": "h200-tinyllama-r10"}, pairs={"no-coopmat": "vm-unlocked"},
                         arms=["no-coopmat"], tests=["pp512"])
    assert back["rows"][0]["verdict"] == "improvement"
    with pytest.raises(DbError, match=r"model_type: 'llama 1B Q4_0' \(h200-tinyllama-r10\) vs 'llama \?B F16'"):
        query.compare(full, {"name": "h200-tinyllama-r10"}, {"name": "lavapipe-default"})
    marked = query.compare(full, {"name": "h200-tinyllama-r10"}, {"name": "lavapipe-default"}, allow_mismatch=True)
    assert marked["mismatches"] and all(r["marked"] for r in marked["rows"])
    r = _cli("db", "compare", "h200-tinyllama-r10", "h200-ablation", "--pair", "vm-unlocked=no-coopmat", "--arm", "vm-unlocked",
             "--fail-on-regression", "--db", db_url)
    assert r.exit_code == 1 and "regression" in r.output
    r = _cli("db", "compare", "h200-tinyllama-r10", "lavapipe-default", "--db", db_url)
    assert r.exit_code == 2 and "unlike configurations" in r.stderr and "Traceback" not in r.output


@pytest.mark.slow
def test_trend_cli_answers_the_98_percent_question(full, db_url, tmp_path):
    r = _cli("db", "trend", "vm-unlocked", "--min-pct", "98", "--fail-on-regression", "--db", db_url)
    assert r.exit_code == 1 and "did NOT stay above 98%" in r.output
    r = _cli("db", "trend", "vm-unlocked", "--test", "pp512", "--min-pct", "98", "--fail-on-regression",
             "--chart", str(tmp_path / "t.png"), "--db", db_url)
    assert r.exit_code == 0 and "stayed at or above 98%" in r.output
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = _cli("db", "trend", "vm-unlocked", "--device", "NVIDIA H200", "--json", "--db", db_url)
    data = json.loads(r.stdout)
    assert r.exit_code == 0 and {p["bundle"] for p in data["points"]} == {"h200-tinyllama-r10"}


@pytest.mark.slow
def test_a_bundle_that_does_not_verify_is_refused(db_url, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(EVIDENCE / "lavapipe-default", bad)
    s = json.loads((bad / "summary.json").read_text())
    s["arms"]["vm-unlocked"]["tests"]["pp512"]["median"] *= 2
    (bad / "summary.json").write_text(json.dumps(s))
    with pytest.raises(IngestError, match="summary.json: checksum mismatch"):
        read_bundle(bad)
    r = _cli("db", "add", str(EVIDENCE / "h200-ablation"), str(bad), "--db", db_url)
    assert r.exit_code == 2 and f"{bad}: the bundle does not verify, not stored" in r.stderr
    with Store.open(db_url) as st:
        assert [b["name"] for b in st.select()] == ["h200-ablation"]  # the good one is stored
    r = _cli("db", "add", str(tmp_path / "missing"), "--db", db_url)
    assert r.exit_code == 2 and "missing: not a folder" in r.stderr


@pytest.mark.slow
def test_external_llama_bench_files_are_stored_as_arms(db_url):
    raw = EVIDENCE / "h200-tinyllama-r10" / "raw"
    stock = ",".join(str(raw / f"vm-stock-{n}.json") for n in range(1, 4))
    unlocked = ",".join(str(raw / f"vm-unlocked-{n}.json") for n in range(1, 4))
    args = ["db", "add", "--arm", f"stock={stock}", "--arm", f"unlocked={unlocked}",
            "--host", str(raw / "native-1.json"), "--db", db_url, "--json"]
    first = json.loads(_cli(*args).stdout)
    again = json.loads(_cli(*args).stdout)
    assert first[0]["added"] is True and again[0]["added"] is False and first[0]["id"] == again[0]["id"]
    with Store.open(db_url) as st:
        (row,) = st.select()
        assert row["kind"] == "external" and row["device"] == "NVIDIA H200" and row["workload_build"] == "11669"
        assert [a["state"] for a in row["arms"]] == ["external", "external"]
        tr = query.trend(st, "unlocked")
        assert {p["test"] for p in tr["points"]} == {"pp512", "tg128"}


@pytest.mark.slow
def test_bench_adds_its_bundle_with_db(db_url, tmp_path):
    script = tmp_path / "fake-llama-bench"
    script.write_text(f'#!/bin/sh\ncat "{FIXTURE}"\n')
    script.chmod(0o755)
    out = tmp_path / "b"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([sys.executable, "-m", "capshim.cli", "bench", "--arm", "stock=", "-r", "2", "--warmup", "0",
                        "--out", str(out), "--db", db_url, "--", str(script)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "results store: added as #1" in r.stderr
    with Store.open(db_url) as st:
        (row,) = st.select()
        assert row["key"] == read_bundle(out).key
        assert len(st.samples([row["id"]])) == len(list(csv.DictReader(open(out / "results.csv"))))


@pytest.mark.slow
def test_two_writers_at_once_lose_nothing(db_url, tmp_path):
    copies = [distinct_copy(EVIDENCE / "lavapipe-default", tmp_path / f"c{n}", n) for n in range(6)]
    shared = EVIDENCE / "h200-ablation"  # both writers add it: stored once
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    procs = [subprocess.Popen([sys.executable, "-m", "capshim.cli", "db", "add", "--db", db_url, str(shared),
                               *map(str, part)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for part in (copies[:3], copies[3:])]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    with Store.open(db_url) as st:
        rows = st.select()
        assert sorted(r["name"] for r in rows) == sorted(["h200-ablation"] + [c.name for c in copies])
        per = {r["name"]: len(st.samples([r["id"]])) for r in rows}
    assert all(per[c.name] == len(_csv_rows("lavapipe-default")) + 10 for c in copies)


@pytest.mark.slow
def test_schema_is_at_head_and_matches_the_tables(db_url):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from capshim.db import schema

    with Store.open(db_url) as st:
        assert st.revision() == schema.HEAD
        assert st.migrate() == schema.HEAD  # again: a no-op
        with st.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), schema.metadata)
    assert diff == []


@pytest.mark.slow
def test_urls_and_usage_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("CAPSHIM_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_url(None) == f"sqlite:///{tmp_path / 'xdg' / 'capshim' / 'results.sqlite'}"
    monkeypatch.setenv("CAPSHIM_DB", "postgresql://u@/capshim?host=/run/postgresql")
    assert resolve_url(None) == "postgresql+psycopg://u@/capshim?host=/run/postgresql"
    assert resolve_url(str(tmp_path / "x.sqlite")) == f"sqlite:///{tmp_path / 'x.sqlite'}"
    r = _cli("db", "list", "--db", "nosuchdialect://x")
    assert r.exit_code == 2 and "nosuchdialect://x" in r.stderr and "Traceback" not in r.output
    r = _cli("db", "compare", "colour=red", "1", "--db", str(tmp_path / "s.sqlite"))
    assert r.exit_code == 2 and "unknown key 'colour'" in r.stderr
    r = _cli("db", "compare", "1", "2", "--db", str(tmp_path / "s.sqlite"))
    assert r.exit_code == 2 and "selection A id=1: no bundle in the store matches" in r.stderr
    r = _cli("db", "add", "--db", str(tmp_path / "s.sqlite"))
    assert r.exit_code == 2 and "give bundle or study folders" in r.stderr


@pytest.mark.slow
def test_one_command_answers_the_98_percent_question_for_bundle_folders(db_url):
    bundles = [str(EVIDENCE / b) for b in BUNDLES]
    r = _cli("db", "trend", "vm-unlocked", "--min-pct", "98", "--fail-on-regression", "--json", "--db", db_url,
             *bundles)
    res = json.loads(r.stdout)
    assert r.exit_code == 1 and res["all_above"] is False
    assert {(p["bundle"], p["test"]) for p in res["points"] if p["flags"]} == {("h200-tinyllama-r10", "tg128")}
    r = _cli("db", "trend", "vm-unlocked", "--test", "pp512", "--min-pct", "98", "--fail-on-regression",
             "--db", db_url, bundles[2])
    assert r.exit_code == 0 and "lavapipe-default" in r.output and "h200" not in r.output
    with Store.open(db_url) as st:
        assert len(st.select()) == 3  # the folders were added once


@pytest.mark.slow
def test_the_readme_comparisons(db_url):
    with Store.open(db_url) as st:
        for b in ("lavapipe-default", "lavapipe-busy-host", "h200-tinyllama-r10", "h200-ablation"):
            st.add(read_bundle(EVIDENCE / b))
        busy = query.compare(st, {"name": "lavapipe-default"}, {"name": "lavapipe-busy-host"})
        assert {(r["arm"], r["test"]) for r in busy["rows"] if r["verdict"] == "regression"} == \
            {("native", "pp512"), ("vm-stock", "pp512"), ("vm-unlocked", "pp512")}
        assert round(next(r for r in busy["rows"] if r["arm"] == "native" and r["test"] == "pp512")
                     ["change"]["value"], 3) == 0.257
        h200 = query.compare(st, {"name": "h200-tinyllama-r10"}, {"name": "h200-ablation"}, pairs={"vm-stock": "paravirt"})
        assert [round(r["change"]["value"], 3) for r in h200["rows"]] == [1.045, 1.056, 1.016, 1.007]
        assert h200["regressions"] == 0


@pytest.mark.slow
def test_an_older_store_migrates_forward_keeping_its_data(db_url):
    with Store.open(db_url, migrate=False) as st:
        assert st.migrate("0001") == "0001"
        bid, _ = st.add(read_bundle(EVIDENCE / "lavapipe-default"))
    with Store.open(db_url) as st:  # opening moves it to the head revision
        from capshim.db import schema

        assert st.revision() == schema.HEAD != "0001"
        assert [r["name"] for r in st.select()] == ["lavapipe-default"]
        assert query.trend(st, "vm-unlocked")["points"][0]["pct_of_host"] == \
            _summary("lavapipe-default")["arms"]["vm-unlocked"]["tests"]["pp512"]["pct_of_host"]["value"]


@pytest.mark.slow
def test_trend_flags_a_drop_beyond_the_threshold_only_when_its_interval_excludes_the_previous_value(db_url):
    raw = EVIDENCE / "h200-tinyllama-r10" / "raw"
    host = str(EVIDENCE / "h200-tinyllama-r10")  # a bundle as host: several samples, so intervals
    # the same arm name over two stored measurements: first the unlocked runs, later the stock-guest runs
    high = ",".join(str(raw / f"vm-unlocked-{n}.json") for n in (1, 2, 3))
    low = ",".join(str(raw / f"vm-stock-{n}.json") for n in (5, 6, 7))
    for files in (high, low):
        assert _cli("db", "add", "--arm", f"guest={files}", "--host", host, "--db", db_url).exit_code == 0
    with Store.open(db_url) as st:
        tr = query.trend(st, "guest", tests=["pp512"])
        first, second = tr["points"]
        assert first["flags"] == [] and second["pct_of_host"] < first["pct_of_host"] - 50
        assert first["pct_of_host"] == st.summary(first["bundle_id"])["arms"]["guest"]["tests"]["pp512"][
            "pct_of_host"]["value"]
        # three processes a bundle: no 95% interval; a range of 3 processes never flags a direction
        # (issue 28): the drop is noted, with why, and not counted
        assert second["ci95"] is None and second["range"][1] < first["pct_of_host"]
        drop = first["pct_of_host"] - second["pct_of_host"]
        assert second["flags"] == [] and tr["regressions"] == 0
        # (its % of host pairs 3 guest processes with the host bundle read as one process: 1 a side)
        assert second["notes"] == [f"down {drop:.2f} points: unclear (1 process a side; need 5)"]
        wide = query.trend(st, "guest", tests=["pp512"], threshold=drop + 1)
        assert wide["regressions"] == 0 and wide["points"][1]["notes"] == []


@pytest.mark.slow
def test_show_prints_the_stored_report(full, db_url):
    r = _cli("db", "show", "lavapipe-default", "--json", "--db", db_url)
    assert r.exit_code == 0 and json.loads(r.stdout) == _summary("lavapipe-default")
    r = _cli("db", "show", "device=NVIDIA H200", "--db", db_url)
    assert r.exit_code == 0 and "h200-ablation" in r.stdout and "no-coopmat-intdot-fp16" in r.stdout
    r = _cli("db", "list", "--db", db_url)
    from capshim.db import schema
    assert f"(schema {schema.HEAD})" in r.stdout and "3 bundle(s)" in r.stdout


@pytest.mark.slow
def test_bundles_of_unknown_time_list_last_on_both_databases(db_url):
    import dataclasses

    from capshim.db.ingest import read_external

    ext = dataclasses.replace(read_external([("x", [str(FIXTURE)])]), created_utc=None)
    with Store.open(db_url) as st:
        st.add(ext)
        st.add(read_bundle(EVIDENCE / "lavapipe-default"))
        assert [r["name"] for r in st.select()] == ["lavapipe-default", "x"]


def test_compare_keeps_the_process_as_the_unit_like_the_bundle_report(tmp_path):
    # a bundle made with today's method (11 processes x 5 repetitions per arm, geometric means):
    # the stored selection must give the bundle's own % of host and interval
    url = f"sqlite:///{tmp_path / 'p.sqlite'}"
    with Store.open(url) as st:
        st.add(read_bundle(EVIDENCE / "h200-aa-geomean"))
        res = query.compare(st, {"name": "h200-aa-geomean"}, {"name": "h200-aa-geomean"})
    want = _summary("h200-aa-geomean")["arms"]
    for r in res["rows"]:
        if r["arm"] == "native":
            continue
        got, exp = r["b"]["pct_of_host"], want[r["arm"]]["tests"][r["test"]]["pct_of_host"]
        assert (got["value"], got["ci95"]) == (exp["value"], exp["ci95"]), (r["arm"], r["test"])


def test_ablate_and_tune_bundles_are_named_with_their_output_folder():
    assert read_bundle(EVIDENCE / "h200-ablate-tinyllama" / "bench").name == "h200-ablate-tinyllama/bench"
    assert read_bundle(EVIDENCE / "h200-tune-tinyllama" / "confirm").name == "h200-tune-tinyllama/confirm"
    assert read_bundle(EVIDENCE / "h200-tinyllama-aa").name == "h200-tinyllama-aa"


@pytest.mark.slow
@pytest.mark.parametrize("value", ["/dev/null", "file:x?mode=ro", "sqlite:////dev/null", "sqlite:///file:x?uri=true",
                                   "FOLDER"])
@pytest.mark.parametrize("how", ["env", "flag"])
def test_sqlite_path_that_is_not_a_regular_file_is_refused(tmp_path, value, how):
    """CAPSHIM_DB=/dev/null would create /dev/null-journal; file:x?mode=ro a file named file:x."""
    value = str(tmp_path) if value == "FOLDER" else value
    before = set(os.listdir(tmp_path))
    if how == "env":
        r = run_capshim("db", "list", env={"CAPSHIM_DB": value}, cwd=tmp_path, timeout=120)
        name = "CAPSHIM_DB"
    else:
        r = run_capshim("db", "list", "--db", value, cwd=tmp_path, timeout=120)
        name = "--db"
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"capshim: {name} {value}:")
    assert set(os.listdir(tmp_path)) == before
    assert not os.path.exists("/dev/null-journal") or value != "/dev/null"


@pytest.mark.slow
def test_add_refuses_a_host_bundle_that_does_not_verify(tmp_path, db_url):
    import shutil

    host = tmp_path / "host"
    shutil.copytree(EVIDENCE / "h200-tinyllama-r10", host)
    (host / "summary.json").write_text((host / "summary.json").read_text().replace('"median": ', '"median": 9', 1))
    r = _cli("db", "add", "--arm", f"guest={FIXTURE}", "--host", str(host), "--db", db_url)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert f"--host {host}: the bundle does not verify" in r.output and "summary.json: checksum mismatch" in r.output


def test_misspelt_arm_names_in_compare_get_a_suggestion(full):
    """issue 19: the one "did you mean" rule (contracts.suggest) for --pair and --arm of db compare."""
    with pytest.raises(DbError, match=r"arm 'vm-unlocekd' is not in selection A \(did you mean 'vm-unlocked'\?\)"):
        query.compare(full, {"name": "h200-tinyllama-r10"}, {"name": "h200-ablation"},
                      pairs={"vm-unlocekd": "no-coopmat"})
    with pytest.raises(DbError, match=r"--arm vm-stok: not in both selections \(did you mean 'vm-stock'\?\)"):
        query.compare(full, {"name": "h200-tinyllama-r10"}, {"name": "h200-tinyllama-r10"}, arms=["vm-stok"])


@pytest.mark.parametrize("value, bound, n, verdict", [
    (0.97, [0.95, 0.99], 6, "unclear (interval crosses 0.98x)"),  # excludes 1.00x but not the threshold
    (0.96, [0.95, 0.975], 6, "regression"),
    (0.96, [0.95, 0.975], 4, "unclear (4 processes a side; need 5)"),
    (1.03, [1.01, 1.05], 6, "unclear (interval crosses 1.02x)"),
    (1.04, [1.025, 1.05], 6, "improvement"),
    (1.00, [0.99, 1.015], 6, "same"),
    (0.90, None, 6, "unclear (no interval)"),
    (0.90, [0.85, 0.98], 6, "unclear (interval crosses 0.98x)"),  # a bound on the threshold is not past it
])
def test_compare_calls_a_change_only_when_its_whole_interval_is_past_the_threshold(value, bound, n, verdict):
    """db compare's verdict is the one rule's (capshim.contracts.verdict, tested in tests/test_verdict.py)."""
    cmp = {"value": value, "ci95": bound, "processes": [n, n]}
    assert str(vd.decide_cmp(cmp, threshold=2)) == verdict


def test_trend_of_bundles_below_5_processes_flags_a_drop_only_when_its_range_is_below(db_url):
    """Two processes a bundle: no interval. A 2-point drop whose range holds the previous value was
    flagged on the value alone; a drop whose whole range is below it is still flagged."""
    raw, host = EVIDENCE / "h200-tinyllama-r10" / "raw", str(EVIDENCE / "h200-tinyllama-r10")
    for names in (("vm-unlocked-3", "vm-unlocked-9"), ("vm-unlocked-1", "vm-unlocked-2"),
                  ("vm-stock-3", "vm-stock-5")):
        files = ",".join(str(raw / f"{n}.json") for n in names)
        assert _cli("db", "add", "--arm", f"guest={files}", "--host", host, "--db", db_url).exit_code == 0
    with Store.open(db_url) as st:
        pts = query.trend(st, "guest", tests=["pp512"], threshold=0.5)["points"]
    by_med = sorted(pts, key=lambda p: -p["pct_of_host"])
    assert all(p["ci95"] is None and p["range"] for p in pts)
    noise = next(p for p in pts if 99 < p["pct_of_host"] < 101.5)
    stock = by_med[-1]
    assert noise["flags"] == [] and noise["range"][1] > 100
    # two processes a bundle: the drop is noted with why, never flagged as a regression (issue 28)
    assert stock["range"][1] < 100 and stock["flags"] == []
    assert any(n.startswith("down ") and n.endswith(" a side; need 5)") for n in stock["notes"]), stock
    r = _cli("db", "trend", "guest", "--test", "pp512", "--db", db_url)
    assert "range" in r.output


def test_compare_of_a_bundle_with_itself_says_so(tmp_path):
    """`db compare b1 b1`: a table of 1.000x rows with nothing to say why read as a finding."""
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    with Store.open(url) as st:
        st.add(read_bundle(EVIDENCE / "lavapipe-default"))
        assert query.compare(st, {"id": 1}, {"name": "lavapipe-default"})["same_bundles"] is True
    r = _cli("db", "compare", "1", "lavapipe-default", "--db", url)
    assert r.exit_code == 0, r.output
    assert "A and B are the same bundle: each row compares it with itself" in r.output
