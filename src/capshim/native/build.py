"""Compile native sources into a per-source-hash cache folder.

The folder is ``<cache root>/native/<name>-<hash>`` (the cache root and the
hash are :mod:`capshim.paths`' rules), where the hash covers the sources and the
compiler command, so an edited source or flag rebuilds and an unchanged one is
reused. A build happens in a temporary folder beside it (:func:`staging`) that
is published by one rename (:func:`publish`) and never left behind; a cache
that cannot be written (a full disk) is :class:`~capshim.paths.StorageError`,
exit 4, naming the file or folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from importlib import resources
from pathlib import Path

from capshim.contracts import bounded
from capshim.contracts import pasteable
from capshim import __version__, paths
from capshim.errors import BuildError
from capshim.contracts import messages

#: The C define that gives a native build capshim's version (:data:`capshim.__version__`): the shims
#: report it in their ``loaded`` status event (docs/status.md). Part of every shim's compile
#: command, so a new version rebuilds (the cache key covers the commands).
VERSION_DEFINE = f'-DCAPSHIM_VERSION_STRING="{__version__}"'


def version_number(version: str = __version__) -> int:
    """``MAJOR.MINOR.PATCH`` as one integer, ``MAJOR * 10000 + MINOR * 100 + PATCH`` (0.1.0 -> 100,
    1.2.3 -> 10203): the Vulkan layer manifest's ``implementation_version`` (an integer that grows
    with each release, the loader's VkLayerProperties.implementationVersion; vulkaninfo shows it
    as "layer version 100"). A suffix after the patch number (``0.2.0rc1``) is left out.

    Raises:
        ValueError: not three dot-separated numbers, or MINOR or PATCH above 99.
    """
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:[a-z+.-].*)?", version)
    if not m or int(m[2]) > 99 or int(m[3]) > 99:
        raise ValueError(f"capshim version {version!r}: expected MAJOR.MINOR.PATCH, MINOR and PATCH at most 99")
    return int(m[1]) * 10000 + int(m[2]) * 100 + int(m[3])


WARNINGS = ["-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wconversion", "-Wno-sign-conversion"]

_HINT = " (free space in the capshim cache, or point CAPSHIM_CACHE_DIR elsewhere: docs/paths.md)"
_NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device" (glibc and macOS), as compilers print it


#: The folder of what the shims share (``native/common``): the configuration parser and its
#: generated limits, the status-event writer, the device-name rule and the configuration fuzz
#: driver. It includes no API's header (tests/test_layers.py checks); a shim's build copies the
#: files it needs next to its own (builds are flat, so ``#include "config.h"`` finds them).
COMMON = "common"
#: Every file of ``native/common`` (a test checks the folder holds exactly these).
COMMON_FILES = ("config.c", "config.h", "config_limits.h", "devname.h", "status.c", "status.h", "fuzz_config.c")


def source_dir(api: str) -> Path:
    """The folder of the C sources for ``api`` (or :data:`COMMON`) inside the installed package."""
    return Path(str(resources.files("capshim.native") / api))


def common_sources(names: tuple[str, ...] | list[str] = COMMON_FILES) -> list[Path]:
    """Paths of ``names`` in ``native/common`` (all of :data:`COMMON_FILES` by default)."""
    return [source_dir(COMMON) / n for n in names]


def compiler() -> str:
    """The C compiler's name: ``$CC``, else ``cc`` (checked only when something must be compiled)."""
    return os.environ.get("CC", "cc")


def build_dir(name: str, sources: list[Path], commands: list[list[str]]) -> Path:
    """The cache folder for these sources and commands (not created).

    Raises:
        OSError: a source cannot be read.
    """
    return paths.cache_root() / "native" / f"{name}-{paths.content_key(sources, commands)}"


def run_compiler(cmd: list[str], cwd: Path | None = None) -> None:
    """Run one compiler (or signing) command.

    Raises:
        BuildError: the program is missing or exits non-zero (exit 2); the message holds
            the command line and the end of its output.
        StorageError: it exits non-zero saying "No space left on device" (exit 4), naming
            the folder it was writing into (``cwd``).
    """
    if shutil.which(cmd[0]) is None:
        raise BuildError(f"'{cmd[0]}' not found (install build-essential, or set CC); command: {pasteable.command(*cmd)}")
    try:
        proc = bounded.run(cmd, cwd=cwd)
    except OSError as exc:
        raise BuildError(f"cannot run {cmd[0]}: {exc.strerror} (command: {pasteable.command(*cmd)})") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
        if any(_NO_SPACE in line for line in tail):
            full = OSError(errno.ENOSPC, _NO_SPACE)
            raise paths.storage_error(full, cwd or Path.cwd(), f"{_HINT}; command: {pasteable.command(*cmd)}")
        raise BuildError(f"build failed (exit {proc.returncode}): {pasteable.command(*cmd)}\n" + "\n".join(tail))


@contextlib.contextmanager
def staging(final: Path):
    """A temporary folder beside ``final`` to build into (``<final>.tmp-XXXX``), never left behind.

    Use::

        with staging(final) as tmp:
            ...                      # write and compile into tmp
            publish(tmp, final)      # the last step: one rename

    Whatever ends the block early (a compile error, a signal, a full disk),
    the temporary folder is removed.

    Raises:
        StorageError: (exit 4) an OSError inside the block or while creating the
            folder (a full cache disk, no permission), naming the file or folder
            the system named, else ``final`` (a failed ``write`` names no file).
    """
    try:
        tmp = paths.new_tmp_dir(final)
    except OSError as exc:
        raise paths.storage_error(exc, exc.filename or final.parent, _HINT) from None
    try:
        yield tmp
    except OSError as exc:
        raise paths.storage_error(exc, exc.filename or final, _HINT) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def publish(tmp: Path, final: Path, replace: bool = False) -> None:
    """Move a finished build folder into place (:func:`capshim.paths.publish_dir`).

    Raises:
        StorageError: (exit 4) the rename failed (``final`` keeps its old build, if any), naming ``final``.
    """
    try:
        paths.publish_dir(tmp, final, replace=replace)
    except OSError as exc:
        raise paths.storage_error(exc, final, _HINT) from None


def cached_ok(folder: Path, names: list[str]) -> bool:
    """Whether a cached build folder holds ``names`` and they match its SHA256SUMS.

    Cheap before every use: the hashes are computed once per change of size or
    mtime (:func:`capshim.paths.verified_sums`). A mismatch (a corrupted or
    edited cached library, which would otherwise crash the application with
    SIGBUS and look like a layer that "never loaded") is said on stderr, and
    the caller rebuilds.
    """
    if not folder.is_dir() or not all((folder / n).is_file() for n in names):
        return False
    problems = paths.verified_sums(folder, names)
    if problems:
        messages.emit(f"cached build {folder} does not match its SHA256SUMS ({'; '.join(problems)}); rebuilding")
    return not problems
