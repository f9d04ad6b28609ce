"""A bundle being written: its folder, the files of each run as runs finish, metadata.json, the end.

Layout (docs/evidence.md), one folder per bench run::

    metadata.json            host, OS, tool versions, SHA-256 of workload binary,
                             model, shim libraries, profiles; commands and
                             environment delta per arm; interrupted flag
    raw/<arm>-<n>.json       the workload's stdout of run n of an arm (as written), when it is JSON;
    raw/<arm>-<n>.txt        ... when it is not (files.stdout_suffix; older bundles: always .json)
    raw/<arm>-<n>.stderr     its stderr (never merged with stdout)
    status/<arm>-<n>.jsonl   the shim's status file of that run
    results.csv              one row per sample (a finalize step of the bench)
    summary.json             the bench's summary (strict JSON)
    report.md                the bench's report, with the bundle's notes
    chart.png                the bench's chart (a finalize step)
    SHA256SUMS               sha256sum format over every other file, written last
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from capshim import paths
from capshim.contracts.signals import SealGuard
from capshim.evidence import finalize as _finalize
from capshim.evidence.files import EvidenceError, finite_or_null, host_metadata, is_run_label, nonfinite_path, \
    stdout_suffix, write_error
from capshim.evidence.finalize import Step
from capshim.evidence.seal import write_sums

__all__ = ["Bundle", "STATUS_COPY_LIMIT", "seal_guard"]

STATUS_COPY_LIMIT = 64 << 20
"""At most this many bytes of a run's status file are copied into the bundle (the rest is cut)."""


def _as_bytes(data) -> bytes:
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    return str(data).encode("utf-8")


class Bundle:
    """One evidence bundle folder being written.

    Use::

        b = Bundle.create(out_dir, metadata={...})
        b.write_run("native", 1, stdout=..., stderr=..., status_src=path_or_None)   # as runs finish
        summary = b.finalize(steps, summary=None, interrupted=False)

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
            EvidenceError: the folder exists and is not empty, or cannot be created (exit 2).
            StorageError: the disk is full (exit 4), names the folder.
        """
        p = Path(root)
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            raise EvidenceError(f"{p}: exists and is not a folder; --out must name a new or empty folder")
        if p.exists() and any(p.iterdir()) and not exist_ok:
            raise EvidenceError(f"{p}: bundle folder exists and is not empty; choose another --out")
        try:
            (p / "raw").mkdir(parents=True, exist_ok=True)
            (p / "status").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_error(exc, f"{p}: cannot create bundle folder") from None
        meta = dict(metadata or {})
        meta.setdefault("host", host_metadata())
        meta.setdefault("bundle_format", "capshim-evidence/1")
        b = cls(p, meta)
        b.write_metadata()
        return b

    # --- paths the bench writes into -------------------------------------------------
    @staticmethod
    def _check_arm(arm: str) -> None:
        if not is_run_label(arm):
            raise EvidenceError(f"arm name {arm!r}: use letters, digits, '.', '_' and '-' "
                                "(it names files in the bundle)")

    def raw_json(self, arm: str, run: int) -> Path:
        """``raw/<arm>-<run>.json``: where the run's stdout goes.

        Raises:
            EvidenceError: ``arm`` cannot name a file (:func:`~capshim.evidence.files.is_run_label`).
        """
        self._check_arm(arm)
        return self.root / "raw" / f"{arm}-{int(run)}.json"

    def raw_stdout(self, arm: str, run: int, data: bytes) -> Path:
        """``raw/<arm>-<run>.json`` when ``data`` (the run's stdout) is JSON, ``raw/<arm>-<run>.txt``
        otherwise (:func:`~capshim.evidence.files.stdout_suffix`): where that stdout goes.

        Raises:
            EvidenceError: ``arm`` cannot name a file.
        """
        return self.raw_json(arm, run).with_suffix(stdout_suffix(data))

    def raw_stderr(self, arm: str, run: int) -> Path:
        """``raw/<arm>-<run>.stderr``: where the run's stderr goes.

        Raises:
            EvidenceError: ``arm`` cannot name a file.
        """
        self._check_arm(arm)
        return self.root / "raw" / f"{arm}-{int(run)}.stderr"

    def status_file(self, arm: str, run: int) -> Path:
        """``status/<arm>-<run>.jsonl``: where :meth:`write_run` keeps the copy of a run's status file.

        Never hand this path to the workload (``CAPSHIM_STATUS_FILE``): a
        workload could then plant files in the bundle. The runner gives it a
        file in its private work folder and copies it here after the run.

        Raises:
            EvidenceError: ``arm`` cannot name a file.
        """
        self._check_arm(arm)
        return self.root / "status" / f"{arm}-{int(run)}.jsonl"

    def write_run(self, arm: str, run: int, *, stdout=None, stderr=None,
                  status_src: str | Path | None = None) -> None:
        """Store one finished run: its stdout, stderr (str or bytes) and a copy of its status file.

        Files the caller already wrote in place (via :meth:`raw_stdout` etc.) are
        left alone when the argument is None.

        Raises:
            EvidenceError: bad arm name, or a file cannot be written/copied (exit 2).
            StorageError: the disk is full (exit 4).
        """
        try:
            if stdout is not None:
                data = _as_bytes(stdout)
                paths.atomic_write(self.raw_stdout(arm, run, data), data)
            if stderr is not None:
                paths.atomic_write(self.raw_stderr(arm, run), _as_bytes(stderr))
            if status_src is not None and Path(status_src) != self.status_file(arm, run):
                data = _read_status_copy(Path(status_src))
                if data is not None:
                    paths.atomic_write(self.status_file(arm, run), data)
        except OSError as exc:
            raise write_error(exc, f"{self.root}: cannot store run {run} of arm {arm!r}") from None

    def write_metadata(self) -> None:
        """(Re)write metadata.json from :attr:`metadata` as strict JSON (no NaN/Infinity).

        A non-finite number is written as null and named under ``"nonfinite"``.

        Raises:
            StorageError: the disk is full (exit 4). OSError: other write errors.
        """
        meta = json.loads(json.dumps(self.metadata, default=str))
        bad = nonfinite_path(meta, "$")
        if bad:
            meta = finite_or_null(meta)
            meta["nonfinite"] = f"{bad} was not a finite number; written as null"
        paths.atomic_write(self.root / "metadata.json",
                           (json.dumps(meta, indent=2, sort_keys=True, allow_nan=False) + "\n").encode())

    def write_sums(self) -> Path:
        """Write SHA256SUMS over every other file (sorted, ``sha256sum -c`` format); returns its path.

        Raises:
            StorageError: the disk is full (exit 4). OSError: a file cannot be read or written.
        """
        return write_sums(self.root)

    # --- the end -------------------------------------------------------------------------
    def finalize(self, steps: list[Step], *, summary: dict | None = None, interrupted: bool = False,
                 metadata_update: dict | None = None, title: str | None = None) -> dict:
        """Run the bench's finalize steps, then write summary.json, report.md, metadata.json and, last, SHA256SUMS.

        Sealed no matter what: each step runs isolated (:mod:`capshim.evidence.finalize`);
        its failure is recorded as ``{"step", "error"}`` under ``"finalize_failures"``
        in metadata.json and summary.json, and the data and SHA256SUMS are still
        written. A Ctrl-C / SIGTERM during finalize waits up to
        :data:`~capshim.contracts.signals.SEAL_WAIT_S` seconds for the slow steps
        (and says so on stderr); after the seal capshim then exits 128+signal.

        Args:
            steps: the bench's steps (:func:`capshim.bench.summarize.steps`): the ones for
                summary.json make the summary when ``summary`` is None; the others make
                results.csv, report.md, chart.png from it.
            summary: the summary the caller already made, or None.
            interrupted: the bench was stopped (Ctrl-C, crash); recorded in
                metadata.json and summary.json.
            metadata_update: merged into metadata.json.
            title: the heading of report.md when its step fails.

        Returns:
            The summary dict (with ``"finalize_failures"`` when a step failed;
            ``{}`` plus the flags when no summary step returned one).

        Raises:
            StorageError: the disk is full (exit 4); no partial file is left.
            EvidenceError: other write errors (exit 2).
        """
        cm = SealGuard()
        with cm as guard:
            try:
                summary = _finalize.run(self, list(steps), summary, guard, interrupted=interrupted,
                                        metadata_update=metadata_update, title=title)
            except OSError as exc:
                raise write_error(exc, f"{self.root}: cannot write bundle") from None
        cm.exit_if_signalled()
        return summary


def _read_status_copy(src: Path) -> bytes | None:
    """The bytes of a run's status file to keep, or None when there is none to keep.

    Only a regular file is copied, never a link (``O_NOFOLLOW``), a FIFO or a
    device, and at most :data:`STATUS_COPY_LIMIT` bytes of it: the workload
    could write that file.
    """
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError:  # missing (the shim never wrote), a link (ELOOP), unreadable
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, total = [], 0
        while total < STATUS_COPY_LIMIT:
            block = os.read(fd, min(1 << 20, STATUS_COPY_LIMIT - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def seal_guard(what: str = "the bundle") -> SealGuard:
    """A context manager that holds Ctrl-C / SIGTERM / SIGHUP until a bundle is sealed (see :class:`SealGuard`)."""
    return SealGuard(what)
