"""Output files: the one rule for every file capshim writes at a path a user named.

A file capshim writes (``report -o``, ``--chart``, ``db matrix -o``, a profile's
``-o``, a man page, a bundle's attestation ...) is written by :func:`write_file`,
after :func:`check_file` said, before any work, whether it may be:

- **new, or replaced only when asked**: an existing file is refused unless the
  command was told to replace it (``--force``) or replacing is what the command
  is documented to do (``man --out``: capshim's own pages; ``evidence sign``:
  the attestation file it adds to);
- **never through a link**: a symbolic link as the last part of the path is
  refused (its target stays unchanged); the folder part may hold links (macOS
  ``/tmp``), but a link that leads into a sealed folder is caught by the sealed rule;
- **only a regular file**: a FIFO, a device (``/dev/stdout``, ``/dev/full``), a
  socket or a folder is refused after ``lstat``, without opening it, so nothing
  blocks (``-`` or no ``-o`` is how output goes to stdout);
- **never inside a sealed folder** (:func:`capshim.contracts.folders.sealed_above`),
  unless the file is the one a sealed folder takes (the attestation);
- **never over an input** of the same command, the results store included:
  the same file (``st_dev``, ``st_ino``), or a file inside an input folder;
- **whole or not at all**: the bytes go to a temporary file in the same folder,
  which is then renamed over the target (replace) or hard-linked to it (new:
  the link fails if anything appeared there meanwhile), so a reader sees the old
  file or the new one and a failure leaves no partial file;
- **a write that fails** (full disk, quota, read-only file system, no
  permission) is exit 4 (``EXIT_STORAGE``) naming the flag and the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Iterable

from capshim.contracts import folders
from capshim.errors import EXIT_STORAGE, CapshimError, UsageError

__all__ = ["check_file", "write_file", "write_error", "same_file"]

_KIND = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def kind(mode: int) -> str:
    """What a file that is not a regular one is, as the rule's refusals say it (``a link``,
    ``a FIFO``, ``a device``, ``a socket``, ``a folder``) from its ``lstat`` mode."""
    if stat.S_ISLNK(mode):
        return "a link"
    return next((k for test, k in _KIND if test(mode)), "not a regular file")


_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV}


def _name(flag: str, path: Path) -> str:
    return f"{flag} {path}" if flag else str(path)


def write_error(exc: OSError, path: str | Path, flag: str = "") -> CapshimError:
    """The one error for a file that could not be written: exit 4, naming ``flag`` and the file.

    ``"--output r.md: cannot write: No space left on device (nothing was written)"``: the
    system's reason (``strerror``), whatever it is (ENOSPC, EDQUOT, EFBIG, EROFS, EACCES, EIO).
    """
    return CapshimError(f"{_name(flag, Path(path))}: cannot write: {exc.strerror or exc} "
                        "(nothing was written; an existing file is unchanged)", EXIT_STORAGE)


#: The flags whose ``-`` means standard output (``report -o -``, ``db matrix -o -``).
_STDOUT_FLAGS = ("-o", "--output")
#: The files SQLite keeps beside a database (https://www.sqlite.org/tempfiles.html: the rollback
#: journal, the write-ahead log and its shared-memory index).
SQLITE_SIDECARS = ("-journal", "-wal", "-shm")


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    """Whether two ``stat`` results are one file (same device and inode)."""
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _inside(child: Path, folder: Path) -> bool:
    try:
        child.relative_to(folder)
        return True
    except ValueError:
        return False


def _refuse_inputs(path: Path, st: os.stat_result | None, flag: str, inputs: Iterable, store) -> None:
    real = path.parent.resolve() / path.name
    named = [(str(p), "an input of this command") for p in inputs if p is not None and str(p) not in ("", "-")]
    if store is not None:
        named.append((str(store), "the results store"))
        for suffix in SQLITE_SIDECARS:  # SQLite's own files beside the store: it deletes or replays them
            side = Path(str(store) + suffix)
            if side.parent.resolve() / side.name == real:
                raise UsageError(f"{_name(flag, path)}: is the results store's {suffix[1:]} file (SQLite's own); "
                                 "write the output somewhere else")
    for given, what in named:
        try:
            ist = os.stat(given)
        except OSError:
            continue
        if st is not None and same_file(st, ist):
            raise UsageError(f"{_name(flag, path)}: is {given}, {what}; write the output somewhere else")
        if stat.S_ISDIR(ist.st_mode) and _inside(real, Path(given).resolve()):
            raise UsageError(f"{_name(flag, path)}: inside {given}, {what}; write the output somewhere else")


def refuse_inputs(path: str | Path, flag: str, inputs: Iterable[str | Path | None]) -> None:
    """The rule's "never over an input" alone, for a file not written whole (``run --status-file``,
    which the shims append to): ``path`` may not be one of ``inputs`` (by device and inode) nor
    inside one that is a folder.

    Raises:
        UsageError: (exit 2) naming ``flag``, the path and the input.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError:
        st = None
    _refuse_inputs(p, st, flag, inputs, None)


def check_file(path: str | Path, flag: str = "", *, replace: bool = False, replace_flag: str | None = "--force",
               inputs: Iterable[str | Path | None] = (), store: str | Path | None = None,
               sealed_ok: bool = False) -> Path:
    """Whether ``path`` may be written by :func:`write_file`; say why not before any work is done.

    Args:
        path: the file the user named (``-`` for stdout is the caller's, never passed here).
        flag: the option that named it (``--output``), for messages.
        replace: the user asked to replace an existing file (or the command's documented job is to).
        replace_flag: the option that asks it, named in the refusal (None: no such option).
        inputs: every file or folder the command reads; the target may be none of them, nor inside one.
        store: the results store's file (SQLite), when the command opens one.
        sealed_ok: the file is the one a sealed folder takes (the attestation of ``evidence sign``).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        UsageError: (exit 2, naming ``flag`` and the file) empty, a link, not a regular file, an existing
            file without ``replace``, a missing folder, inside a sealed folder, an input or the store.
    """
    if not str(path).strip():
        raise UsageError(f"{flag}: an empty path: give a file name")
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{_name(flag, p)}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{_name(flag, p)}: is a symbolic link; capshim never writes through a link "
                         "(name the file itself" + (f"; {flag} - prints on stdout)" if flag in _STDOUT_FLAGS else ")"))
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = kind(st.st_mode)
        raise UsageError(f"{_name(flag, p)}: is {what}; capshim writes only regular files"
                         + (f" ({flag} - prints on stdout)" if flag in _STDOUT_FLAGS and what != "a folder" else ""))
    if not sealed_ok:
        folders.refuse_inside_sealed(p, flag or "output")
    if not p.absolute().parent.is_dir():
        raise UsageError(f"{_name(flag, p)}: folder {p.parent} does not exist")
    _refuse_inputs(p, st, flag, inputs, store)
    if st is not None and not replace:
        how = (f"pass {replace_flag} to replace it, or" if replace_flag
               else "capshim does not overwrite it: remove it first, or")
        raise UsageError(f"{_name(flag, p)}: exists; {how} choose another name")
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_file(path: str | Path, data: bytes, flag: str = "", *, replace: bool = False,
               replace_flag: str | None = "--force", inputs: Iterable[str | Path | None] = (),
               store: str | Path | None = None, sealed_ok: bool = False, fsync: bool = True) -> Path:
    """Write ``data`` (bytes) to ``path`` by the rule of this module; return the path.

    :func:`check_file` is asked again (a file may have appeared since the command checked), then the
    bytes go to ``.NAME.XXXX.tmp`` in the same folder (``O_EXCL``), are synced, and the temporary file
    is renamed over ``path`` (``replace``; a rename never follows a link) or hard-linked to it (new:
    ``link`` fails when anything exists there). The temporary file is always removed.

    Raises:
        UsageError: (exit 2) :func:`check_file`'s refusals, or ``path`` appeared meanwhile.
        CapshimError: (exit 4) the write failed (full disk, quota, read-only, no permission), naming the
            file; nothing partial is left and an existing file is unchanged.
    """
    p = check_file(path, flag, replace=replace, replace_flag=replace_flag, inputs=inputs, store=store,
                   sealed_ok=sealed_ok)
    folder = p.absolute().parent
    tmp = None
    try:
        for n in range(100):
            cand = folder / f".{p.name}.{os.getpid()}-{n}.tmp"
            try:
                fd = os.open(cand, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
                tmp = cand
                break
            except FileExistsError:
                continue
        else:
            raise OSError(errno.EEXIST, "no free temporary name", str(folder))
        try:
            _write_all(fd, data)
            if fsync:
                os.fsync(fd)
            os.fchmod(fd, 0o666 & ~_umask())
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, p)
        else:
            try:
                os.link(tmp, p, follow_symlinks=False)
            except FileExistsError:
                raise UsageError(f"{_name(flag, p)}: exists (it appeared while capshim wrote); "
                                 "nothing was replaced") from None
            except OSError as exc:  # a file system without hard links (FAT, some FUSE): a rename
                if exc.errno not in _NO_LINKS or os.path.lexists(p):
                    raise
                os.rename(tmp, p)
        return p
    except OSError as exc:
        raise write_error(exc, p, flag) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
