"""The files of a bundle as bytes: strict JSON, host facts, hashes, and the error for a failed write.

Nothing here knows a bundle's layout; :mod:`.bundle` writes these bytes,
:mod:`.verify` reads them back.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
from pathlib import Path

from capshim import __version__, paths
from capshim.errors import CapshimError
from capshim.contracts.names import is_run_label  # noqa: F401 (the one rule; re-exported for the package)
from capshim.paths import StorageError

__all__ = ["EvidenceError", "STDOUT_SUFFIXES", "stdout_suffix", "sha256_file", "host_metadata", "strict_json", "finite_or_null", "nonfinite_path",
           "write_error", "utc_now", "is_run_label"]


#: The names a run's stdout has in ``raw/``: ``.json`` when it is JSON, ``.txt`` otherwise. Bundles
#: sealed before this rule name every stdout ``.json``; readers accept both.
STDOUT_SUFFIXES = (".json", ".txt")


def stdout_suffix(data: bytes) -> str:
    """``.json`` when ``data`` (a run's whole stdout) parses as JSON (UTF-8, strict: no NaN), else ``.txt``:
    a file in ``raw/`` is named by what it holds (llama-bench's JSON, a command's text, an empty stdout)."""
    try:
        json.loads(data.decode("utf-8"), parse_constant=_refuse)
    except (ValueError, RecursionError):
        return ".txt"
    return ".json"


def _refuse(name: str):
    raise ValueError(f"{name} is not JSON")


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


def utc_now() -> str:
    """The current UTC time as ``YYYY-mm-ddTHH:MM:SSZ`` (ISO 8601, seconds)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def host_metadata() -> dict:
    """Facts about this machine and tool: host name, OS, CPU, Python, capshim version, UTC time."""
    return {
        "host": platform.node(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "capshim": __version__,
        "created_utc": utc_now(),
    }


def strict_json(value) -> bytes:
    """``value`` as strict JSON (RFC 8259: no NaN or Infinity), indented, with a final newline.

    Raises:
        ValueError: a float is NaN or infinite (names its JSON path).
    """
    bad = nonfinite_path(value, "$")
    if bad:
        raise ValueError(f"{bad}: not a finite number (JSON has no NaN or Infinity)")
    return (json.dumps(value, indent=2, sort_keys=False, default=str, allow_nan=False) + "\n").encode()


def nonfinite_path(value, where: str = "$") -> str | None:
    """The JSON path (``$.a[1]``) of the first NaN or infinite float in ``value``, or None; iterative."""
    stack = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return at
        if isinstance(v, dict):
            stack.extend(reversed([(x, f"{at}.{k}") for k, x in v.items()]))
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed([(x, f"{at}[{i}]") for i, x in enumerate(v)]))
    return None


def finite_or_null(value):
    """A copy of a JSON-ready value with every NaN or infinite float replaced by None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


def write_error(exc: OSError, what: str) -> CapshimError:
    """The error for a failed write: StorageError (exit 4) for a full disk or quota, else EvidenceError (exit 2).

    ``what`` names the file or folder; the system's reason follows it.
    """
    if paths.is_full_disk(exc):
        return StorageError(f"{what}: {exc.strerror}")
    return EvidenceError(f"{what}: {exc.strerror or exc}")


