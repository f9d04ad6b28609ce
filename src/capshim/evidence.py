"""Evidence bundles: write them as a bench runs, finalize them, verify them.

Layout (DESIGN.md section 3), one folder per bench run::

    metadata.json            host, OS, tool versions, SHA-256 of workload binary,
                             model, shim libraries, profiles; commands and
                             environment delta per arm; interrupted flag
    raw/<arm>-<n>.json       the workload's stdout of run n of an arm (as written)
    raw/<arm>-<n>.stderr     its stderr (never merged with stdout)
    status/<arm>-<n>.jsonl   the shim's status file of that run
    results.csv              one row per sample: arm,run,sample,test,tok_s,state
    summary.json             capshim.bench.analysis.analyze(...)
    report.md                the seed-style table (capshim.report)
    chart.png                median tok/s per test and arm, min–max whiskers
    SHA256SUMS               sha256sum format over every other file, written last

Use::

    b = Bundle.create(out_dir, metadata={...})
    b.write_run("native", 1, stdout=..., stderr=..., status_src=path_or_None)   # as runs finish
    ...
    summary = b.finalize(records, arms, baseline="native", host=None, interrupted=False)

``finalize`` may be called with whatever finished (on Ctrl-C or a crash): it
always writes a complete, verifiable bundle. ``verify(dir)`` lists problems;
``capshim evidence verify DIR`` prints them and exits 1.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import shutil
import sys
from pathlib import Path

from capshim.errors import CapshimError

__all__ = ["Bundle", "EvidenceError", "sha256_file", "verify", "host_metadata", "SUMS_NAME"]

SUMS_NAME = "SHA256SUMS"
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SUM_LINE = re.compile(r"^(?P<digest>[0-9a-fA-F]{64}) [ *](?P<name>.+)$")


class EvidenceError(CapshimError):
    """A bundle could not be written or read; names the file or arm (exit 2)."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes as 64 lowercase hex digits (for binaries, models, shims).

    Raises:
        EvidenceError: the file cannot be read (names it).
    """
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(chunk), b""):
                h.update(block)
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read to hash: {exc.strerror or exc}") from None
    return h.hexdigest()


def host_metadata() -> dict:
    """Facts about this machine and tool: host name, OS, CPU, Python, capshim version, UTC time."""
    from capshim import __version__

    return {
        "host": platform.node(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "capshim": __version__,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _as_bytes(data) -> bytes:
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    return str(data).encode("utf-8")


class Bundle:
    """One evidence bundle folder being written.

    Attributes:
        root: the bundle folder (Path).
        metadata: the dict written to metadata.json (update it, then call
            :meth:`write_metadata` or :meth:`finalize`).
    """

    def __init__(self, root: Path, metadata: dict):
        self.root = Path(root)
        self.metadata = metadata

    @classmethod
    def create(cls, root: str | Path, metadata: dict | None = None, *, exist_ok: bool = False) -> "Bundle":
        """Create the folder (and ``raw/``, ``status/``) and write a first metadata.json.

        Args:
            root: the bundle folder; must not exist or be empty unless ``exist_ok``.
            metadata: what is known at the start (commands, hashes ...); host facts
                from :func:`host_metadata` are added under ``"host"`` if absent.

        Raises:
            EvidenceError: the folder exists and is not empty, or cannot be created.
        """
        p = Path(root)
        if p.exists() and any(p.iterdir()) and not exist_ok:
            raise EvidenceError(f"{p}: bundle folder exists and is not empty; choose another --out")
        try:
            (p / "raw").mkdir(parents=True, exist_ok=True)
            (p / "status").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EvidenceError(f"{p}: cannot create bundle folder: {exc.strerror or exc}") from None
        meta = dict(metadata or {})
        meta.setdefault("host", host_metadata())
        meta.setdefault("bundle_format", "capshim-evidence/1")
        b = cls(p, meta)
        b.write_metadata()
        return b

    # --- paths the bench writes into -------------------------------------------------
    @staticmethod
    def _check_arm(arm: str) -> None:
        if not _ARM_NAME.match(arm or ""):
            raise EvidenceError(f"arm name {arm!r}: use letters, digits, '.', '_' and '-' "
                                "(it names files in the bundle)")

    def raw_json(self, arm: str, run: int) -> Path:
        """``raw/<arm>-<run>.json``: where the run's stdout goes."""
        self._check_arm(arm)
        return self.root / "raw" / f"{arm}-{int(run)}.json"

    def raw_stderr(self, arm: str, run: int) -> Path:
        """``raw/<arm>-<run>.stderr``: where the run's stderr goes."""
        self._check_arm(arm)
        return self.root / "raw" / f"{arm}-{int(run)}.stderr"

    def status_file(self, arm: str, run: int) -> Path:
        """``status/<arm>-<run>.jsonl``: pass it as ``CAPSHIM_STATUS_FILE`` so the shim writes it in place."""
        self._check_arm(arm)
        return self.root / "status" / f"{arm}-{int(run)}.jsonl"

    def write_run(self, arm: str, run: int, *, stdout=None, stderr=None,
                  status_src: str | Path | None = None) -> None:
        """Store one finished run: its stdout, stderr (str or bytes) and a copy of its status file.

        Files the caller already wrote in place (via :meth:`raw_json` etc.) are
        left alone when the argument is None.

        Raises:
            EvidenceError: bad arm name, or a file cannot be written/copied.
        """
        try:
            if stdout is not None:
                _atomic_write(self.raw_json(arm, run), _as_bytes(stdout))
            if stderr is not None:
                _atomic_write(self.raw_stderr(arm, run), _as_bytes(stderr))
            if status_src is not None and Path(status_src) != self.status_file(arm, run):
                if Path(status_src).exists():
                    shutil.copyfile(status_src, self.status_file(arm, run))
        except OSError as exc:
            raise EvidenceError(f"{self.root}: cannot store run {run} of arm {arm!r}: "
                                f"{exc.strerror or exc}") from None

    def write_metadata(self) -> None:
        """(Re)write metadata.json from :attr:`metadata`."""
        _atomic_write(self.root / "metadata.json",
                      (json.dumps(self.metadata, indent=2, sort_keys=True, default=str) + "\n").encode())

    # --- the end -------------------------------------------------------------------------
    def finalize(self, records: list[dict], arms: dict, baseline: str, host: dict | None = None, *,
                 interrupted: bool = False, metadata_update: dict | None = None,
                 title: str | None = None, annotate=None) -> dict:
        """Write results.csv, summary.json, report.md, chart.png, metadata.json and, last, SHA256SUMS.

        Args:
            records, arms, baseline, host: as for
                :func:`capshim.bench.analysis.analyze` (records of finished runs only).
            interrupted: the bench was stopped (Ctrl-C, crash); recorded in
                metadata.json and summary.json.
            metadata_update: merged into metadata.json.
            title: report heading.
            annotate: called with the summary right after the analysis, before anything is
                written; returns the summary (metric directions, control verdicts:
                :func:`capshim.bench.metrics.annotate`).

        Returns:
            The summary dict. With no records at all the summary has empty arms
            tests and the report says so; the bundle still verifies.

        Raises:
            AnalysisError: bad records/arms (see analyze); EvidenceError on write errors.
        """
        from capshim import report
        from capshim.bench.analysis import analyze

        if metadata_update:
            self.metadata.update(metadata_update)
        self.metadata["interrupted"] = bool(interrupted)
        self.metadata["finished_utc"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        summary = analyze(records, arms, baseline, host)
        if annotate is not None:
            summary = annotate(summary)
        summary["interrupted"] = bool(interrupted)
        states = {a: v.get("state") for a, v in arms.items()}
        try:
            self.write_metadata()
            with open(self.root / "results.csv", "w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow(["arm", "run", "sample", "test", "tok_s", "state"])
                for r in records:
                    w.writerow([r["arm"], r.get("run", ""), r.get("sample", ""), r["test"],
                                repr(float(r["tok_s"])), states.get(r["arm"], "")])
            _atomic_write(self.root / "summary.json",
                          (json.dumps(summary, indent=2) + "\n").encode())
            md = report.render_markdown([summary], title=title or "capshim bench")
            if interrupted:
                md += "\n**Interrupted:** this bundle holds only the runs that finished.\n"
            has_data = any(a["tests"] for a in summary["arms"].values())
            if has_data:
                report.draw_chart([summary], self.root / "chart.png", title=title)
                md += "\n![chart](chart.png)\n"
            _atomic_write(self.root / "report.md", md.encode())
            self.write_sums()
        except OSError as exc:
            raise EvidenceError(f"{self.root}: cannot write bundle: {exc.strerror or exc}") from None
        return summary

    def write_sums(self) -> Path:
        """Write SHA256SUMS over every other file (sorted, ``sha256sum -c`` format)."""
        lines = [f"{sha256_file(self.root / rel)}  {rel}" for rel in _bundle_files(self.root)]
        out = self.root / SUMS_NAME
        _atomic_write(out, ("\n".join(lines) + "\n").encode())
        return out


def _bundle_files(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in filenames:
            rel = Path(dirpath, f).relative_to(root).as_posix()
            if rel == SUMS_NAME:
                continue
            out.append(rel)
    return sorted(out)


def verify(root: str | Path) -> list[str]:
    """Check a bundle against its SHA256SUMS.

    Returns:
        Problems, one string each, starting with the file's path relative to
        the bundle: ``"<file>: checksum mismatch"``, ``"<file>: listed in
        SHA256SUMS but missing"``, ``"<file>: not listed in SHA256SUMS"``,
        ``"SHA256SUMS: line N is malformed"``, or ``"SHA256SUMS: missing"``.
        An empty list means every file matches.
    """
    p = Path(root)
    if not p.is_dir():
        return [f"{p}: not a folder"]
    sums = p / SUMS_NAME
    if not sums.is_file():
        return [f"{SUMS_NAME}: missing"]
    problems = []
    listed = set()
    for n, line in enumerate(sums.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        m = _SUM_LINE.match(line)
        if not m:
            problems.append(f"{SUMS_NAME}: line {n} is malformed")
            continue
        name = m.group("name")
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts:
            problems.append(f"{SUMS_NAME}: line {n} names a path outside the bundle: {name}")
            continue
        listed.add(rel.as_posix())
        f = p / rel
        if not f.is_file():
            problems.append(f"{name}: listed in {SUMS_NAME} but missing")
        elif sha256_file(f) != m.group("digest").lower():
            problems.append(f"{name}: checksum mismatch")
    for rel in _bundle_files(p):
        if rel not in listed:
            problems.append(f"{rel}: not listed in {SUMS_NAME}")
    return problems
