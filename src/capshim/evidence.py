"""Evidence bundles: write them as a bench runs, finalize them, verify them.

Layout (docs/evidence.md), one folder per bench run::

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

import contextlib
import errno
import datetime as _dt
import json
import math
import os
import platform
import re
import stat
import sys
from pathlib import Path

from capshim import paths
from capshim.contracts import names
from capshim.contracts.folders import unique_folder  # noqa: F401  (re-exported for callers)
from capshim.contracts.signals import SEAL_WAIT_S, SealGuard, StepInterrupted
from capshim.errors import CapshimError
from capshim.paths import SUMS_NAME, StorageError

__all__ = ["Bundle", "EvidenceError", "sha256_file", "verify", "check_seal", "require_verified", "REQUIRED_FILES", "host_metadata", "unique_folder", "strict_json",
           "finite_or_null", "SUMS_NAME", "SEAL_WAIT_S", "seal_guard", "StepInterrupted", "STATUS_COPY_LIMIT"]

"""Seconds a second Ctrl-C / SIGTERM during finalize waits for the seal before it stops capshim anyway."""


class EvidenceError(CapshimError):
    """A bundle could not be written or read; names the file or arm (exit 2)."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes as 64 lowercase hex digits (for binaries, models, shims).

    Raises:
        EvidenceError: the file cannot be read (names it).
    """
    try:
        return paths.sha256_file(path, chunk)
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read to hash: {exc.strerror or exc}") from None


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


_atomic_write = paths.atomic_write


def strict_json(value) -> bytes:
    """``value`` as strict JSON (RFC 8259: no NaN or Infinity), indented, with a final newline.

    Raises:
        ValueError: a float is NaN or infinite (names its JSON path).
    """
    bad = _nonfinite_path(value, "$")
    if bad:
        raise ValueError(f"{bad}: not a finite number (JSON has no NaN or Infinity)")
    return (json.dumps(value, indent=2, sort_keys=False, default=str, allow_nan=False) + "\n").encode()


def _nonfinite_path(value, where: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return where
    if isinstance(value, dict):
        for k, v in value.items():
            hit = _nonfinite_path(v, f"{where}.{k}")
            if hit:
                return hit
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            hit = _nonfinite_path(v, f"{where}[{i}]")
            if hit:
                return hit
    return None


def _write_error(exc: OSError, what: str) -> CapshimError:
    """The error for a failed write: StorageError (exit 4) for a full disk or quota, else EvidenceError (exit 2)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StorageError(f"{what}: {exc.strerror}")
    return EvidenceError(f"{what}: {exc.strerror or exc}")


def finite_or_null(value):
    """A copy of a JSON-ready value with every NaN or infinite float replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


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
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            raise EvidenceError(f"{p}: exists and is not a folder; --out must name a new or empty folder")
        if p.exists() and any(p.iterdir()) and not exist_ok:
            raise EvidenceError(f"{p}: bundle folder exists and is not empty; choose another --out")
        try:
            (p / "raw").mkdir(parents=True, exist_ok=True)
            (p / "status").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _write_error(exc, f"{p}: cannot create bundle folder") from None
        meta = dict(metadata or {})
        meta.setdefault("host", host_metadata())
        meta.setdefault("bundle_format", "capshim-evidence/1")
        b = cls(p, meta)
        b.write_metadata()
        return b

    # --- paths the bench writes into -------------------------------------------------
    @staticmethod
    def _check_arm(arm: str) -> None:
        if not names.is_run_label(arm):
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
        """``status/<arm>-<run>.jsonl``: where :meth:`write_run` keeps the copy of a run's status file.

        Never hand this path to the workload (``CAPSHIM_STATUS_FILE``): a
        workload could then plant files in the bundle. The runner gives it a
        file in its private work folder and copies it here after the run.
        """
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
                data = _read_status_copy(Path(status_src))
                if data is not None:
                    _atomic_write(self.status_file(arm, run), data)
        except OSError as exc:
            raise _write_error(exc, f"{self.root}: cannot store run {run} of arm {arm!r}") from None

    def write_metadata(self) -> None:
        """(Re)write metadata.json from :attr:`metadata` as strict JSON (no NaN/Infinity).

        A non-finite number is written as null and named under ``"nonfinite"``.

        Raises:
            StorageError: the disk is full (exit 4). OSError: other write errors.
        """
        meta = json.loads(json.dumps(self.metadata, default=str))
        bad = _nonfinite_path(meta, "$")
        if bad:
            meta = finite_or_null(meta)
            meta["nonfinite"] = f"{bad} was not a finite number; written as null"
        _atomic_write(self.root / "metadata.json",
                      (json.dumps(meta, indent=2, sort_keys=True, allow_nan=False) + "\n").encode())

    # --- the end -------------------------------------------------------------------------
    def finalize(self, records: list[dict], arms: dict, baseline: str, host: dict | None = None, *,
                 interrupted: bool = False, metadata_update: dict | None = None,
                 title: str | None = None, summary: dict | None = None) -> dict:
        """Write results.csv, summary.json, report.md, chart.png, metadata.json and, last, SHA256SUMS.

        Sealed no matter what: each step that can fail (the analysis, the host
        baseline, the report, the chart) runs isolated; its failure is recorded
        as ``{"step", "error"}`` under ``"finalize_failures"`` in metadata.json
        and summary.json, and the data and SHA256SUMS are still written. A
        Ctrl-C / SIGTERM during finalize waits up to :data:`SEAL_WAIT_S`
        seconds for the seal (and says so on stderr); after the seal capshim
        then exits 128+signal.

        Args:
            records, arms, baseline, host: as for
                :func:`capshim.bench.analysis.analyze` (records of finished runs only).
            interrupted: the bench was stopped (Ctrl-C, crash); recorded in
                metadata.json and summary.json.
            metadata_update: merged into metadata.json.
            title: report heading.
            summary: the analysis already made by the caller (the runner's
                pipeline: runner -> analysis -> exporters -> bundle); analysed
                here from ``records`` when None.

        Returns:
            The summary dict (with ``"finalize_failures"`` when a step failed).
            With no records at all the summary has empty arms tests and the
            report says so; the bundle still verifies.

        Raises:
            StorageError: the disk is full (exit 4); no partial file is left.
            EvidenceError: other write errors.
        """
        cm = SealGuard()
        with cm as guard:
            try:
                summary = self._finalize(records, arms, baseline, host, interrupted, metadata_update, title,
                                         summary, guard)
            except OSError as exc:
                raise _write_error(exc, f"{self.root}: cannot write bundle") from None
        cm.exit_if_signalled()
        return summary

    def _finalize(self, records, arms, baseline, host, interrupted, metadata_update, title, summary,
                  guard: SealGuard) -> dict:
        failures: list[dict] = []

        def step(name, fn, slow=True):
            try:
                if not slow:
                    return fn()
                with guard.abortable():
                    return fn()
            except StepInterrupted as stop:
                failures.append({"step": name, "error": f"skipped: interrupted by {stop.signal_name}"})
                print(f"capshim: finalize: {name} skipped ({stop.signal_name}); the data are still sealed",
                      file=sys.stderr, flush=True)
                return None
            except (StorageError, KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - isolated on purpose: the bundle must still be sealed
                failures.append({"step": name, "error": f"{type(exc).__name__}: {exc}"[:2000]})
                print(f"capshim: finalize: {name} failed ({type(exc).__name__}: {exc}); "
                      "recorded in the bundle, the data are still sealed", file=sys.stderr)
                return None

        def analyze(host_arg):
            from capshim.bench.analysis import analyze as _analyze

            return _analyze(records, arms, baseline, host_arg)

        if summary is None:
            summary = step("analysis", lambda: analyze(host))
        if summary is None and host is not None and not guard.abort:
            summary = step("analysis without the host baseline", lambda: analyze(None))
            if summary is not None:
                failures[0]["step"] = "host baseline"
        if summary is None:
            summary = {"schema": "capshim-summary/1", "baseline": baseline, "tests": [], "host": None,
                       "arms": {a: {"state": (v or {}).get("state"), "tests": {}} for a, v in arms.items()}}
        summary["interrupted"] = bool(interrupted)
        if metadata_update:
            self.metadata.update(metadata_update)
        self.metadata["interrupted"] = bool(interrupted)
        self.metadata["finished_utc"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        states = {a: (v or {}).get("state") for a, v in arms.items()}
        def results_csv():
            from capshim.export import csv as csv_export

            _atomic_write(self.root / "results.csv", csv_export.serialize_records(records, states).encode())

        step("results.csv", results_csv, slow=False)  # the data: never skipped
        data = step("summary.json", lambda: strict_json(summary), slow=False)
        if data is None:
            data = strict_json(finite_or_null(summary))
        _atomic_write(self.root / "summary.json", data)

        def markdown():
            from capshim import report

            return report.render_markdown([summary], title=title or "capshim bench")

        md = step("report", markdown)
        md = md if md is not None else f"# {title or 'capshim bench'}\n\nThe report could not be rendered; " \
                                       "see finalize_failures in metadata.json.\n"
        if interrupted:
            md += "\n**Interrupted:** this bundle holds only the runs that finished.\n"
        has_data = any((a or {}).get("tests") for a in summary.get("arms", {}).values())
        if has_data:
            def chart():
                from capshim import report

                report.draw_chart([summary], self.root / "chart.png", title=title)

            if step("chart", chart) is None and any(f["step"] == "chart" for f in failures):
                with contextlib.suppress(OSError):  # a chart cut short is no chart
                    (self.root / "chart.png").unlink()
            if (self.root / "chart.png").is_file():
                md += "\n![chart](chart.png)\n"
        if failures:
            md += "\n**Finalize failures** (the data above are complete and checksummed):\n\n" + "".join(
                f"- {f['step']}: {f['error']}\n" for f in failures)
            summary["finalize_failures"] = failures
            self.metadata["finalize_failures"] = failures
            _atomic_write(self.root / "summary.json", strict_json(finite_or_null(summary)))
        _atomic_write(self.root / "report.md", md.encode())
        self.write_metadata()
        self.write_sums()
        return summary

    def write_sums(self) -> Path:
        """Write SHA256SUMS over every other file (sorted, ``sha256sum -c`` format)."""
        return paths.write_sums(self.root, _bundle_files(self.root))


STATUS_COPY_LIMIT = 64 << 20
"""At most this many bytes of a run's status file are copied into the bundle (the rest is cut)."""


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


MAX_DEPTH = 8
"""Folder depth below a bundle's root that capshim walks (bundles use 1: raw/, status/)."""


def _walk(root: Path, skip: frozenset[str] = frozenset(), unlisted: list[tuple[str, str]] | None = None):
    """``(dirpath, dirnames, filenames, depth)`` below ``root``, iteratively (no recursion limit),
    folders deeper than :data:`MAX_DEPTH` not entered; links (also to folders) are file names.
    ``skip``: names of real folders directly in ``root`` left out (a study's nested bundles).
    A folder that cannot be listed (e.g. mode 0311 for a user who is not its owner: its files
    still open by path, but unlisted ones would stay unseen) is appended to ``unlisted`` as
    ``(dirpath, reason)``, never silently passed over."""
    stack = [(str(root), 0)]
    while stack:
        d, depth = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if unlisted is not None:
                unlisted.append((d, exc.strerror or str(exc)))
            continue
        dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)
                and not (depth == 0 and e.name in skip)]
        files = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
        yield d, dirs, files, depth
        if depth < MAX_DEPTH:
            stack.extend((os.path.join(d, x), depth + 1) for x in reversed(dirs))


def _bundle_files(root: Path, skip: frozenset[str] = frozenset()) -> list[str]:
    """Relative paths of the regular files of a bundle (links and special files are not followed)."""
    out = []
    for dirpath, dirnames, filenames, _depth in _walk(root, skip):
        for f in filenames:
            full = os.path.join(dirpath, f)
            rel = Path(full).relative_to(root).as_posix()
            if rel == SUMS_NAME or not stat.S_ISREG(os.lstat(full).st_mode):
                continue
            out.append(rel)
    return sorted(out)


def _foreign_entries(root: Path, skip: frozenset[str] = frozenset(), noun: str = "bundle") -> list[str]:
    """Entries that make a bundle not self-contained: links (anywhere) and anything but files and folders."""
    problems = []
    unlisted: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames, depth in _walk(root, skip, unlisted):
        if depth == MAX_DEPTH and dirnames:
            rel = paths.show_name(Path(dirpath).relative_to(root).as_posix())
            problems.append(f"{rel}: folders nested deeper than {MAX_DEPTH} levels (not a {noun}'s layout)")
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = paths.show_name(Path(full).relative_to(root).as_posix())
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                problems.append(f"{rel}: is a link (a {noun} holds only its own files and folders)")
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                problems.append(f"{rel}: is not a regular file or folder")
    for d, why in unlisted:
        rel = paths.show_name(Path(d).relative_to(root).as_posix())
        problems.append(f"{rel}: cannot list this folder ({why}): files in it could not be checked")
    return problems


REQUIRED_FILES = ("metadata.json", "summary.json")
"""Files every bundle lists in its SHA256SUMS: an empty SHA256SUMS over an empty folder is no bundle."""


def _recorded_runs(p: Path, listed: dict[str, str]) -> set[str]:
    """Labels ``<arm>-<run>`` / ``<arm>+<control>-<run>`` (``<arm>.<control>-<run>`` in bundles sealed
    before) of the runs metadata.json and summary.json record.

    Only files listed in SHA256SUMS are read (an unlisted one is a problem of its own);
    files that cannot be read or have another shape give no runs here.
    """
    labels: set[str] = set()
    for name, kinds in (("metadata.json", ("runs", "control_runs")), ("summary.json", ("runs",))):
        if name not in listed:
            continue
        try:
            doc = json.loads(paths.read_limited(p / name, 64 << 20))
        except (OSError, ValueError):
            continue
        arms = doc.get("arms") if isinstance(doc, dict) else None
        if not isinstance(arms, dict):
            continue
        for arm, body in arms.items():
            if not isinstance(body, dict):
                continue
            for kind in kinds:
                runs = body.get(kind)
                for r in runs if isinstance(runs, list) else []:
                    if not isinstance(r, dict) or not isinstance(r.get("run"), int) or isinstance(r["run"], bool):
                        continue
                    control = r.get("control") if kind == "control_runs" else None
                    if kind == "control_runs" and not isinstance(control, str):
                        continue
                    if not names.is_run_label(names.run_label(arm, control)):
                        continue
                    label = names.run_stem(arm, r["run"], control)
                    if control and f"raw/{label}.json" not in listed:  # sealed before ARM+CONTROL-N
                        label = f"{arm}.{control}-{r['run']}"
                    labels.add(label)
    return labels


def _missing_raw(p: Path, listed: dict[str, str]) -> list[str]:
    """Problems for recorded runs whose ``raw/`` stdout or stderr is not listed in SHA256SUMS."""
    problems = []
    for label in sorted(_recorded_runs(p, listed)):
        for ext in ("json", "stderr"):
            rel = f"raw/{label}.{ext}"
            if rel not in listed:
                problems.append(f"{rel}: run {label} is recorded in metadata.json/summary.json but its "
                                f"file is not listed in {SUMS_NAME}")
    return problems


LAYOUT_FILES = frozenset({"metadata.json", "summary.json", "results.csv", "report.md", "chart.png"})
"""The files capshim writes at a bundle's top level (besides SHA256SUMS)."""

_RUN_FILE = re.compile(r"(?:raw/(?P<raw>[^/]+)\.(?:json|stderr)|status/(?P<status>[^/]+)\.jsonl)")


def _outside_layout(p: Path, listed: dict[str, str]) -> list[str]:
    """Listed files that are not part of a bundle's layout: only :data:`LAYOUT_FILES`,
    ``raw/<run>.json|.stderr`` and ``status/<run>.jsonl`` of a run that metadata.json or
    summary.json records. A file planted during the run and sealed with the rest shows here."""
    runs = _recorded_runs(p, listed)
    problems = []
    for rel in sorted(listed):
        if rel in LAYOUT_FILES:
            continue
        m = _RUN_FILE.fullmatch(rel)
        label = m and (m.group("raw") or m.group("status"))
        if not label or (runs and label not in runs):
            problems.append(f"{paths.show_name(rel)}: not part of a bundle's layout (capshim writes no such "
                            "file: it may have been planted during the run)")
    return problems


def require_verified(root: str | Path, what: str) -> Path:
    """Refuse a bundle folder read as input unless :func:`verify` finds no problem.

    Args:
        root: the bundle folder.
        what: how the user named it, for the message (``"--host-baseline"``,
            ``"report"``, ``"--host"``).

    Returns:
        ``root`` as a Path.

    Raises:
        EvidenceError (exit 2): the bundle does not verify; names the folder,
            the flag and each problem (at most 20).
    """
    p = Path(root)
    problems = verify(p)
    if problems and not (p / "summary.json").exists():
        problems.insert(0, "summary.json: missing (not an evidence bundle)")
    if problems:
        shown = "; ".join(problems[:20]) + (f"; ... {len(problems) - 20} more" if len(problems) > 20 else "")
        raise EvidenceError(f"{what} {p}: the bundle does not verify (capshim evidence verify {p}): {shown}")
    return p


def check_seal(p: Path, skip: frozenset[str] = frozenset(), noun: str = "bundle") -> tuple[list[str], dict | None]:
    """The checks every sealed folder gets (a bundle, a study's top level): its SHA256SUMS, each listed
    file (there, a regular file of the folder with one link, the same bytes), no unlisted regular file,
    no link or special file anywhere. ``skip``: folders directly in ``p`` left to their own seal.

    Returns:
        ``(problems, listed)``; ``listed`` ({relative path: digest}) is None when SHA256SUMS is missing
        or unreadable (the problems say so and nothing more can be checked).
    """
    if not p.is_dir():
        return [f"{p}: not a folder"], None
    base = p.resolve()
    sums_path = p / SUMS_NAME
    if not sums_path.exists() and not sums_path.is_symlink():
        return [f"{SUMS_NAME}: missing"], None
    problems = _foreign_entries(p, skip, noun)
    if sums_path.is_symlink() or not sums_path.is_file():
        return problems or [f"{SUMS_NAME}: not a regular file"], None
    try:
        listed, bad_lines = paths.read_sums(p)
    except OSError as exc:
        return problems + [f"{SUMS_NAME}: cannot read: {exc.strerror or exc}"], None
    problems += bad_lines
    for rel, digest in listed.items():
        f = p / rel
        try:
            mode = os.lstat(f).st_mode
        except OSError:
            problems.append(f"{rel}: listed in {SUMS_NAME} but missing")
            continue
        if not f.resolve().is_relative_to(base):
            problems.append(f"{rel}: resolves outside the {noun}")
        elif stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
            problems.append(f"{rel}: listed in {SUMS_NAME} but not a regular file of the {noun}")
        elif os.lstat(f).st_nlink > 1:
            problems.append(f"{rel}: has {os.lstat(f).st_nlink} hard links (a file of a {noun} has one; "
                            f"another name could be a file outside the {noun})")
        elif sha256_file(f) != digest:
            problems.append(f"{rel}: checksum mismatch")
    for rel in _bundle_files(p, skip):
        if rel not in listed:
            problems.append(f"{paths.show_name(rel)}: not listed in {SUMS_NAME}")
    return problems, listed


def verify(root: str | Path) -> list[str]:
    """Check a bundle against its SHA256SUMS; only the folder's own regular files count.

    Returns:
        Problems, one string each, starting with the file's path relative to
        the bundle: ``"<file>: checksum mismatch"``, ``"<file>: listed in
        SHA256SUMS but missing"``, ``"<file>: not listed in SHA256SUMS"``,
        ``"<entry>: is a link ..."``, ``"<entry>: is not a regular file or
        folder"``, ``"<file>: resolves outside the bundle"``,
        ``"SHA256SUMS: line N is malformed"`` or ``"... names a path outside
        the folder"``, ``"SHA256SUMS: line N lists X again"`` (a duplicate
        line), ``"... names a file with a control character"``, ``"<file>:
        has N hard links"``, ``"metadata.json: not listed ..."`` (a bundle
        lists metadata.json and summary.json at least), ``"raw/<arm>-<n>.json:
        run ... is recorded ... but its file is not listed"`` (every run that
        metadata.json or summary.json records has its stdout and stderr),
        ``"metadata.json: $.path: ..."`` (its shape, see
        :data:`capshim.jsonread.METADATA_SCHEMA`), or ``"SHA256SUMS:
        missing"``. An empty list means every file matches.
    """
    p = Path(root)
    problems, listed = check_seal(p)
    if listed is None:
        return problems
    for rel in REQUIRED_FILES:
        if rel not in listed:
            problems.append(f"{rel}: not listed in {SUMS_NAME} (every bundle has it)")
    problems += _missing_raw(p, listed)
    problems += _outside_layout(p, listed)
    if "metadata.json" in listed and not any(x.startswith("metadata.json:") for x in problems):
        from capshim import jsonread

        try:
            jsonread.load_metadata(p)
        except jsonread.JsonShapeError as exc:
            problems.append("metadata.json:" + str(exc).split("metadata.json:", 1)[-1])
    return list(dict.fromkeys(problems))
