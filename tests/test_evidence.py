"""Evidence bundles: written incrementally, finalized, verified, tampering detected."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest
from click.testing import CliRunner

from tests._report_paths import FIXTURES
from capshim import evidence
from capshim.bench import llamabench
from capshim.bench.attest import parse_path
from capshim.cli import main

CUA = FIXTURES / "cua"


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
    summary = b.finalize(records, arms, "stock", interrupted=interrupted)
    return b.root, summary


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
    assert r.exit_code == 0 and "ok" in r.output
    (root / "SHA256SUMS").unlink()
    r = CliRunner().invoke(main, ["evidence", "verify", str(root)])
    assert r.exit_code == 1 and "SHA256SUMS: missing" in r.output


def test_interrupted_with_nothing_finished_still_verifies(tmp_path):
    b = evidence.Bundle.create(tmp_path / "b")
    arms = {"native": {"state": "native", "runs": []}, "vm": {"state": "failed", "runs": [
        {"run": 1, "exit_code": None, "signal": "SIGINT", "timed_out": False}]}}
    s = b.finalize([], arms, "native", interrupted=True)
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
