"""Read an evidence bundle (or llama-bench files made elsewhere) into one typed record.

This module is the only place in :mod:`capshim.db` that knows the layout of a
bundle (``metadata.json``, ``results.csv``, ``summary.json``, ``raw/*.json``;
see :mod:`capshim.evidence`) and the shape of ``summary.json`` (see
:func:`capshim.bench.analysis.analyze`). When those change, adapt
:func:`read_bundle` and :func:`read_external` here; the store and the queries
only see :class:`BundleRecord`.

A bundle is verified first (:func:`capshim.evidence.verify`); one that does not
verify is refused. Its key (:func:`bundle_key`) is the SHA-256 of what its
``SHA256SUMS`` says, not of how the file is formatted, so the same bundle,
wherever it lies, has the same key.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from capshim.contracts.pasteable import command as pasteable
from capshim import evidence, jsonread, paths
from capshim import summary as summary_contract
from capshim.bench import llamabench
from capshim.bench.analysis import analyze, arms_from_files, host_from_file
from capshim.contracts import numbers
from capshim.contracts.names import device_label
from capshim.errors import CapshimError
from capshim.evidence import signing, study
from capshim.evidence.files import ATTESTATION_FILE

__all__ = ["BundleRecord", "ArmRecord", "IngestError", "bundle_key", "read_bundle", "read_folder", "read_external"]

class IngestError(CapshimError):
    """A bundle or file cannot be stored: it does not verify, or cannot be read; names it (exit 2)."""


@dataclass
class ArmRecord:
    """One arm of a stored bench.

    Attributes:
        name: arm name.
        state: the arm's state (:data:`capshim.bench.analysis.STATES`).
        profile_name, profile_sha256: the profile it ran with (None for none).
        simulate_name, simulate_sha256: the simulated-device profile (None for none).
        spec: the arm's spec as the summary records it.
        runs: ``[{"run": int, "exit_code", "signal", "timed_out", ...}]``.
        results: ``{test: {"n", "median", "min", "max", "speedup", "speedup_lo",
            "speedup_hi", "pct_of_host", "pct_lo", "pct_hi"}}`` as the bundle's
            summary gives them (tok/s, plain ratios, percent; None where absent).
    """

    name: str
    state: str
    profile_name: str | None = None
    profile_sha256: str | None = None
    simulate_name: str | None = None
    simulate_sha256: str | None = None
    spec: dict = field(default_factory=dict)
    runs: list = field(default_factory=list)
    results: dict = field(default_factory=dict)


@dataclass
class BundleRecord:
    """Everything the store keeps of one bundle (or one set of external files).

    Attributes:
        key: the bundle's :func:`bundle_key` (64 hex); for external
            files, of a manifest of their own SHA-256s and arm names.
        kind: ``"bundle"`` or ``"external"``.
        name: the folder's name (or the arm names of external files).
        source: the path it was read from.
        created_utc: when the bench started (``YYYY-MM-DDTHH:MM:SSZ``), or None.
        host, os, device, driver: facts of the machine (None when unknown).
        workload_build, workload_commit: llama.cpp build number and commit as
            llama-bench reports them (``build_number``, ``build_commit``).
        workload_sha256: SHA-256 of the workload binary, when recorded.
        model, model_sha256: model type (llama-bench ``model_type``) and file hash.
        config: the bench's configuration (:func:`capshim.bench.llamabench.bench_config` of the raw rows).
        settings: bench settings (``metadata.json`` ``method``) and the command line.
        capshim_version, baseline, host_name: as recorded.
        arms: ``[ArmRecord]`` in display order.
        samples: ``[{"role": "arm"|"host", "arm", "run", "sample", "test",
            "tok_s", "extra": dict}]``; host samples carry role ``"host"``.
        host_source: where the host baseline came from (None: an arm of this bench).
        metadata: ``metadata.json`` as read ({} for external files).
        summary: ``summary.json`` as read (the summary dict).
        signed_by: the folder's good signatures (:func:`signed_by`): ``[{"key", "key_type",
            "principal", "signed_utc"}]``; a study's nested bundle carries the study's.
    """

    key: str
    kind: str
    name: str
    source: str
    created_utc: str | None = None
    host: str | None = None
    os: str | None = None
    device: str | None = None
    driver: str | None = None
    workload_build: str | None = None
    workload_commit: str | None = None
    workload_sha256: str | None = None
    model: str | None = None
    model_sha256: str | None = None
    config: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    capshim_version: str | None = None
    baseline: str | None = None
    host_name: str | None = None
    host_source: str | None = None
    arms: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    signed_by: list = field(default_factory=list)


def _obj(v) -> dict:
    """``v`` when it is a JSON object, else {} (free-form metadata keys may hold anything)."""
    return v if isinstance(v, dict) else {}


def _str(v) -> str | None:
    return None if v is None or v == "" else str(v)


def _raw_facts(rows: list) -> dict:
    """Workload build, device and config from llama-bench rows (the first that has each key)."""
    out: dict = {"config": llamabench.bench_config(rows)}
    for row in rows:
        if not isinstance(row, dict):
            continue
        for key in ("build_commit", "build_number", "gpu_info", "model_type"):
            if key in row and key not in out:
                out[key] = row[key]
    return out


def _raw_rows(files: list[Path]) -> list:
    rows = []
    for f in files:
        try:
            rows += list(llamabench.load_file(f))
        except CapshimError:
            continue  # a failed run's stdout; the summary already records it
    return rows


def _num(v, where: str) -> float | None:
    """A figure of summary.json for a database column: None, or a finite float (a 401-digit
    integer is refused, not overflowed). Raises UsageError naming ``where`` (exit 2)."""
    return None if v is None else numbers.finite(v, where)


def _results_of(source: str, name: str, arm_summary: dict) -> dict:
    """``{test: {"n", "median", "min", "max", "speedup", "speedup_lo", "speedup_hi", "pct_of_host",
    "pct_lo", "pct_hi"}}`` of one arm of a summary that passed the summary contract."""
    out = {}
    for test, st in (arm_summary.get("tests") or {}).items():
        at = f"{source}: $.arms.{name}.tests.{test}"
        sp = st.get("speedup") or {}
        pct = st.get("pct_of_host") or {}
        sp_ci = sp.get("ci95") or [None, None]
        pct_ci = pct.get("ci95") or [None, None]
        out[test] = {"n": numbers.integer(st.get("n"), f"{at}.n", 0, 2**31 - 1),
                     **{k: _num(st.get(k), f"{at}.{k}") for k in ("median", "min", "max")},
                     "speedup": _num(sp.get("value"), f"{at}.speedup"),
                     "speedup_lo": _num(sp_ci[0], f"{at}.speedup.ci95"),
                     "speedup_hi": _num(sp_ci[1], f"{at}.speedup.ci95"),
                     "pct_of_host": _num(pct.get("value"), f"{at}.pct_of_host"),
                     "pct_lo": _num(pct_ci[0], f"{at}.pct_of_host.ci95"),
                     "pct_hi": _num(pct_ci[1], f"{at}.pct_of_host.ci95")}
    return out


def _arms_of(summary: dict, meta_arms: dict, source: str) -> list[ArmRecord]:
    """The arms of a summary (``source``: its file, for messages) with their profiles from metadata.json."""
    arms = []
    for name, a in (summary.get("arms") or {}).items():
        m = _obj(meta_arms.get(name))
        prof, sim = _obj(m.get("profile")), _obj(m.get("simulate"))
        arms.append(ArmRecord(
            name=name, state=str(a.get("state")), spec=a.get("spec") or {}, runs=list(a.get("runs") or []),
            profile_name=_str(prof.get("name")), profile_sha256=_str(prof.get("sha256")),
            simulate_name=_str(sim.get("name")), simulate_sha256=_str(sim.get("sha256")),
            results=_results_of(source, name, a)))
    return arms


def _host_samples(summary: dict, source: str) -> list[dict]:
    host = summary.get("host") or {}
    out = []
    for test, st in (host.get("tests") or {}).items():
        for i, v in enumerate(st.get("samples") or [], 1):
            out.append({"role": "host", "arm": str(host.get("name") or "host"), "run": 0, "sample": i,
                        "test": str(test), "tok_s": numbers.finite(v, f"{source}: $.host.tests.{test}.samples"),
                        "extra": {}})
    return out


def _bundle_name(root: Path) -> str:
    """The bundle's folder name; ``STUDY/NAME`` for the bundles that ``capshim ablate``, ``tune``
    and ``kernels`` write inside their study folder (``bench``, ``confirm``, ``stage-N``, ``bench-M``)."""
    parent = root.parent
    if study.is_study(parent) or any((parent / f).is_file() for f in ("ablation.json", "tune.json")):
        return f"{parent.name}/{root.name}"
    return root.name


def _require_verified(p: Path, problems: list[str], noun: str) -> None:
    """Refuse a folder that does not verify, in one line: how many problems, the first, where the rest are.

    Raises:
        IngestError: ``"<p>: not an evidence bundle or study folder (no SHA256SUMS)"``, or
            ``"<p>: the <noun> does not verify (N problems, the first: ...; capshim evidence verify <p>
            lists them all)"``.
    """
    if not problems:
        return
    if not os.path.lexists(p / paths.SUMS_NAME):
        raise IngestError(f"{p}: not an evidence bundle or study folder (no {paths.SUMS_NAME})")
    first = problems[0] if len(problems[0]) <= 200 else problems[0][:197] + "..."
    more = f"{len(problems)} problems, the first" if len(problems) > 1 else "1 problem"
    raise IngestError(f"{p}: the {noun} does not verify, not stored ({more}: {first}; "
                      f"{pasteable('capshim', 'evidence', 'verify', p)} lists {'them all' if len(problems) > 1 else 'it'})")


MAX_CSV_BYTES = 256 << 20
"""The largest results.csv read (a row per sample: millions of samples fit)."""


def _read_samples(csv_path: Path) -> list[dict]:
    """The arm samples of ``results.csv`` (columns by name: ``arm, run, sample, test, tok_s``; others kept
    under ``extra``). ``tok_s`` is the value in the test's unit and must be a finite number.

    Raises:
        IngestError: unreadable, or a row without those columns or with a bad number (names the row).
    """
    samples = []
    try:
        fd = os.open(csv_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))  # a FIFO: no wait
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CSV_BYTES:
            os.close(fd)
            raise IngestError(f"{csv_path}: " + ("not a regular file" if not stat.S_ISREG(st.st_mode) else
                                                 f"{st.st_size} bytes, over the {MAX_CSV_BYTES} read"))
        with os.fdopen(fd, newline="", encoding="utf-8") as fh:
            for n, row in enumerate(csv.DictReader(fh), 2):
                try:
                    value = float(row["tok_s"])
                    if not math.isfinite(value):
                        raise ValueError(f"tok_s {row['tok_s']!r} is not a finite number")
                    run, sample = (numbers.integer(int(row[k] or 0), k, 0, 2**31 - 1) for k in ("run", "sample"))
                    samples.append({"role": "arm", "arm": row["arm"], "run": run, "sample": sample,
                                    "test": row["test"], "tok_s": value,
                                    "extra": {k: v for k, v in row.items()
                                              if k not in ("arm", "run", "sample", "test", "tok_s")}})
                except (KeyError, TypeError, ValueError, CapshimError) as exc:
                    raise IngestError(f"{csv_path}: row {n}: {exc}") from None
    except OSError as exc:
        raise IngestError(f"{csv_path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise IngestError(f"{csv_path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return samples


#: The part of study.json this module reads (:func:`capshim.evidence.study.verify` checks the rest).
_STUDY_BUNDLES = {"type": "object", "required": ["bundles"],
                  "properties": {"bundles": {"type": "array", "items": {"type": "string"}}}}


def signed_by(path: str | Path, signers: str | Path | None = None) -> list[dict]:
    """Who signed a folder that verifies (a bundle or a study): ``[{"key", "key_type", "principal", "signed_utc"}]``.

    Every signature must hold (:func:`capshim.evidence.signing.check`); with ``signers`` (an
    allowed-signers file: the store's policy) at least one must be by a signer it allows, and
    ``principal`` names who; without, ``principal`` is None.

    Raises:
        IngestError (exit 2), in one line: a signature that does not hold (names the line of
            attestations.intoto.jsonl), a bad attestation file, or, with ``signers``, no signature
            by an allowed signer (names the file and who did sign).
        UsageError: ``signers`` is unusable or has a line ssh-keygen cannot read (names the line).
    """
    p = Path(path)
    try:
        checks = signing.check(p, signers)
    except signing.SigningError as exc:
        raise IngestError(f"{p}: {exc}") from None
    for c in checks:
        if c.problem:
            raise IngestError(f"{p}: {ATTESTATION_FILE} line {c.line}: {c.problem}")
    if signers is not None and not any(c.principal for c in checks):
        who = ("signed by " + ", ".join(c.who() for c in checks)) if checks else "not signed"
        raise IngestError(f"{p}: {who}; the store admits only signers of --signers {signers}")
    return [{"key": c.keyid, "key_type": c.key_type, "principal": c.principal, "signed_utc": c.signed_utc}
            for c in checks]


def read_folder(path: str | Path, signers: str | Path | None = None) -> list[BundleRecord]:
    """Verify a bundle folder or a study folder and read it: one record, or one per nested bundle.

    Args:
        path: a bundle (``capshim bench --out``) or a study (``capshim ablate|tune|kernels --out``,
            marked by its study.json, :func:`capshim.evidence.study.is_study`).
        signers: the store's allowed-signers file, or None to admit any folder whose signatures
            (if any) hold.

    Returns:
        ``[record]`` for a bundle; for a study, its nested bundles' records in study.json's
        order, each named ``STUDY/FOLDER``.

    Raises:
        IngestError (exit 2), in one line: not a folder; neither a bundle nor a study; a
            signature that does not hold, or with ``signers`` none by an allowed signer
            (:func:`signed_by`); the folder does not verify (:func:`capshim.evidence.study.verify` for a study: its seal, its
            layout and every nested bundle); JsonShapeError / SummaryShapeError: a file of the
            wrong shape (names the file).
    """
    p = Path(path)
    if not p.is_dir():
        raise IngestError(f"{p}: not a folder")
    if not study.is_study(p):
        rec = read_bundle(p)
        rec.signed_by = signed_by(p, signers)
        return [rec]
    _require_verified(p, study.verify(p), "study")
    signatures = signed_by(p, signers)
    doc = jsonread.load(p / study.STUDY_FILE, _STUDY_BUNDLES, limit=1 << 20)
    records = [read_bundle(p / b) for b in doc["bundles"]]
    for rec in records:
        rec.signed_by = signatures  # the study's signature covers each nested bundle's files
    return records


def bundle_key(root: Path) -> str:
    """A bundle's identity: SHA-256 (64 hex) of its SHA256SUMS in canonical form.

    The canonical form is the parsed ``(path, digest)`` pairs sorted by path, one
    :func:`capshim.paths.sum_line` each (lowercase digest, two spaces, a newline after
    each): exactly the file capshim writes (:func:`capshim.paths.write_sums`), so a
    bundle's key is the SHA-256 of its file as sealed, and a copy whose SHA256SUMS was
    only reformatted (uppercase digests, ``*`` binary markers, another order, blank
    lines) has the same key.

    Raises:
        IngestError: SHA256SUMS cannot be read (call it on a bundle that verifies).
    """
    try:
        listed, _ = paths.read_sums(root)
    except OSError as exc:
        raise IngestError(f"{root / paths.SUMS_NAME}: cannot read: {exc.strerror or exc}") from None
    canonical = "".join(paths.sum_line(digest, rel) + "\n" for rel, digest in sorted(listed.items()))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_bundle(path: str | Path) -> BundleRecord:
    """Verify an evidence bundle and read it into a :class:`BundleRecord`.

    Args:
        path: the bundle folder (as ``capshim bench --out`` wrote it).

    Returns:
        The record; samples from ``results.csv`` (columns by name: ``arm, run,
        sample, test, tok_s``; other columns are kept under ``extra``), host
        samples from the summary's host block.

    Raises:
        IngestError: not a folder, the bundle does not verify (one line: how
            many problems and the first, :func:`_require_verified`), or
            ``results.csv`` is malformed (names the row).
        JsonShapeError: metadata.json of the wrong shape; SummaryShapeError:
            summary.json is not a capshim summary (the contract of
            :mod:`capshim.summary`, the reader ``report`` uses).
    """
    p = Path(path)
    if not p.is_dir():
        raise IngestError(f"{p}: not a folder")
    _require_verified(p, evidence.verify(p), "bundle")
    key = bundle_key(p)
    meta = jsonread.load_metadata(p)
    summary = summary_contract.load(p / "summary.json")
    samples = _read_samples(p / "results.csv")
    samples += _host_samples(summary, str(p / "summary.json"))
    raw = _raw_facts(_raw_rows(sorted((p / "raw").glob("*.json"))))
    host, dev, workload = _obj(meta.get("host")), _obj(meta.get("device")), _obj(meta.get("workload"))
    driver = " ".join(str(x) for x in (dev.get("driver"), dev.get("driverInfo")) if x) or None
    return BundleRecord(
        key=key, kind="bundle", name=_bundle_name(p.resolve()), source=str(p.resolve()),
        created_utc=_str(meta.get("started_utc") or host.get("created_utc")),
        host=_str(host.get("host")), os=_str(host.get("os")),
        # a stand-in is stored under its own name, never grouped with the device it imitates
        device=_str(device_label(dev) or raw.get("gpu_info")), driver=driver,
        workload_build=_str(raw.get("build_number")), workload_commit=_str(raw.get("build_commit")),
        workload_sha256=_str(workload.get("binary_sha256")),
        model=_str(raw.get("model_type")), model_sha256=_str(workload.get("model_sha256")),
        config=raw["config"], settings={"method": meta.get("method") or {},
                                        "command_line": meta.get("command_line")},
        capshim_version=_str(meta.get("capshim_version") or host.get("capshim")),
        baseline=_str(summary.get("baseline")), host_name=_str((summary.get("host") or {}).get("name")),
        host_source=_str((summary.get("host") or {}).get("source")),
        arms=_arms_of(summary, _obj(meta.get("arms")), str(p / "summary.json")), samples=samples, metadata=meta, summary=summary)


def read_external(arm_specs: list[tuple[str, list[str]]], host: str | None = None,
                  baseline: str | None = None) -> BundleRecord:
    """Read llama-bench ``-o json``/``jsonl`` files made elsewhere, as ``capshim report --arm`` takes them.

    Args:
        arm_specs: ``[(arm name, [file, ...]), ...]``; one run per file.
        host: a llama-bench file or bundle measured on the host, or None.
        baseline: the baseline arm (default the first).

    Returns:
        A record of kind ``"external"``; its summary is :func:`capshim.bench.analysis.analyze`'s
        of the files (what ``capshim report --arm`` shows); its key hashes the files'
        bytes with their arm names (the same files twice are one record).

    Raises:
        IngestError / AnalysisError / LlamaBenchError naming the file or arm;
            EvidenceError (exit 2) when ``host`` is a bundle that does not verify.
    """
    files = [Path(f) for _, fs in arm_specs for f in fs]
    if host and Path(host).is_dir():  # a bundle read as input must verify (an edited host would be stored)
        evidence.require_verified(host, "--host")
    for f in files + ([Path(host)] if host and not Path(host).is_dir() else []):
        try:
            st = os.stat(f)
        except OSError as exc:
            raise IngestError(f"{f}: {'no such file' if isinstance(exc, FileNotFoundError) else exc.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise IngestError(f"{f}: not a regular file (a FIFO, device or folder)")
        if st.st_size > llamabench.MAX_OUTPUT_BYTES:  # checked before the file is hashed
            raise IngestError(f"{f}: {st.st_size} bytes, larger than the {llamabench.MAX_OUTPUT_BYTES} a "
                              "llama-bench file may have")
    sha = evidence.sha256_file
    manifest = "".join(f"{name}\t{sha(f)}\n" for name, fs in arm_specs for f in fs)
    if host:
        manifest += f"host\t{sha(host) if not Path(host).is_dir() else Path(host).resolve()}\n"
    manifest += f"baseline\t{baseline or arm_specs[0][0]}\n"
    records, arms = arms_from_files(arm_specs)
    summary = analyze(records, arms, baseline or arm_specs[0][0], host_from_file(host) if host else None)
    samples = [{"role": "arm", "arm": r["arm"], "run": int(r.get("run") or 0), "sample": int(r.get("sample") or 0),
                "test": str(r["test"]), "tok_s": float(r["tok_s"]), "extra": {}} for r in records]
    samples += _host_samples(summary, "the summary of the --arm files")
    rows = _raw_rows(files)
    raw = _raw_facts(rows)
    created = next((r.get("test_time") for r in rows if isinstance(r, dict) and r.get("test_time")), None)
    return BundleRecord(
        key=hashlib.sha256(manifest.encode()).hexdigest(), kind="external",
        name="+".join(name for name, _ in arm_specs), source=", ".join(str(f.resolve()) for f in files),
        created_utc=_str(created), device=_str(raw.get("gpu_info")),
        workload_build=_str(raw.get("build_number")), workload_commit=_str(raw.get("build_commit")),
        model=_str(raw.get("model_type")), config=raw["config"], settings={},
        baseline=_str(summary.get("baseline")), host_name=_str((summary.get("host") or {}).get("name")),
        host_source=_str((summary.get("host") or {}).get("source")),
        arms=_arms_of(summary, {}, "the summary of the --arm files"), samples=samples, summary=summary)
