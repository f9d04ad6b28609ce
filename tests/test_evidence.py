"""Evidence bundles: written incrementally, finalized, verified, tampering detected."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest
from click.testing import CliRunner

from tests._report_paths import FIXTURES
from capshim import evidence, report
from capshim.bench import llamabench
from capshim.export import markdown
from capshim.bench.attest import parse_path
from capshim.cli import main

CUA = FIXTURES / "cua"


def _finalize(b, records, arms, baseline, host=None, **kw):
    """Finalize as the bench does: its steps (analysis, results.csv, report, chart) handed to the bundle."""
    return b.finalize(report.bundle_steps(records, arms, baseline, host), **kw)


def _bundle(tmp_path, interrupted=False):
    b = evidence.Bundle.create(tmp_path / "b", metadata={"command": ["llama-bench", "-o", "json"]})
    records, arms = [], {}
    for arm, name in (("stock", "tiny-stock-minimal"), ("shim", "tiny-safe-shim-10x-final")):
        out = (CUA / f"{name}.json").read_text()
        err = (CUA / f"{name}.stderr").read_text()
        status = tmp_path / f"{arm}.status"
        status.write_text('{"event": "loaded"}\n')
        b.write_run(arm, 1, stdout=out, stderr=err, status_src=status)
        records += llamabench.to_records(llamabench.parse_output(out, arm), arm, 1)
        arms[arm] = {"spec": {}, "state": "native" if arm == "stock" else "active", "path": parse_path(err),
                     "runs": [{"run": 1, "exit_code": 0, "signal": None, "timed_out": False}]}
    summary = _finalize(b, records, arms, "stock", interrupted=interrupted)
    return b.root, summary


@pytest.mark.slow
def test_layout_and_verify_ok(tmp_path):
    root, summary = _bundle(tmp_path)
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert names == sorted(["SHA256SUMS", "chart.png", "metadata.json", "raw/shim-1.json", "raw/shim-1.stderr",
                     "raw/stock-1.json", "raw/stock-1.stderr", "report.md", "results.csv", "summary.json",
                     "status/shim-1.jsonl", "status/stock-1.jsonl"])
    assert evidence.verify(root) == []
    # sha256sum(1) agrees with our file
    proc = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    csv_lines = (root / "results.csv").read_text().splitlines()
    assert csv_lines[0] == "arm,run,round,position,sample,test,tok_s,state,contaminated" and len(csv_lines) == 1 + 40
    assert csv_lines[1] == "stock,1,,,1,pp512,433.539,native,"
    assert json.loads((root / "summary.json").read_text()) == json.loads(json.dumps(summary))
    meta = json.loads((root / "metadata.json").read_text())
    assert meta["interrupted"] is False and meta["host"]["capshim"]
    assert "| shim | pp512 | 4786.70 |" in (root / "report.md").read_text()


def test_tampered_missing_and_extra_files_named(tmp_path):
    root, _ = _bundle(tmp_path)
    (root / "raw" / "shim-1.json").write_text("[]")
    (root / "status" / "stock-1.jsonl").unlink()
    (root / "raw" / "extra.txt").write_text("x")
    problems = evidence.verify(root)
    assert problems == ["raw/shim-1.json: checksum mismatch",
                        "status/stock-1.jsonl: listed in SHA256SUMS but missing",
                        "raw/extra.txt: not listed in SHA256SUMS"]
    r = CliRunner().invoke(main, ["evidence", "verify", str(root)])
    assert r.exit_code == 1
    assert "raw/shim-1.json: checksum mismatch" in r.output and "raw/extra.txt" in r.output


def test_cli_verify_ok_and_missing_sums(tmp_path):
    root, _ = _bundle(tmp_path)
    r = CliRunner().invoke(main, ["evidence", "verify", str(root)])
    assert r.exit_code == 0 and r.output.startswith(f"sealed, not signed: {root}: every file matches SHA256SUMS")
    (root / "SHA256SUMS").unlink()
    r = CliRunner().invoke(main, ["evidence", "verify", str(root)])
    assert r.exit_code == 1 and "SHA256SUMS: missing" in r.output


def test_interrupted_with_nothing_finished_still_verifies(tmp_path):
    b = evidence.Bundle.create(tmp_path / "b")
    arms = {"native": {"state": "native", "runs": []}, "vm": {"state": "failed", "runs": [
        {"run": 1, "exit_code": None, "signal": "SIGINT", "timed_out": False}]}}
    b.write_run("vm", 1, stdout="", stderr="")  # the runner opens both before the process starts
    s = _finalize(b, [], arms, "native", interrupted=True)
    assert s["interrupted"] is True and s["arms"]["native"]["tests"] == {}
    assert any("SIGINT" in f for f in s["arms"]["vm"]["flags"])
    assert evidence.verify(b.root) == []
    assert "Interrupted" in (b.root / "report.md").read_text()
    assert json.loads((b.root / "metadata.json").read_text())["interrupted"] is True


def test_create_refuses_non_empty_and_bad_arm_names(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    with pytest.raises(evidence.EvidenceError, match="exists and is not empty"):
        evidence.Bundle.create(tmp_path / "x")
    b = evidence.Bundle.create(tmp_path / "y")
    with pytest.raises(evidence.EvidenceError, match="arm name '../evil'"):
        b.raw_json("../evil", 1)
    assert b.status_file("vm-stock", 2) == b.root / "status" / "vm-stock-2.jsonl"


def test_sha256_file(tmp_path):
    f = tmp_path / "blob"
    f.write_bytes(b"capshim" * 100000)
    assert evidence.sha256_file(f) == hashlib.sha256(b"capshim" * 100000).hexdigest()
    with pytest.raises(evidence.EvidenceError, match="nope: cannot read"):
        evidence.sha256_file(tmp_path / "nope")


# --- sealed no matter what (issue 9, item 1) ------------------------------------------------


def _one_arm(tmp_path, samples, host=None):
    b = evidence.Bundle.create(tmp_path / "b", metadata={})
    row = json.dumps([{"n_prompt": 512, "n_gen": 0, "samples_ts": samples}])
    b.write_run("a", 1, stdout=row, stderr="")
    records = llamabench.to_records(llamabench.parse_output(row, "a"), "a", 1)
    arms = {"a": {"spec": {}, "state": "native", "path": {}, "runs": [{"run": 1, "exit_code": 0}]}}
    return b, _finalize(b, records, arms, "a", host)


def test_chart_failure_on_huge_samples_is_recorded_and_sealed(tmp_path):
    b, summary = _one_arm(tmp_path, [1e308, 1e308, 1e300])
    assert evidence.verify(b.root) == []
    meta = json.loads((b.root / "metadata.json").read_text())
    # whatever overflowed (a mean, an interval, the chart's axes) is recorded, never raised
    assert {f["step"] for f in meta.get("finalize_failures", [])} <= {"summary.json", "chart", "report"}
    assert (b.root / "summary.json").is_file() and (b.root / "results.csv").is_file()
    json.loads((b.root / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-strict {c}"))


def test_chart_exception_is_recorded_and_sealed(tmp_path, monkeypatch):
    from capshim.export import chart

    def bad_chart(*a, **k):
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(chart, "serialize", bad_chart)
    b, summary = _one_arm(tmp_path, [100.0, 90.0])
    assert evidence.verify(b.root) == []
    assert summary["finalize_failures"] == [{"step": "chart", "error": "ValueError: 'yerr' must not contain "
                                                                      "negative values"}]
    assert not (b.root / "chart.png").exists()
    assert "![chart]" not in (b.root / "report.md").read_text()


def test_bad_host_baseline_is_isolated(tmp_path):
    host = {"name": "h", "source": "elsewhere", "path": {}, "tests": {"pp512": ["x"]}}
    b, summary = _one_arm(tmp_path, [100.0, 101.0], host=host)
    assert evidence.verify(b.root) == []
    assert summary["finalize_failures"][0]["step"] == "host baseline"
    assert summary["arms"]["a"]["tests"]["pp512"]["median"] == pytest.approx(100.5)
    assert "Finalize failures" in (b.root / "report.md").read_text()


def test_every_step_failing_still_seals(tmp_path, monkeypatch):
    from capshim.bench import analysis

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(analysis, "analyze", boom)
    monkeypatch.setattr(markdown, "render", boom)  # the report step (capshim.bench.summarize.steps)
    b, summary = _one_arm(tmp_path, [100.0])
    assert evidence.verify(b.root) == []
    steps = [f["step"] for f in json.loads((b.root / "metadata.json").read_text())["finalize_failures"]]
    assert steps == ["analysis", "report"]


def test_metadata_is_strict_json(tmp_path):
    b = evidence.Bundle.create(tmp_path / "b", metadata={"method": {"timeout_s": float("nan")}})
    meta = json.loads((b.root / "metadata.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert meta["method"]["timeout_s"] is None and "timeout_s" in meta["nonfinite"]
    with pytest.raises(ValueError, match=r"\$\.x\[1\]"):
        evidence.strict_json({"x": [1.0, float("inf")]})


def test_second_signal_during_finalize_waits_for_the_seal(tmp_path, monkeypatch):
    import os
    import signal

    from capshim.bench import analysis

    real = analysis.analyze

    def slow(*a, **k):
        os.kill(os.getpid(), signal.SIGINT)  # arrives mid-finalize
        return real(*a, **k)

    monkeypatch.setattr(analysis, "analyze", slow)
    with pytest.raises(SystemExit) as info:
        _one_arm(tmp_path, [100.0])
    assert info.value.code == 130
    assert evidence.verify(tmp_path / "b") == []


def _disk_full_when_writing(monkeypatch, name: str) -> None:
    """The atomic publish of a file named ``name`` fails with ENOSPC, as on a full disk."""
    import errno

    from capshim import paths

    real = paths.os.replace

    def full(src, dst):
        if str(dst).endswith(name):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(paths.os, "replace", full)


def test_full_disk_during_finalize_is_exit_4_without_tmp_files(tmp_path, monkeypatch):
    from capshim import paths

    b = evidence.Bundle.create(tmp_path / "b", metadata={})
    _disk_full_when_writing(monkeypatch, "summary.json")
    with pytest.raises(paths.StorageError) as info:
        _finalize(b, [], {"a": {"state": "native"}}, "a")
    assert info.value.exit_code == 4
    assert not [p for p in b.root.rglob("*") if p.name.endswith(".tmp")]


def test_out_is_a_file_or_device(tmp_path):
    with pytest.raises(evidence.EvidenceError, match="not a folder"):
        evidence.Bundle.create("/dev/null")
    (tmp_path / "f").write_text("x")
    with pytest.raises(evidence.EvidenceError, match="not a folder"):
        evidence.Bundle.create(tmp_path / "f")


def test_unique_folder_same_second(tmp_path):
    a = evidence.unique_folder(tmp_path / "capshim-bench-x")
    b = evidence.unique_folder(tmp_path / "capshim-bench-x")
    assert a != b and b.name == "capshim-bench-x-2" and a.is_dir() and b.is_dir()


# --- verify means inside (issue 9, item 2) ---------------------------------------------------


def _sealed(tmp_path):
    b = evidence.Bundle.create(tmp_path / "b", metadata={})
    _finalize(b, [], {"a": {"state": "native"}}, "a")
    assert evidence.verify(b.root) == []
    return b.root


def test_verify_refuses_a_link_even_listed(tmp_path):
    root = _sealed(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (root / "raw" / "x.json").symlink_to(outside)
    line = f"{hashlib.sha256(b'{}').hexdigest()}  raw/x.json\n"
    with open(root / "SHA256SUMS", "a") as fh:
        fh.write(line)
    probs = evidence.verify(root)
    assert any(p.startswith("raw/x.json: is a link") for p in probs)
    assert any("resolves outside" in p for p in probs)


def test_verify_refuses_a_linked_folder_and_a_fifo(tmp_path):
    import os

    root = _sealed(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (root / "more").symlink_to(tmp_path / "elsewhere")
    os.mkfifo(root / "pipe")
    probs = evidence.verify(root)  # returns: never opens the FIFO
    assert any(p.startswith("more: is a link") for p in probs)
    assert any(p.startswith("pipe: is not a regular file") for p in probs)


def test_verify_refuses_a_folder_it_cannot_list(tmp_path, monkeypatch):
    """A folder with search but no read permission (mode 0300 for a user who is not root) opens
    its listed files by path, so checksums pass; what else it holds is unseen: a problem, not ok."""
    import os

    root = _sealed(tmp_path)
    hidden = root / "raw" / "hidden"
    hidden.mkdir()
    (hidden / "evil.json").write_text("{}")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(hidden):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    probs = evidence.verify(root)
    assert any(p.startswith("raw/hidden: cannot list this folder (Permission denied)") for p in probs), probs


def test_verify_refuses_dotdot_and_absolute(tmp_path):
    root = _sealed(tmp_path)
    with open(root / "SHA256SUMS", "a") as fh:
        fh.write("0" * 64 + "  ../b/metadata.json\n" + "0" * 64 + "  /etc/passwd\n")
    probs = evidence.verify(root)
    assert sum("outside the folder" in p for p in probs) == 2


def test_verify_sums_is_a_link(tmp_path):
    root = _sealed(tmp_path)
    (root / "SHA256SUMS").rename(tmp_path / "S")
    (root / "SHA256SUMS").symlink_to(tmp_path / "S")
    probs = evidence.verify(root)
    assert any(p.startswith("SHA256SUMS: is a link") for p in probs)


def test_full_disk_while_storing_a_run_is_exit_4(tmp_path, monkeypatch):
    import errno

    b = evidence.Bundle.create(tmp_path / "b", metadata={})
    status = tmp_path / "s.jsonl"
    status.write_text("{}\n")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(evidence.bundle.paths, "atomic_write", full)
    with pytest.raises(evidence.StorageError) as info:
        b.write_run("a", 1, status_src=status)
    assert info.value.exit_code == 4 and "run 1 of arm 'a'" in str(info.value)


def test_verify_refuses_a_duplicated_sums_line(tmp_path):
    root, _ = _bundle(tmp_path)
    sums = (root / "SHA256SUMS").read_text()
    line = next(x for x in sums.splitlines() if x.endswith("  summary.json"))
    # first line wrong, last right: a reader keeping the last entry would pass, sha256sum -c fails
    (root / "SHA256SUMS").write_text("0" * 64 + "  summary.json\n" + sums)
    assert line in (root / "SHA256SUMS").read_text()
    probs = evidence.verify(root)
    assert any("lists summary.json again" in p for p in probs), probs


def test_verify_refuses_an_empty_folder_with_an_empty_sums(tmp_path):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "SHA256SUMS").write_text("")
    probs = evidence.verify(tmp_path / "e")
    assert "metadata.json: not listed in SHA256SUMS (every bundle has it)" in probs
    assert "summary.json: not listed in SHA256SUMS (every bundle has it)" in probs


def test_verify_refuses_a_recorded_run_whose_raw_file_went_with_its_line(tmp_path):
    root, _ = _bundle(tmp_path)
    (root / "raw" / "shim-1.json").unlink()
    sums = root / "SHA256SUMS"
    sums.write_text("".join(x + "\n" for x in sums.read_text().splitlines() if not x.endswith(" raw/shim-1.json")))
    probs = evidence.verify(root)
    assert any(p.startswith("raw/shim-1.json: run shim-1 is recorded") for p in probs), probs


def test_verify_refuses_a_hard_link_to_a_file_outside(tmp_path):
    import os

    root, _ = _bundle(tmp_path)
    os.link(root / "report.md", tmp_path / "outside.md")  # edit outside.md and the bundle changes
    probs = evidence.verify(root)
    assert any(p.startswith("report.md: has 2 hard links") for p in probs), probs


@pytest.mark.slow
def test_sums_escape_odd_names_and_verify_refuses_control_characters(tmp_path):
    import shutil

    from capshim import paths

    root, _ = _bundle(tmp_path)
    (root / "status" / "a\\b").write_text("x")
    (root / "status" / "c\nd").write_text("y")
    evidence.Bundle(root, {}).write_sums()
    lines = (root / "SHA256SUMS").read_bytes().split(b"\n")
    assert b"\\" + hashlib.sha256(b"y").hexdigest().encode() + b"  status/c\\nd" in lines  # one line, escaped
    assert any(x.endswith(b"  status/a\\\\b") and x.startswith(b"\\") for x in lines)
    if shutil.which("sha256sum"):  # GNU's own reader agrees with the format
        r = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=root, capture_output=True)
        assert r.returncode == 0, r.stdout + r.stderr
    listed, _ = paths.read_sums(root)
    assert "status/a\\b" in listed
    probs = evidence.verify(root)
    assert any("control character: status/c\\nd" in p for p in probs), probs
    assert not any("a\\\\b" in p and "control" in p for p in probs)
    assert all("\n" not in p for p in probs)


def test_storage_never_imports_presentation():
    """evidence/ (storage) imports neither the report, the analysis nor the exporters, not even inside
    a function: the bench hands its finalize steps to the bundle (issue 18)."""
    import ast
    from pathlib import Path

    pkg = Path(evidence.__file__).parent
    found = []
    for f in sorted(pkg.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) else [])
            found += [(f.name, n) for n in names if n.startswith(("capshim.report", "capshim.export", "capshim.bench"))
                      or n in ("capshim.report",)]
            if isinstance(node, ast.ImportFrom) and node.module == "capshim":
                found += [(f.name, a.name) for a in node.names if a.name in ("report", "export", "bench")]
    assert found == []


def test_finalize_runs_the_steps_it_is_handed(tmp_path):
    """The bundle writes what the bench's steps make; a failing one is recorded, the rest still written."""
    b = evidence.Bundle.create(tmp_path / "b", metadata={})

    def broken(_summary):
        raise RuntimeError("no")

    steps = [evidence.Step("made", "summary.json", lambda: {"arms": {}}),
             evidence.Step("results.csv", "results.csv", lambda s: "arm\n", slow=False),
             evidence.Step("report", "report.md", lambda s: f"# {sorted(s)}\n"),
             evidence.Step("chart", "chart.png", broken)]
    s = b.finalize(steps, interrupted=True)
    assert s["finalize_failures"] == [{"step": "chart", "error": "RuntimeError: no"}]
    assert (b.root / "results.csv").read_text() == "arm\n" and not (b.root / "chart.png").exists()
    md = (b.root / "report.md").read_text()
    assert md.startswith("# ['arms', 'interrupted']\n") and "Interrupted" in md and "- chart: RuntimeError: no" in md
    assert evidence.verify(b.root) == []


def _reseal(root):
    evidence.Bundle(root, {}).write_sums()


def test_verify_of_a_metadata_nested_100000_deep_is_a_problem_not_a_traceback(tmp_path):
    """issue 18: ``evidence verify`` on a bundle whose metadata.json is nested 100,000 deep (resealed)
    died with a RecursionError; the bounded reader refuses it, naming the file."""
    root = _sealed(tmp_path)
    (root / "metadata.json").write_text("[" * 100_000 + "]" * 100_000)
    _reseal(root)
    assert evidence.verify(root) == ["metadata.json: nested deeper than 64"]
    r = CliRunner().invoke(main, ["evidence", "verify", str(root)])
    assert r.exit_code == 1, r.exception
    assert "metadata.json: nested deeper than 64" in r.output


def test_verify_of_a_study_whose_study_json_is_nested_deep(tmp_path):
    """The same for a study folder: study.json nested 100,000 deep is named, exit 1."""
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "study.json").write_text("{\"a\":" * 100_000 + "1" + "}" * 100_000)
    evidence.Bundle(folder, {}).write_sums()
    r = CliRunner().invoke(main, ["evidence", "verify", str(folder)])
    assert r.exit_code == 1, r.exception
    assert "study.json: cannot read: nested deeper than 64" in r.output


def test_verify_names_a_401_digit_integer_in_metadata(tmp_path):
    root = _sealed(tmp_path)
    meta = json.loads((root / "metadata.json").read_text())
    text = json.dumps(meta).replace('"cpu_count": ', '"cpu_count": ' + "9" * 401 + ", \"was\": ", 1)
    (root / "metadata.json").write_text(text)
    _reseal(root)
    assert evidence.verify(root) == ["metadata.json: $.host.cpu_count: an integer of 401 digits (more than 20) "
                                     "is not a measurement"]


def test_a_summary_step_that_returns_no_summary_is_recorded(tmp_path):
    b = evidence.Bundle.create(tmp_path / "b", metadata={})
    s = b.finalize([evidence.Step("odd analysis", "summary.json", lambda: [1, 2]),
                    evidence.Step("fallback", "summary.json", lambda: {"arms": {}}, slow=False)])
    assert s["finalize_failures"] == [{"step": "odd analysis", "error": "returned list, not a summary"}]
    assert evidence.verify(b.root) == []


def test_full_disk_while_writing_the_chart_still_seals(tmp_path, monkeypatch):
    """Hostile pass: with 16 KB left, chart.png got ENOSPC and the bundle was left without SHA256SUMS."""
    _disk_full_when_writing(monkeypatch, "chart.png")
    root, summary = _bundle(tmp_path)
    assert [f["step"] for f in summary["finalize_failures"]] == ["chart"]
    assert "No space left" in summary["finalize_failures"][0]["error"]
    assert evidence.verify(root) == [] and not (root / "chart.png").exists()
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]
