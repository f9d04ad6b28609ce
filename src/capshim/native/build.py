"""Compile native sources into a per-source-hash cache folder.

The folder is ``$XDG_CACHE_HOME/capshim/native/<name>-<hash>`` (``~/.cache``
when unset), where the hash covers the sources and the compiler command, so an
edited source or flag rebuilds and an unchanged one is reused.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from capshim.errors import BuildError

WARNINGS = ["-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wconversion", "-Wno-sign-conversion"]


def cache_root() -> Path:
    """The capshim cache folder (``$XDG_CACHE_HOME/capshim`` or ``~/.cache/capshim``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "capshim"


def source_dir(api: str) -> Path:
    """The folder of the C sources for ``api`` inside the installed package."""
    return Path(str(resources.files("capshim.native") / api))


def compiler() -> str:
    """The C compiler's name: ``$CC``, else ``cc`` (checked only when something must be compiled)."""
    return os.environ.get("CC", "cc")


def build_dir(name: str, sources: list[Path], commands: list[list[str]]) -> Path:
    """The cache folder for these sources and commands (not created)."""
    h = hashlib.sha256()
    for src in sorted(sources):
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    for cmd in commands:
        h.update(("\0".join(cmd)).encode())
    return cache_root() / "native" / f"{name}-{h.hexdigest()[:12]}"


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


def publish(tmp: Path, final: Path) -> None:
    """Move a finished build folder into place atomically (another process may race us)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def new_tmp(final: Path) -> Path:
    """A fresh temporary folder beside ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=final.parent))
