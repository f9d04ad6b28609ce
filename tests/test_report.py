"""Analysis and reports: the seed's published figures reproduced exactly, flags, CLI."""

from __future__ import annotations

import json

import pytest

from click.testing import CliRunner

from tests._report_paths import FIXTURES, cua_dir
from capshim import report
from capshim.bench.analysis import AnalysisError, ComparabilityError, analyze, host_from_file
from capshim.cli import main

# (model folder, file prefix) -> published figures (docs/contracts.md, "Published figures")
PUBLISHED = {
    ("2026-08-09-m1-ultra", "tiny", "tiny-host-minimal", "tiny-stock-minimal", "tiny-safe-shim-10x-final"): {
        "pp512": ("4871.99", "431.86", "4786.70", "11.08x", "98.25%"),
        "tg128": ("286.71", "12.63", "206.60", "16.36x", "72.06%"),
    },
    ("2026-08-10-m1-ultra-gemma4", "gemma4", "gemma4-host-10x", "gemma4-stock-10x", "gemma4-safe-shim-10x"): {
        "pp512": ("517.88", "71.66", "515.76", "7.20x", "99.59%"),
        "tg128": ("52.38", "3.41", "49.67", "14.54x", "94.82%"),
    },
}


def _cua_summary(folder, host, stock, shim):
    d = cua_dir() / folder
    return report.report_from_files([("stock", [str(d / f"{stock}.json")]),
                                     ("unlocked", [str(d / f"{shim}.json")])], host=str(d / f"{host}.json"))


@pytest.mark.parametrize("key", list(PUBLISHED), ids=[k[1] for k in PUBLISHED])
def test_cua_published_figures_reproduced_exactly(key):
    folder, _, host, stock, shim = key
    s = _cua_summary(folder, host, stock, shim)
    tab = report.table([s])
    cols = tab["columns"]
    cell = {(r["arm"], r["test"]): dict(zip(cols, r["cells"])) for r in tab["rows"]}
    sp = "speedup vs stock"  # one process a side: ranges, no 95% interval
    for test, (h, st, un, speed, pct) in PUBLISHED[key].items():
        assert cell[("host", test)]["median tok/s"] == h
        assert cell[("stock", test)]["median tok/s"] == st
        assert cell[("unlocked", test)]["median tok/s"] == un
        assert cell[("unlocked", test)][sp].split(" ")[0] == speed
        assert cell[("unlocked", test)]["% of host"].split(" ")[0] == pct
        # one process a side: no 95% interval, the range of the repetitions' ratios brackets the value
        cmp = s["arms"]["unlocked"]["tests"][test]["speedup"]
        assert cmp["ci95"] is None and cmp["level"] == "range"
        assert cmp["range"][0] <= cmp["value"] <= cmp["range"][1]
        # path attestation: stock guest Apple5 without simdgroup mm, shimmed guest Apple9 with it
        assert cell[("stock", test)]["GPU family"] == "Apple5 (1005)"
        assert cell[("stock", test)]["simdgroup mm"] == "no"
        assert cell[("unlocked", test)]["GPU family"] == "Apple9 (1009)"
        assert cell[("unlocked", test)]["simdgroup mm"] == "yes"
        assert cell[("host", test)]["GPU family"] == "Apple7 (1007)"
    md = report.render_markdown([s])
    for test, (h, st, un, speed, pct) in PUBLISHED[key].items():
        assert f"| {un} |" in md and f"| {speed} (range " in md and f"| {pct} (range " in md


def test_cua_cli_markdown_and_json():
    d = cua_dir() / "2026-08-09-m1-ultra"
    args = ["report", "--arm", f"stock={d / 'tiny-stock-minimal.json'}",
            "--arm", f"unlocked={d / 'tiny-safe-shim-10x-final.json'}", "--host", str(d / "tiny-host-minimal.json")]
    r = CliRunner().invoke(main, args + ["--format", "md"])
    assert r.exit_code == 0, r.output
    assert "| unlocked | pp512 | 4786.70 |" in r.output and "Apple5 (1005)" in r.output
    r = CliRunner().invoke(main, args + ["--json"])
    data = json.loads(r.output)
    assert round(data["arms"]["unlocked"]["tests"]["tg128"]["speedup"]["value"], 2) == 16.36
    assert data["arms"]["stock"]["path"]["metal"]["simdgroup_mm"] is False


def test_pp_and_tg_from_separate_files(tmp_path):
    src = json.loads((FIXTURES / "cua" / "tiny-safe-shim-10x-final.json").read_text())
    (tmp_path / "pp.json").write_text(json.dumps([src[0]]))
    (tmp_path / "tg.json").write_text(json.dumps([src[1]]))
    (tmp_path / "pp.stderr").write_text((FIXTURES / "cua" / "tiny-safe-shim-10x-final.stderr").read_text())
    s = report.report_from_files([("stock", [str(FIXTURES / "cua" / "tiny-stock-minimal.json")]),
                                  ("shim", [str(tmp_path / "pp.json"), str(tmp_path / "tg.json")])])
    shim = s["arms"]["shim"]
    assert sorted(shim["tests"]) == ["pp512", "tg128"]
    assert round(shim["tests"]["pp512"]["median"], 2) == 4786.70
    assert shim["path"]["metal"]["gpu_family"] == "Apple9"
    assert s["host"] is None and shim["tests"]["pp512"]["pct_of_host"] is None


def _records(arm, test, values, run=1):
    return [{"arm": arm, "run": run, "sample": i, "test": test, "tok_s": v} for i, v in enumerate(values, 1)]


STOCK_PATH = {"vulkan": {"device_name": "llvmpipe", "fp16": False, "shared_memory": 16384}}
FULL_PATH = {"vulkan": {"device_name": "llvmpipe", "fp16": True, "shared_memory": 32768}}


def _arms():
    ok = [{"run": 1, "exit_code": 0, "signal": None, "timed_out": False}]
    return {
        "vm-stock": {"spec": {"simulate": "vulkan-paravirt"}, "state": "active", "path": STOCK_PATH, "runs": ok},
        "vm-unlocked": {"spec": {}, "state": "active", "path": FULL_PATH, "runs": ok},
        "same": {"spec": {}, "state": "active", "path": STOCK_PATH, "runs": ok},
        "dud": {"spec": {}, "state": "inert", "path": FULL_PATH, "runs": ok},
        "crashy": {"spec": {}, "state": "failed", "path": {},
                   "runs": ok + [{"run": 2, "exit_code": None, "signal": "SIGSEGV", "timed_out": False},
                                 {"run": 3, "exit_code": None, "signal": None, "timed_out": True}]},
    }


def _synthetic_summary(host=None):
    recs = (_records("vm-stock", "pp64", [10, 11, 12]) + _records("vm-unlocked", "pp64", [20, 22, 24])
            + _records("same", "pp64", [10, 10, 11]) + _records("dud", "pp64", [30, 31, 32])
            + _records("crashy", "pp64", [5, 6]))
    return analyze(recs, _arms(), "vm-stock", host)


def _seal(folder):
    """Make ``folder`` (holding a summary.json) a bundle that verifies: capshim reads only those."""
    from capshim import evidence

    b = evidence.Bundle.create(folder, exist_ok=True)
    for run in _summary_runs(folder):
        (folder / "raw" / f"{run}.json").write_text("[]")
        (folder / "raw" / f"{run}.stderr").write_text("")
    b.write_sums()
    return folder


def _summary_runs(folder):
    """``<arm>-<run>`` of each run a summary.json records (a bundle keeps their raw files)."""
    s = json.loads((folder / "summary.json").read_text())
    arms = s.get("arms") if isinstance(s, dict) else None
    return [f"{a}-{r['run']}" for a, v in (arms.items() if isinstance(arms, dict) else [])
            if isinstance(v, dict) for r in v.get("runs") or [] if isinstance(r, dict) and "run" in r]


def test_flags_inert_failed_and_path_unchanged():
    s = _synthetic_summary()
    a = s["arms"]
    assert a["vm-unlocked"]["shim_result"] is True and a["vm-unlocked"]["path_unchanged"] is False
    assert a["vm-unlocked"]["flags"] == []
    assert a["vm-unlocked"]["tests"]["pp64"]["speedup"]["value"] == 2.0
    assert a["same"]["path_unchanged"] is True and any("path unchanged" in f for f in a["same"]["flags"])
    assert a["dud"]["shim_result"] is False and "inert: not a shim result" in a["dud"]["flags"]
    assert any("2 of 3 runs failed" in f and "SIGSEGV" in f and "timed out" in f for f in a["crashy"]["flags"])
    tab = report.table([s])
    marked = {r["arm"] for r in tab["rows"] if r["marked"]}
    assert marked == {"dud", "crashy"}
    state = dict(zip(tab["columns"], next(r for r in tab["rows"] if r["arm"] == "dud")["cells"]))["state"]
    assert state == "inert (NOT a shim result)"
    md = report.render_markdown([s])
    assert "~~dud~~" in md and "NOT a shim result" in md
    html = report.render_html([s])
    assert 'class="marked"' in html and "<td>vm-unlocked</td>" in html


def test_host_percent_and_host_from_bundle(tmp_path):
    host = {"name": "bare", "tests": {"pp64": [40.0, 40.0, 40.0]}, "path": FULL_PATH, "source": "h.json"}
    s = _synthetic_summary(host)
    assert s["arms"]["vm-unlocked"]["tests"]["pp64"]["pct_of_host"]["value"] == pytest.approx(55.0)
    (tmp_path / "summary.json").write_text(json.dumps(s))
    h = host_from_file(tmp_path)
    # the bundle's host plays host, never its baseline arm (the simulated weak device)
    assert h["tests"] == {"pp64": [[40.0, 40.0, 40.0]]} and h["path"] == FULL_PATH


def test_a_bundle_plays_host_with_its_host_arm_not_its_baseline_arm(tmp_path):
    recs = (_records("native", "pp64", [50, 51, 52]) + _records("vm-stock", "pp64", [10, 11, 12]))
    arms = {"native": {"state": "native", "path": FULL_PATH}, "vm-stock": {"state": "active", "path": STOCK_PATH}}
    s = analyze(recs, arms, "vm-stock", {"name": "native", "tests": {"pp64": [[50.0, 51.0, 52.0]]}})
    (tmp_path / "summary.json").write_text(json.dumps(s))
    h = host_from_file(tmp_path)
    assert h["tests"]["pp64"] == [[50.0, 51.0, 52.0]] and h["path"] == FULL_PATH
    assert h["name"].endswith(":native")
    # a bundle with neither a host arm nor a host baseline cannot play host
    (tmp_path / "summary.json").write_text(json.dumps(_synthetic_summary()))
    with pytest.raises(AnalysisError, match="no host arm"):
        host_from_file(tmp_path)


ISSUE_A = [{"model_filename": "/models/big-8b.gguf", "model_type": "llama 8B Q4_K - Medium", "n_gpu_layers": 99,
            "n_threads": 2, "n_prompt": 512, "n_gen": 0, "samples_ts": [100.0, 101.0, 99.0]}]
ISSUE_B = [{"model_filename": "/models/tiny-1b.gguf", "model_type": "llama 1B Q4_0", "n_gpu_layers": 0,
            "n_threads": 16, "n_prompt": 512, "n_gen": 0, "samples_ts": [300.0, 301.0, 299.0]}]


def test_different_models_are_not_compared_silently(tmp_path):
    """The two input files of issue 10: an 8B model on the GPU vs a 1B model on 16 CPU threads."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(ISSUE_A))
    b.write_text(json.dumps(ISSUE_B))
    r = CliRunner().invoke(main, ["report", "--arm", f"stock={a}", "--arm", f"unlocked={b}"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "test pp512: arm 'unlocked' run 1 and arm 'stock' run 1 differ in model_type: " \
           "'llama 1B Q4_0' vs 'llama 8B Q4_K - Medium'" in r.output
    r = CliRunner().invoke(main, ["report", "--arm", f"stock={a}", "--host", str(b)])
    assert r.exit_code == 2 and "host 'host' and arm 'stock' run 1 differ in model_type" in r.output
    # --allow-mismatch compares them, with every differing field named and the row marked
    s = report.report_from_files([("stock", [str(a)]), ("unlocked", [str(b)])], allow_mismatch=True)
    mism = s["arms"]["unlocked"]["tests"]["pp512"]["mismatch"]
    assert [m["field"] for m in mism] == ["model_type", "model_filename", "n_threads", "n_gpu_layers"]
    row = next(r for r in report.table([s])["rows"] if r["arm"] == "unlocked")
    assert row["marked"] and "CONFIG DIFFERS: model_type 'llama 1B Q4_0' vs 'llama 8B Q4_K - Medium'" in row["notes"][0]
    r = CliRunner().invoke(main, ["report", "--allow-mismatch", "--arm", f"stock={a}", "--arm", f"unlocked={b}",
                                  "--format", "md"])
    assert r.exit_code == 0 and "~~unlocked~~" in r.output and "CONFIG DIFFERS" in r.output
    # the folder is not part of the configuration: the same model file in another folder compares;
    # the file's name is (issue 20: model file and model identity are both series keys)
    c = tmp_path / "c.json"
    c.write_text(json.dumps([{**ISSUE_A[0], "model_filename": "/elsewhere/big-8b.gguf"}]))
    s = report.report_from_files([("stock", [str(a)]), ("guest", [str(c)])])
    assert s["arms"]["guest"]["tests"]["pp512"]["mismatch"] == []
    c.write_text(json.dumps([{**ISSUE_A[0], "model_filename": "/elsewhere/big.gguf"}]))
    with pytest.raises(ComparabilityError, match="differ in model_filename: 'big.gguf' vs 'big-8b.gguf'"):
        report.report_from_files([("stock", [str(a)]), ("guest", [str(c)])])


@pytest.mark.parametrize("bad, where", [
    ({"arms": {"a": {}}, "baseline": "a"}, "$.arms.a"),
    ({"arms": {"a": {"state": "native"}}, "baseline": "a"}, "$.arms.a"),
    ({"arms": [], "baseline": "a"}, "$.arms"),
    ({"arms": {"a": {"state": "native", "tests": {"pp": {"n": 1, "median": "x", "min": 1, "max": 1}}}},
      "baseline": "a"}, "$.arms.a.tests.pp.median"),
    ({"arms": {"a": {"state": "native", "tests": {}}}, "baseline": "b"}, "$.baseline"),
    ([1, 2], "$"),
])
def test_report_on_a_wrong_shaped_summary_exits_2_naming_the_file_and_path(tmp_path, bad, where):
    (tmp_path / "summary.json").write_text(json.dumps(bad))
    _seal(tmp_path)
    r = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and f"summary.json: not a capshim summary: at {where}" in r.output
    r = CliRunner().invoke(main, ["report", "--arm", f"a={FIXTURES / 'llama-bench' / 'cpu-tiny.json'}",
                                  "--host", str(tmp_path)])
    assert r.exit_code == 2 and "not a capshim summary" in r.output


def test_committed_bundles_still_report():
    from tests.conftest import REPO

    for name in ("h200-tinyllama-r10", "lavapipe-default", "h200-ablation"):
        r = CliRunner().invoke(main, ["report", str(REPO / "evidence" / name)])
        assert r.exit_code == 0, r.output
        assert "samples" in r.output  # an old summary: sample counts, not processes
    h = host_from_file(REPO / "evidence" / "h200-tinyllama-r10")
    assert h["name"].endswith(":native")


def test_analysis_errors_name_the_problem(tmp_path):
    with pytest.raises(AnalysisError, match="baseline arm 'nope'"):
        analyze([], _arms(), "nope")
    with pytest.raises(AnalysisError, match="record 0: arm 'ghost'"):
        analyze(_records("ghost", "pp64", [1.0]), _arms(), "vm-stock")
    with pytest.raises(AnalysisError, match=r"record 0 .*tok_s must be"):
        analyze(_records("vm-stock", "pp64", [float("nan")]), _arms(), "vm-stock")
    with pytest.raises(AnalysisError, match="state 'weird'"):
        analyze([], {"a": {"state": "weird"}}, "a")
    (tmp_path / "summary.json").write_text("{")
    with pytest.raises(AnalysisError, match=r"summary\.json: invalid JSON"):
        host_from_file(tmp_path)


def test_cli_errors_exit_2_without_traceback(tmp_path):
    r = CliRunner().invoke(main, ["report", "--arm", "justaname"])
    assert r.exit_code == 2 and "expected NAME=FILE.json" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert r.exit_code == 2 and "summary.json" in r.output
    r = CliRunner().invoke(main, ["report"])
    assert r.exit_code == 2


def test_merge_bundles_and_write_html_with_chart(tmp_path):
    s = _synthetic_summary()
    for name in ("day1", "day2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(s))
        _seal(tmp_path / name)
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(tmp_path / "day1"), str(tmp_path / "day2"), "--output", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "<th>bundle</th>" in text and "<td>day1</td>" in text and "<td>day2</td>" in text
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = CliRunner().invoke(main, ["report", str(tmp_path / "day1")])
    assert r.exit_code == 0 and "vm-unlocked" in r.output


@pytest.mark.slow
def test_report_output_into_a_missing_folder_is_a_usage_error(tmp_path):
    from tests.conftest import run_capshim

    src = FIXTURES / "llama-bench" / "cpu-tiny.json"
    r = run_capshim("report", "--arm", f"a={src}", "--format", "md", "-o", str(tmp_path / "no" / "r.md"))
    assert r.returncode == 2 and "--output" in r.stderr and "does not exist" in r.stderr
    assert "Traceback" not in r.stderr


def test_report_refuses_a_bundle_that_does_not_verify(tmp_path):
    s = _synthetic_summary({"name": "bare", "tests": {"pp64": [40.0, 40.0, 40.0]}, "path": FULL_PATH,
                            "source": "h.json"})
    (tmp_path / "summary.json").write_text(json.dumps(s))
    _seal(tmp_path)
    assert CliRunner().invoke(main, ["report", str(tmp_path)]).exit_code == 0
    fixture = FIXTURES / "llama-bench" / "cpu-tiny.json"
    s["arms"]["vm-unlocked"]["tests"]["pp64"]["median"] = 12345.0  # edited after the seal
    (tmp_path / "summary.json").write_text(json.dumps(s))
    for args in (["report", str(tmp_path)], ["report", "--arm", f"a={fixture}", "--host", str(tmp_path)]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2, r.output
        assert "Traceback" not in r.output and "12345" not in r.output
        assert f"{tmp_path}: the bundle does not verify" in r.output and "summary.json: checksum mismatch" in r.output
    # an unsealed folder (no SHA256SUMS) is no bundle either
    (tmp_path / "SHA256SUMS").unlink()
    r = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert r.exit_code == 2 and "SHA256SUMS: missing" in r.output
    # llama-bench files are not bundles: still read as they are
    r = CliRunner().invoke(main, ["report", "--arm", f"a={fixture}", "--host", str(fixture)])
    assert r.exit_code == 0, r.output


def _sealed_bundle(tmp_path):
    b = tmp_path / "B"
    b.mkdir()
    (b / "summary.json").write_text(json.dumps(_synthetic_summary()))
    (b / "report.md").write_text("# as sealed\n")
    _seal(b)
    from capshim import evidence

    assert evidence.verify(b) == []
    return b


@pytest.mark.parametrize("args", [["-o", "B/report.md"], ["--output", "B/raw/r.html"], ["--chart", "B/chart.png"],
                                  ["-o", "elsewhere.md", "--chart", "B/status/c.png"]])
def test_report_refuses_to_write_inside_a_sealed_bundle(tmp_path, monkeypatch, args):
    """issue 18: ``report B -o B/report.md`` overwrote a sealed bundle's file; any -o/--chart inside one is exit 2."""
    from capshim import evidence

    b = _sealed_bundle(tmp_path)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["report", "B", *args])
    assert r.exit_code == 2, r.output
    flag = {"-o": "--output"}.get(args[-2], args[-2])
    assert f"{flag} {args[-1]}: inside the sealed folder {b}" in r.output and "Traceback" not in r.output
    assert (b / "report.md").read_text() == "# as sealed\n" and evidence.verify(b) == []
    assert not (tmp_path / "elsewhere.md").exists()


def test_report_output_is_written_atomically_and_a_full_disk_is_exit_4(tmp_path, monkeypatch):
    """The report file is replaced in one rename: on a full disk the old file stays, no temporary file
    is left, and the exit is 4 naming the file (not 2, not a traceback)."""
    import errno
    import os

    from capshim.contracts import output

    b = _sealed_bundle(tmp_path)
    out = tmp_path / "r.md"
    out.write_text("old\n")
    real = os.replace

    def full(src, dst):
        if os.fspath(dst) == str(out):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(output.os, "replace", full)
    r = CliRunner().invoke(main, ["report", str(b), "-o", str(out), "--format", "md", "--force"])
    assert r.exit_code == 4, r.output
    assert f"{out}: cannot write: No space left on device" in r.output
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["B", "r.md", "r.png"]
    monkeypatch.setattr(output.os, "replace", real)
    r = CliRunner().invoke(main, ["report", str(b), "-o", str(out), "--format", "md", "--force"])
    assert r.exit_code == 0 and "| vm-unlocked |" in out.read_text()


def test_report_refuses_a_link_into_a_sealed_bundle(tmp_path):
    """``-o x.md`` where x.md is a link to B/report.md would replace the sealed file through the link."""
    from capshim import evidence

    b = _sealed_bundle(tmp_path)
    link = tmp_path / "x.md"
    link.symlink_to(b / "report.md")
    r = CliRunner().invoke(main, ["report", str(b), "-o", str(link), "--chart", str(tmp_path / "c.png")])
    assert r.exit_code == 2 and "is a symbolic link" in r.output, r.output  # never through a link
    assert not (tmp_path / "c.png").exists()
    assert (b / "report.md").read_text() == "# as sealed\n" and evidence.verify(b) == []


def test_report_into_a_fifo_is_refused_and_leaves_it_a_fifo(tmp_path):
    """The output rule (contracts.output): a FIFO named by -o is refused after lstat, never opened
    (no reader needed for the test to end); -o - or no -o prints on stdout."""
    import os
    import stat

    b = _sealed_bundle(tmp_path)
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    r = CliRunner().invoke(main, ["report", str(b), "-o", str(fifo), "--format", "md"])
    assert r.exit_code == 2 and "is a FIFO" in r.output, r.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not (tmp_path / "out.png").exists()
    r = CliRunner().invoke(main, ["report", str(b), "-o", "-", "--format", "md"])
    assert r.exit_code == 0 and "| vm-unlocked |" in r.output


def test_report_of_a_study_folder_names_its_nested_bundles():
    """Hostile pass: report of a study said "the bundle does not verify" and listed every nested file,
    although evidence verify passes the study."""
    study = FIXTURES.parents[1] / "evidence" / "h200-ablate-llama8b"
    r = CliRunner().invoke(main, ["report", str(study)])
    assert r.exit_code == 2 and "a study folder" in r.output and "h200-ablate-llama8b/bench" in r.output
    assert "Traceback" not in r.output and "does not verify" not in r.output


def test_report_output_to_an_unread_fifo_is_refused_and_no_chart_lands_beside_a_device(tmp_path):
    """Hostile pass: -o FIFO with no reader blocked forever; -o /dev/full and -o /dev/stdout wrote /dev/full.png and
    /dev/stdout.png."""
    import os

    bundle = FIXTURES.parents[1] / "evidence" / "h200-ablation"
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    r = CliRunner().invoke(main, ["report", str(bundle), "-o", str(fifo)])  # nobody reads it
    assert r.exit_code == 2 and "is a FIFO" in r.output and not (tmp_path / "ff.png").exists()
    before = set(os.listdir("/dev"))
    r = CliRunner().invoke(main, ["report", str(bundle), "-o", "/dev/full"])
    assert r.exit_code == 2 and "is a device" in r.output and "Traceback" not in r.output
    assert set(os.listdir("/dev")) == before  # no /dev/full.png


def test_the_seed_table_in_docs_results_is_what_capshim_report_prints():
    """docs/results.md says a test checks each figure of its seed table: every row's median,
    speedup and % of host (ranges included: one process a side gives no 95% interval) is the cell
    `capshim report` prints for the command printed above the table."""
    from tests.conftest import REPO

    s = report.report_from_files([("stock", [str(FIXTURES / "cua" / "tiny-stock-minimal.json")]),
                                  ("unlocked", [str(FIXTURES / "cua" / "tiny-safe-shim-10x-final.json")])],
                                 host=str(FIXTURES / "cua" / "tiny-host-minimal.json"))
    tab = report.table([s])
    cell = {(r["arm"], r["test"]): dict(zip(tab["columns"], r["cells"])) for r in tab["rows"]}
    text = (REPO / "docs" / "results.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith(("| host | ", "| stock | ", "| unlocked | "))]
    assert len(rows) == 6
    for line in rows:
        arm, test, median, speed, pct = [c.strip() for c in line.strip("|").split("|")][:5]
        got = cell[(arm, test)]
        assert got["median tok/s"] == median, line
        assert (got["speedup vs stock"] or "") == speed, line
        assert got["% of host"] == pct, line
