"""Study seals: one SHA256SUMS over the top of an ``ablate`` / ``tune`` / ``kernels`` / ``cuda-clients`` folder.

A study folder holds the command's own files (tables, JSON results, profiles)
and one or more nested evidence bundles, each sealed by its own SHA256SUMS.
The study seal (docs/evidence.md, "Study folders") is a SHA256SUMS at the top
of the folder listing every regular file that is not inside a nested bundle,
``study.json`` (what kind of study, which folders are its bundles) and each
nested bundle's own SHA256SUMS, so the top seal pins the nested seals.

A ``cuda-clients`` folder (``scripts/cuda-clients/table.py``: what independent CUDA
clients see under each profile, issue 27) is a study without nested bundles: its
raw per-client outputs are its own files, and its study.json carries the run's
``facts`` (command, machine, software, dates) that a bundle's metadata.json holds.

Use::

    seal(out, "ablate")                       # at the end of the command (also after an error)
    seal(out, "tune", sealed_after=True)      # an older folder: capshim evidence seal-study
    verify(out)                               # problems, paths relative to out; [] when it verifies

The commands seal through :func:`capshim.studies.common.study_folder` (the
one study-folder helper: a new folder, the seal guard, then this seal).
Names in the layout (profiles, candidates, ``bench-<model>``) follow
:mod:`capshim.contracts.names`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
from pathlib import Path

from capshim import __version__, evidence, jsonread, paths
from capshim.contracts.names import NAME_RE
from capshim.contracts.signals import SealGuard
from capshim.evidence import EvidenceError
from capshim.paths import SUMS_NAME
from capshim.contracts import messages

__all__ = ["STUDY_FILE", "SCHEMA", "KINDS", "seal", "seal_quietly", "verify", "is_study", "bundle_folders",
           "read_study"]

STUDY_FILE = "study.json"
SCHEMA = "capshim-study/1"

_NAME = NAME_RE.pattern

#: Per kind: the files a study may list (besides study.json and the nested bundles' SHA256SUMS), and the
#: folders directly in it that are nested bundles. ``run.txt`` is the operator's note of the command line.
KINDS: dict[str, dict[str, re.Pattern]] = {
    "ablate": {"files": re.compile(rf"ablation\.(?:md|json|png)|smallest-raise\.toml|run\.txt|profiles/{_NAME}\.toml"),
               "bundles": re.compile(r"bench")},
    "tune": {"files": re.compile(rf"tune\.(?:md|json)|tuned\.toml|run\.txt|candidates/{_NAME}\.toml"),
             "bundles": re.compile(r"stage-[0-9]+|confirm")},
    "kernels": {"files": re.compile(r"kernels\.(?:md|json)|run\.txt"),
                "bundles": re.compile(rf"bench-{_NAME}")},
    # raw/<arm>/<client>.json|.stderr|.status.jsonl: one process per client and arm (stock or a profile)
    "cuda-clients": {"files": re.compile(rf"clients\.(?:md|json)|run\.txt|raw/{_NAME}/[a-z][a-z0-9-]{{0,31}}"
                                         r"\.(?:json|stderr|status\.jsonl)"),
                     "bundles": re.compile(r"(?!)")},  # no nested bundle
}

SEALED_AFTER_NOTE = ("sealed after the run (capshim evidence seal-study): the seal proves the files are unchanged "
                     "since sealed_utc, not since the run; each nested bundle's own SHA256SUMS dates from its run")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def bundle_folders(root: Path, kind: str) -> list[str]:
    """Names of the real folders directly in ``root`` that are the kind's nested bundles (links left out)."""
    pat = KINDS[kind]["bundles"]
    out = []
    with os.scandir(root) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False) and pat.fullmatch(e.name):
                out.append(e.name)
    return sorted(out)


def _study_files(root: Path, bundles: list[str]) -> list[str]:
    """The files the study seal lists: regular files outside the bundles, and each bundle's SHA256SUMS."""
    names = [rel for rel in evidence.bundle_files(root, frozenset(bundles)) if rel != SUMS_NAME]
    names += [f"{b}/{SUMS_NAME}" for b in bundles if (root / b / SUMS_NAME).is_file()]
    return sorted(set(names) | {STUDY_FILE})


def seal(root: str | Path, kind: str, *, sealed_after: bool = False, error: str | None = None,
         facts: dict | None = None) -> Path:
    """Write ``study.json`` and then, last and atomically, the study's SHA256SUMS at the top of ``root``.

    Args:
        root: the study folder (the command's ``--out``).
        kind: ``ablate``, ``tune``, ``kernels`` or ``cuda-clients``.
        sealed_after: the folder was written before capshim sealed studies and is sealed now
            (``capshim evidence seal-study``): study.json says so, with the date.
        error: the command stopped on this error after writing some results; recorded in study.json.
        facts: what a study without nested bundles records of its run (its metadata.json facts):
            ``{"command": [argv...], "machine": str, "software": {name: version}, "started_utc",
            "finished_utc"}``; recorded in study.json as ``facts`` (the folder's README reads it).

    Returns:
        The SHA256SUMS path.

    Raises:
        EvidenceError: unknown kind, not a folder, already sealed (with ``sealed_after``), or (with
            ``sealed_after``) a link or special file in it or a nested bundle that does not verify.
        StorageError: the disk is full (exit 4).

    A stop signal while the files are written waits for them (:class:`~capshim.contracts.signals.SealGuard`;
    inside a study's own guard it is that guard's), then capshim exits 128+N.
    """
    p = Path(root)
    if kind not in KINDS:
        raise EvidenceError(f"--kind {kind}: expected one of {', '.join(KINDS)}")
    if p.is_symlink() or not p.is_dir():
        raise EvidenceError(f"{p}: not a folder")
    bundles = bundle_folders(p, kind)
    if sealed_after:
        if os.path.lexists(p / SUMS_NAME) or os.path.lexists(p / STUDY_FILE):
            raise EvidenceError(f"{p}: already has {SUMS_NAME} or {STUDY_FILE}; nothing to seal")
        problems = evidence.foreign_entries(p, frozenset(bundles), "study")
        for b in bundles:
            problems += [f"{b}/{x}" for x in evidence.verify(p / b)]
        if not bundles:
            problems.append(f"no nested bundle ({KINDS[kind]['bundles'].pattern}): not a {kind} study")
        if problems:
            raise EvidenceError(f"{p}: not sealed: " + "; ".join(problems[:20]))
    doc = {"schema": SCHEMA, "kind": kind, "capshim": __version__, "bundles": bundles,
           "sealed_utc": _now(), "sealed_after": bool(sealed_after)}
    if sealed_after:
        doc["note"] = SEALED_AFTER_NOTE
    if error is not None:
        doc["complete"] = False
        doc["error"] = error[:2000]
    if facts is not None:
        doc["facts"] = facts
    guard_cm = SealGuard("the study")
    with guard_cm:  # Ctrl-C, SIGTERM, SIGHUP wait until both files are written (or taken back)
        sums = _write_seal(p, doc, bundles, sealed_after)
    guard_cm.exit_if_signalled()
    return sums


def _write_seal(p: Path, doc: dict, bundles: list[str], sealed_after: bool) -> Path:
    """Write study.json, then SHA256SUMS; with ``sealed_after``, take both back when the seal could not be
    written or verify would reject it (so the folder can be fixed and sealed again)."""
    try:
        paths.atomic_write(p / STUDY_FILE, evidence.strict_json(doc))
        sums = paths.write_sums(p, _study_files(p, bundles))
    except (OSError, paths.StorageError) as exc:
        if sealed_after:
            with contextlib.suppress(OSError):
                os.unlink(p / STUDY_FILE)
        if isinstance(exc, paths.StorageError):
            raise
        raise EvidenceError(f"{p}: cannot seal the study: {exc.strerror or exc}") from None
    if sealed_after:
        # never leave behind a seal that verify rejects (a file outside the kind's layout, a hard
        # link, a wrong --kind): take it back, so the folder can be fixed and sealed again
        problems = verify(p)
        if problems:
            for f in (sums, p / STUDY_FILE):
                with contextlib.suppress(OSError):
                    os.unlink(f)
            raise EvidenceError(f"{p}: not sealed: " + "; ".join(problems[:20]))
    return sums


def seal_quietly(root: str | Path, kind: str, error: BaseException) -> None:
    """After a command stopped on ``error``: seal what it wrote, if it wrote anything; never raises.

    A folder that is missing, empty or already sealed is left alone (an ``--out`` the command
    refused is never touched).
    """
    p = Path(root)
    try:
        if not p.is_dir() or p.is_symlink() or not any(p.iterdir()) or os.path.lexists(p / SUMS_NAME):
            return
        seal(p, kind, error=f"{type(error).__name__}: {error}")
        messages.emit(f"the results written before the error are sealed: {p / SUMS_NAME}")
    except (OSError, EvidenceError, paths.StorageError) as exc:
        messages.emit(f"could not seal {p} after the error: {exc}")


def is_study(root: str | Path) -> bool:
    """Whether ``root`` is a study folder: it has a study.json, or its SHA256SUMS lists one."""
    p = Path(root)
    if os.path.lexists(p / STUDY_FILE):
        return True
    try:
        listed, _ = paths.read_sums(p)
    except OSError:
        return False
    return STUDY_FILE in listed


def read_study(root: str | Path) -> dict | None:
    """study.json of ``root`` ({"kind", "bundles", "sealed_utc", "sealed_after", ...}) when it has the
    right shape, else None (:func:`verify` says why)."""
    try:
        return _read_study(Path(root))[0]
    except OSError:
        return None


def _read_study(p: Path) -> tuple[dict | None, list[str]]:
    """study.json's content when its shape is right, else None and the problems."""
    try:
        doc = jsonread.load(p / STUDY_FILE, limit=1 << 20)
    except jsonread.JsonShapeError as exc:
        return None, [f"{STUDY_FILE}: cannot read: {str(exc).split(STUDY_FILE + ': ', 1)[-1]}"]
    problems = []
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None, [f"{STUDY_FILE}: $.schema: expected {SCHEMA!r}"]
    if doc.get("kind") not in KINDS:
        problems.append(f"{STUDY_FILE}: $.kind: expected one of {', '.join(KINDS)}")
    bundles = doc.get("bundles")
    if not isinstance(bundles, list) or not all(isinstance(b, str) for b in bundles):
        problems.append(f"{STUDY_FILE}: $.bundles: expected a list of folder names")
    elif not problems:
        pat = KINDS[doc["kind"]]["bundles"]
        for b in bundles:
            if not pat.fullmatch(b):
                problems.append(f"{STUDY_FILE}: $.bundles: {paths.show_name(b)!r} is not a {doc['kind']} "
                                f"study's bundle folder ({pat.pattern})")
        if len(set(bundles)) != len(bundles):
            problems.append(f"{STUDY_FILE}: $.bundles: a folder is named twice")
    return (None if problems else doc), problems


def verify(root: str | Path) -> list[str]:
    """Check a study folder: its top seal (the same rules as a bundle's), its layout, then each nested bundle.

    Returns:
        Problems, one string each, starting with the path relative to ``root``: those of
        :func:`capshim.evidence.check_seal` for the top (``"ablation.json: checksum mismatch"``,
        ``"x.txt: not listed in SHA256SUMS"``, ``"ablation.md: is a link ..."``, ``"bench/SHA256SUMS:
        checksum mismatch"``), ``"study.json: ..."`` (missing, unlisted or of the wrong shape),
        ``"<file>: not part of this <kind> study's layout"``, ``"<bundle>/SHA256SUMS: not listed ..."``
        (the top seal pins each nested seal), ``"<bundle>: ..."`` (a bundle folder study.json names is
        missing or not a folder), and each nested bundle's own problems prefixed with its folder.
        An empty list means the study verifies.
    """
    p = Path(root)
    doc = None
    if os.path.lexists(p / STUDY_FILE) and not os.path.islink(p / STUDY_FILE) and (p / STUDY_FILE).is_file():
        doc, doc_problems = _read_study(p)
    else:
        doc_problems = [f"{STUDY_FILE}: missing or not a regular file (every study folder has it)"]
    bundles = list(doc["bundles"]) if doc else []
    skip = frozenset(b for b in bundles if (p / b).is_dir() and not (p / b).is_symlink())
    problems, listed = evidence.check_seal(p, skip, "study")
    if listed is None:
        return problems
    if STUDY_FILE not in listed:
        problems.append(f"{STUDY_FILE}: not listed in {SUMS_NAME} (every study lists it)")
    problems += doc_problems
    if doc is None:
        return list(dict.fromkeys(problems))
    kind = doc["kind"]
    pinned = {f"{b}/{SUMS_NAME}" for b in bundles}
    for rel in sorted(listed):
        if rel != STUDY_FILE and rel not in pinned and not KINDS[kind]["files"].fullmatch(rel):
            problems.append(f"{paths.show_name(rel)}: not part of this {kind} study's layout (capshim writes no "
                            "such file)")
    for b in bundles:
        if b not in skip:
            problems.append(f"{b}: the bundle folder {STUDY_FILE} names is missing or not a folder")
            continue
        if f"{b}/{SUMS_NAME}" not in listed:
            problems.append(f"{b}/{SUMS_NAME}: not listed in the study's {SUMS_NAME} (the study seal pins "
                            "each nested bundle's seal)")
        problems += [f"{b}/{x}" for x in evidence.verify(p / b)]
    return list(dict.fromkeys(problems))
