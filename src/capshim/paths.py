"""One place for where capshim keeps files, how it hashes them and how it publishes them.

The rules (docs/paths.md says the same for users):

* **Cache root** (:func:`cache_root`): ``$CAPSHIM_CACHE_DIR`` when set and not
  empty, else ``$XDG_CACHE_HOME/capshim`` when that is an absolute path (the
  XDG Base Directory specification says a relative value is ignored), else
  ``~/.cache/capshim``. Native builds live under ``native/``, synthetic models
  under ``models/``, the llama-bench build under ``llama-bench/``.
* **Content hashing** (:func:`content_key`): SHA-256 over each input file's
  name and bytes (sorted by name) and each build command, so an edited source
  or flag gives a new cache folder and an unchanged one is reused.
* **Atomic publish** (:func:`atomic_write`, :func:`publish_dir`): write to a
  temporary name in the same folder, then ``rename``; a failed write (a full
  disk) removes the temporary file and raises :class:`StorageError` (exit 4).
  These are for files inside folders capshim made (the cache, a new bundle);
  a file at a path the user named goes through
  :func:`capshim.contracts.output.write_file` (the output rule).
* **SHA256SUMS** (:func:`write_sums`, :func:`check_sums`): the format of GNU
  ``sha256sum``: ``<64 hex>  <relative path>`` per line, sorted.
* **Bounded reads** (:func:`read_limited`): readers of files that another
  program wrote (status files, workload output) read only regular files, never
  block on a FIFO and never read more than a limit.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from capshim.contracts import folders
from capshim.errors import EXIT_STORAGE, CapshimError

__all__ = ["StorageError", "cache_root", "content_key", "sha256_file", "cached_sha256", "atomic_write",
           "publish_dir", "new_tmp_dir", "storage_error", "is_full_disk", "FULL_DISK", "write_sums", "sum_line",
           "show_name", "read_sums", "check_sums", "verified_sums", "read_limited", "SUMS_NAME"]

SUMS_NAME = "SHA256SUMS"
_SUM_LINE = re.compile(r"^(?P<digest>[0-9a-fA-F]{64}) [ *](?P<name>.+)$")


class StorageError(CapshimError):
    """A file could not be written or read back (full disk, I/O error); exit 4, names the file."""

    exit_code = EXIT_STORAGE


FULL_DISK = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""errno values that mean the disk (or the quota, or the file size limit) is full."""


def is_full_disk(exc: OSError) -> bool:
    """Whether a failed write failed for lack of space (:data:`FULL_DISK`)."""
    return exc.errno in FULL_DISK


def storage_error(exc: OSError, what: str | Path, hint: str = "") -> StorageError:
    """The one error for a file or folder capshim could not write: exit 4, naming it.

    ``"<what>: cannot write: No space left on device"`` plus ``hint`` (what to do), from
    the system's reason (``strerror``). Use it where capshim writes its own files (the
    cache, a bundle, a report); :func:`atomic_write` and the native builds do.
    """
    return StorageError(f"{what}: cannot write: {exc.strerror or exc}{hint}")


def cache_root() -> Path:
    """The capshim cache folder (not created).

    ``$CAPSHIM_CACHE_DIR`` (made absolute), else ``$XDG_CACHE_HOME/capshim`` if
    that variable is an absolute path, else ``~/.cache/capshim``. Source of the
    XDG rule: the XDG Base Directory Specification 0.8 ("If an implementation
    encounters a relative path in any of these variables it should consider
    the path invalid and ignore it").
    """
    own = os.environ.get("CAPSHIM_CACHE_DIR", "")
    if own:
        return Path(own).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "capshim"


def content_key(files: list[Path], commands: list[list[str]] = (), length: int = 12) -> str:
    """Hex SHA-256 prefix (``length`` digits) over input files (name and bytes, sorted by name) and commands.

    Raises:
        OSError: an input file cannot be read.
    """
    h = hashlib.sha256()
    for f in sorted(Path(p) for p in files):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    for cmd in commands:
        h.update(("\0".join(cmd)).encode() + b"\n")
    return h.hexdigest()[:length]


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """SHA-256 of a regular file's bytes as 64 lowercase hex digits.

    Opened with ``O_NONBLOCK`` and checked with ``fstat`` first, like :func:`read_limited`: a FIFO
    or a device (``/dev/zero``, endless) is refused before any read.

    Raises:
        OSError: the file cannot be read, or is not a regular file (``EINVAL``).
    """
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


_MEMO: dict[tuple[str, int, int], str] = {}


def cached_sha256(path: str | Path, sidecar: bool = True) -> str:
    """SHA-256 of a file, computed again only when its size or mtime changed.

    The digest is kept in memory and, with ``sidecar``, in ``<file>.sha256``
    next to it as JSON ``{"sha256", "size", "mtime_ns", "file"}``. Only capshim's own sidecar is
    ever replaced: a file of another shape there (a user's ``sha256sum`` output), a link, a FIFO or
    anything but a regular file is left as it is and the sidecar skipped (the output rule: new, or
    replaced only when it is ours). An unwritable folder, or one inside a sealed bundle or study,
    just skips the sidecar.

    Raises:
        OSError: the file cannot be read.
    """
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key in _MEMO:
        return _MEMO[key]
    side = p.with_name(p.name + ".sha256")
    if sidecar:
        with contextlib.suppress(OSError, ValueError, RecursionError):  # any bad sidecar: hash again
            cached = json.loads(read_limited(side, 4096))
            if (isinstance(cached, dict) and cached.get("size") == st.st_size
                    and cached.get("mtime_ns") == st.st_mtime_ns
                    and isinstance(cached.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", cached["sha256"])):
                _MEMO[key] = cached["sha256"]
                return cached["sha256"]
    digest = sha256_file(p)
    _MEMO[key] = digest
    if sidecar and folders.sealed_above(side) is None and _sidecar_free(side):  # the output rule
        record = {"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "file": p.name}
        with contextlib.suppress(OSError):
            atomic_write(side, json.dumps(record).encode(), fsync=False)
    return digest


def _sidecar_free(side: Path) -> bool:
    """Whether ``side`` may be written: absent, or a regular file (not a link) holding capshim's own
    sidecar JSON (the keys :func:`cached_sha256` writes)."""
    try:
        st = os.lstat(side)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    try:
        cached = json.loads(read_limited(side, 4096))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(cached, dict) and set(cached) == {"sha256", "size", "mtime_ns", "file"}


def atomic_write(path: str | Path, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    Readers see the old content or the new one, never a part. On failure the
    temporary file is removed.

    Raises:
        StorageError: the disk is full or out of quota (ENOSPC, EDQUOT, EFBIG),
            names the file (exit 4).
        OSError: any other write error (permissions, not a folder ...).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        if is_full_disk(exc):
            raise storage_error(exc, path, " (nothing partial was left)") from None
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and is_full_disk(exc):
            raise storage_error(exc, path, " (nothing partial was left)") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def new_tmp_dir(final: Path) -> Path:
    """A fresh temporary folder ``<final>.tmp-XXXX`` beside ``final`` (same file system, so
    :func:`publish_dir` can rename); the caller removes it (see :func:`capshim.native.build.staging`).

    Raises:
        OSError: the parent folder cannot be created or written (a full disk: ENOSPC).
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=final.parent))


def publish_dir(tmp: Path, final: Path, replace: bool = False) -> None:
    """Move a finished folder into place atomically; when another process won the race, keep theirs.

    With ``replace``, an existing ``final`` is first renamed aside and removed
    after the new folder is in place, so ``final`` is missing only between two
    renames (never while a large folder is being deleted); when the second
    rename fails the old folder is put back.

    Raises:
        OSError: the rename failed and ``final`` does not exist (``tmp`` is left to the caller).
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    if replace and final.is_dir():
        old = Path(tempfile.mkdtemp(prefix=final.name + ".old-", dir=final.parent))
        os.rename(final, old / final.name)
        try:
            os.rename(tmp, final)
        except OSError:
            os.rename(old / final.name, final)
            raise
        finally:
            shutil.rmtree(old, ignore_errors=True)
        return
    try:
        os.rename(tmp, final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def write_sums(root: Path, names: list[str], *, fsync: bool = True) -> Path:
    """Write ``root/SHA256SUMS`` over ``names`` (paths relative to root), sorted, ``sha256sum -c`` format.

    A name with a newline, carriage return or backslash is written the way
    GNU ``sha256sum`` writes it: the line starts with a backslash and the
    name has ``\\n``, ``\\r`` and ``\\\\`` escapes (:func:`sum_line`).

    Raises:
        OSError: a file cannot be read; StorageError: the disk is full.
    """
    lines = [sum_line(sha256_file(root / rel), rel) for rel in sorted(names)]
    out = root / SUMS_NAME
    atomic_write(out, ("\n".join(lines) + "\n").encode(), fsync=fsync)
    return out


def sum_line(digest: str, rel: str) -> str:
    """One SHA256SUMS line for ``rel``, escaped as GNU ``sha256sum`` does when the name needs it.

    A name holding ``\\``, a newline or a carriage return gets a leading
    backslash on the line and ``\\\\``, ``\\n``, ``\\r`` in the name, so one
    file is always one line.
    """
    if any(c in rel for c in "\\\n\r"):
        esc = rel.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {esc}"
    return f"{digest}  {rel}"


def _unescape(name: str) -> str | None:
    """A name of an escaped SHA256SUMS line with its escapes undone, or None for an unknown or cut escape."""
    out, i = [], 0
    while i < len(name):
        c = name[i]
        if c == "\\":
            nxt = name[i + 1:i + 2]
            if nxt not in ("\\", "n", "r"):
                return None
            out.append({"\\": "\\", "n": "\n", "r": "\r"}[nxt])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _has_control(name: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)


def show_name(name: str) -> str:
    """A file name for a message: control characters and backslashes escaped, so it stays one line."""
    if not (_has_control(name) or "\\" in name):
        return name
    return name.encode("unicode_escape").decode("ascii")


def read_sums(root: Path, limit: int = 16 << 20) -> tuple[dict[str, str], list[str]]:
    """Parse ``root/SHA256SUMS`` (GNU ``sha256sum`` format, escaped lines included).

    Returns:
        ``({relative path: lowercase digest}, problems)``; problems name the
        line: malformed (an unknown escape too), a path that is absolute or
        climbs out with ``..``, a name with a control character, or a path
        listed twice (``sha256sum -c`` checks every line, so a duplicate line
        could hide a wrong one).

    Raises:
        OSError: the file is missing or unreadable (or not a regular file).
    """
    text = read_limited(root / SUMS_NAME, limit).decode("utf-8", errors="replace")
    sums: dict[str, str] = {}
    first_line: dict[str, int] = {}
    problems: list[str] = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        escaped = line.startswith("\\")
        m = _SUM_LINE.match(line[1:] if escaped else line)
        if not m:
            problems.append(f"{SUMS_NAME}: line {n} is malformed")
            continue
        name = _unescape(m.group("name")) if escaped else m.group("name")
        if name is None:
            problems.append(f"{SUMS_NAME}: line {n} is malformed (an unknown escape in the name)")
            continue
        if _has_control(name):
            problems.append(f"{SUMS_NAME}: line {n} names a file with a control character: {show_name(name)}")
            continue
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts:
            problems.append(f"{SUMS_NAME}: line {n} names a path outside the folder: {show_name(name)}")
            continue
        key = rel.as_posix()
        if key in sums:
            problems.append(f"{SUMS_NAME}: line {n} lists {show_name(key)} again (first on line "
                            f"{first_line[key]}); each file must be listed once")
            continue
        first_line[key] = n
        sums[key] = m.group("digest").lower()
    return sums, problems


def check_sums(root: Path, names: list[str] | None = None) -> list[str]:
    """Check files of ``root`` against its SHA256SUMS (all listed, or only ``names``).

    Returns:
        Problems, one string each, starting with the relative path; empty when all match.
    """
    try:
        sums, problems = read_sums(root)
    except OSError as exc:
        return [f"{SUMS_NAME}: {exc.strerror or exc}"]
    for rel in (names if names is not None else sorted(sums)):
        if rel not in sums:
            problems.append(f"{rel}: not listed in {SUMS_NAME}")
            continue
        try:
            ok = sha256_file(root / rel) == sums[rel]
        except OSError as exc:
            problems.append(f"{rel}: {exc.strerror or exc}")
            continue
        if not ok:
            problems.append(f"{rel}: checksum mismatch")
    return problems


_VERIFIED: dict[tuple[str, int, int, int, int], list[str]] = {}


def verified_sums(root: Path, names: list[str]) -> list[str]:
    """:func:`check_sums`, remembered per process by the size and mtime of each file and of SHA256SUMS.

    Cheap to call before every use of a cached build: the hashes are computed
    once per change of the files.
    """
    key_parts = []
    for rel in [SUMS_NAME, *names]:
        try:
            st = (root / rel).stat()
        except OSError:
            return check_sums(root, names)
        key_parts.append((rel, st.st_size, st.st_mtime_ns, st.st_ino))
    key = (str(root), *key_parts)
    if key not in _VERIFIED:
        _VERIFIED[key] = check_sums(root, names)
    return list(_VERIFIED[key])


def read_limited(path: str | Path, limit: int, *, truncate: bool = False) -> bytes:
    """Read at most ``limit`` bytes of a regular file, without blocking on a FIFO.

    With ``truncate`` a longer file gives its first ``limit`` bytes instead of an error.

    The file is opened with ``O_NONBLOCK`` and checked with ``fstat`` before
    any read, so a FIFO, a device (``/dev/zero``, ``/dev/full``) or a folder is
    refused at once.

    Raises:
        FileNotFoundError: the file does not exist.
        OSError: not a regular file (``EINVAL`` with a message saying so), or
            longer than ``limit`` bytes (``EFBIG``), or unreadable.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks, total = [], 0
        while True:
            block = os.read(fd, min(1 << 20, limit + 1 - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
            if total > limit:
                if truncate:
                    return b"".join(chunks)[:limit]
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        return b"".join(chunks)
    finally:
        os.close(fd)
