"""Compile native sources into a per-source-hash cache folder.

The folder is ``<cache root>/native/<name>-<hash>`` (the cache root and the
hash are :mod:`capshim.paths`' rules), where the hash covers the sources and the
compiler command, so an edited source or flag rebuilds and an unchanged one is
reused.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from capshim import paths
from capshim.errors import BuildError

WARNINGS = ["-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wconversion", "-Wno-sign-conversion"]


def cache_root() -> Path:
    """The capshim cache folder: :func:`capshim.paths.cache_root`."""
    return paths.cache_root()


def source_dir(api: str) -> Path:
    """The folder of the C sources for ``api`` inside the installed package."""
    return Path(str(resources.files("capshim.native") / api))


def compiler() -> str:
    """The C compiler's name: ``$CC``, else ``cc`` (checked only when something must be compiled)."""
    return os.environ.get("CC", "cc")


def build_dir(name: str, sources: list[Path], commands: list[list[str]]) -> Path:
    """The cache folder for these sources and commands (not created)."""
    return paths.cache_root() / "native" / f"{name}-{paths.content_key(sources, commands)}"


def run_compiler(cmd: list[str], cwd: Path | None = None) -> None:
    """Run one compiler (or signing) command.

    Raises:
        BuildError: the program is missing or exits non-zero; the message holds
            the command line and the end of its output.
    """
    if shutil.which(cmd[0]) is None:
        raise BuildError(f"'{cmd[0]}' not found (install build-essential, or set CC); command: {shlex.join(cmd)}")
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    except OSError as exc:
        raise BuildError(f"cannot run {cmd[0]}: {exc.strerror} (command: {shlex.join(cmd)})") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
        raise BuildError(f"build failed (exit {proc.returncode}): {shlex.join(cmd)}\n" + "\n".join(tail))


publish = paths.publish_dir
new_tmp = paths.new_tmp_dir


def cached_ok(folder: Path, names: list[str]) -> bool:
    """Whether a cached build folder holds ``names`` and they match its SHA256SUMS.

    Cheap before every use: the hashes are computed once per change of size or
    mtime (:func:`capshim.paths.verified_sums`). A mismatch (a corrupted or
    edited cached library, which would otherwise crash the application with
    SIGBUS and look like a layer that "never loaded") is said on stderr, and
    the caller rebuilds.
    """
    import sys

    if not folder.is_dir() or not all((folder / n).is_file() for n in names):
        return False
    problems = paths.verified_sums(folder, names)
    if problems:
        print(f"capshim: cached build {folder} does not match its SHA256SUMS ({'; '.join(problems)}); "
              "rebuilding", file=sys.stderr)
    return not problems
