"""The seal of a folder: its SHA256SUMS over every other regular file, and the check of it.

Shared by bench bundles and study folders (:mod:`capshim.evidence.study`): a sealed
folder holds only regular files and folders (no link, FIFO or device), each
regular file listed once in SHA256SUMS with its digest, and nothing unlisted but
its documentation (:data:`capshim.evidence.files.DOC_FILE`, a README.md at its top,
outside the seal by design).
The walk is iterative and stops :data:`MAX_DEPTH` levels down.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from capshim import paths
from capshim.evidence.files import ATTESTATION_FILE, DOC_FILE, documentation_problem, sha256_file
from capshim.paths import SUMS_NAME

__all__ = ["MAX_DEPTH", "bundle_files", "foreign_entries", "check_seal", "write_sums", "unsealed_documentation"]

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


def bundle_files(root: Path, skip: frozenset[str] = frozenset()) -> list[str]:
    """Relative POSIX paths (sorted) of the regular files of a sealed folder, SHA256SUMS, the
    top-level README.md (its documentation, :data:`~capshim.evidence.files.DOC_FILE`) and the
    top-level signatures (:data:`~capshim.evidence.files.ATTESTATION_FILE`) aside.

    Links and special files are not followed or listed; ``skip``: folders directly in
    ``root`` left to their own seal (a study's nested bundles).

    Raises:
        OSError: a file vanished between the listing and its ``lstat``.
    """
    out = []
    for dirpath, _dirnames, filenames, _depth in _walk(root, skip):
        for f in filenames:
            full = os.path.join(dirpath, f)
            rel = Path(full).relative_to(root).as_posix()
            if rel in (SUMS_NAME, DOC_FILE, ATTESTATION_FILE) or not stat.S_ISREG(os.lstat(full).st_mode):
                continue
            out.append(rel)
    return sorted(out)


def write_sums(root: Path, skip: frozenset[str] = frozenset()) -> Path:
    """Write ``root/SHA256SUMS`` over :func:`bundle_files` (sorted, ``sha256sum -c`` format); returns its path.

    Raises:
        StorageError: the disk is full (exit 4). OSError: a file cannot be read or written.
    """
    return paths.write_sums(root, bundle_files(root, skip))


def foreign_entries(root: Path, skip: frozenset[str] = frozenset(), noun: str = "bundle") -> list[str]:
    """Problems for entries that make a folder not self-contained: links (anywhere), anything but
    files and folders, folders nested deeper than :data:`MAX_DEPTH`, folders that cannot be listed."""
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


def _listed_problem(p: Path, base: Path, rel: str, digest: str, noun: str) -> str | None:
    """The problem of one file listed in SHA256SUMS, or None when it is a sealed file of the folder."""
    f = p / rel
    try:
        st = os.lstat(f)
    except OSError:
        return f"{rel}: listed in {SUMS_NAME} but missing"
    if not f.resolve().is_relative_to(base):
        return f"{rel}: resolves outside the {noun}"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        return f"{rel}: listed in {SUMS_NAME} but not a regular file of the {noun}"
    if st.st_nlink > 1:
        return (f"{rel}: has {st.st_nlink} hard links (a file of a {noun} has one; "
                f"another name could be a file outside the {noun})")
    if sha256_file(f) != digest:
        return f"{rel}: checksum mismatch"
    return None


def check_seal(p: Path, skip: frozenset[str] = frozenset(), noun: str = "bundle") -> tuple[list[str], dict | None]:
    """The checks every sealed folder gets (a bundle, a study's top level): its SHA256SUMS, each listed
    file (there, a regular file of the folder with one link, the same bytes), no unlisted regular file,
    no link or special file anywhere. ``skip``: folders directly in ``p`` left to their own seal.

    Returns:
        ``(problems, listed)``; ``listed`` ({relative path: digest}) is None when SHA256SUMS is missing
        or unreadable (the problems say so and nothing more can be checked).

    Raises:
        EvidenceError: a listed regular file cannot be read to hash it (names it).
    """
    if not p.is_dir():
        return [f"{p}: not a folder"], None
    base = p.resolve()
    sums_path = p / SUMS_NAME
    if not sums_path.exists() and not sums_path.is_symlink():
        return [f"{SUMS_NAME}: missing"], None
    problems = foreign_entries(p, skip, noun)
    if sums_path.is_symlink() or not sums_path.is_file():
        return problems or [f"{SUMS_NAME}: not a regular file"], None
    try:
        listed, bad_lines = paths.read_sums(p)
    except OSError as exc:
        return problems + [f"{SUMS_NAME}: cannot read: {exc.strerror or exc}"], None
    problems += bad_lines
    doc = None if DOC_FILE in listed else documentation_problem(p)  # a listed one is checked as sealed
    if doc:
        problems.append(doc)
    for rel, digest in listed.items():
        problem = _listed_problem(p, base, rel, digest, noun)
        if problem:
            problems.append(problem)
    for rel in bundle_files(p, skip):
        if rel not in listed:
            problems.append(f"{paths.show_name(rel)}: not listed in {SUMS_NAME}")
    return problems, listed


def unsealed_documentation(root: Path, nested: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Relative paths of the README.md files that are a sealed folder's documentation, outside its seal:
    ``root``'s own and that of each folder in ``nested`` (a study's bundles), when each is a regular
    file within its size and SHA256SUMS does not list it. What verify names as "not sealed"."""
    out = []
    for rel_dir in ("", *nested):
        folder = root / rel_dir if rel_dir else root
        f = folder / DOC_FILE
        try:
            regular = stat.S_ISREG(os.lstat(f).st_mode)
            listed = DOC_FILE in paths.read_sums(folder)[0]
        except OSError:
            continue
        if regular and not listed and documentation_problem(folder) is None:
            out.append(f"{rel_dir}/{DOC_FILE}" if rel_dir else DOC_FILE)
    return out
