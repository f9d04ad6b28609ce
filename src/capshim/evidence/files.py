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
import stat
import sys
from pathlib import Path

from capshim import __version__, paths
from capshim.errors import CapshimError
from capshim.contracts.names import is_run_label  # noqa: F401 (the one rule; re-exported for the package)
from capshim.paths import StorageError

__all__ = ["EvidenceError", "STDOUT_SUFFIXES", "stdout_suffix", "sha256_file", "host_metadata", "strict_json", "finite_or_null", "nonfinite_path",
           "write_error", "utc_now", "is_run_label", "DOC_FILE", "DOC_LIMIT", "documentation_problem",
           "ATTESTATION_FILE", "ATTESTATION_LIMIT"]

DOC_FILE = "README.md"
"""A sealed folder's documentation: the one file a bundle or study may hold outside its seal.

The rule (docs/evidence.md, "A folder's README.md"): a regular file named README.md directly in a
sealed folder (a bundle, a study, or a study's nested bundle) describes the data and is written after
the seal (``capshim evidence readme``). The seal never lists it (SHA256SUMS is written without it);
verify leaves its words alone and names it as not sealed, but refuses it as a link, a FIFO or any
other special file (as any entry of a sealed folder), and above :data:`DOC_LIMIT` bytes. A README.md
that SHA256SUMS does list is checked as a sealed file, and then refused as outside the layout. Nowhere
else in the folder is a README.md anything but an unlisted file."""

ATTESTATION_FILE = "attestations.intoto.jsonl"
"""A sealed folder's signatures: DSSE envelopes of in-toto Statements, one a line (:mod:`.signing`).

Like :data:`DOC_FILE` it sits directly in a sealed folder (a bundle or a study) outside the seal:
SHA256SUMS never lists it (a signature is made after the seal and covers SHA256SUMS itself), and
``capshim evidence sign`` adds a line without touching a sealed file. Verify checks every line
against the files as they are now; one that SHA256SUMS lists is refused as outside the layout."""

ATTESTATION_LIMIT = 8 << 20
"""Bytes an attestation file may have (64 envelopes over a few thousand files fit well within)."""

DOC_LIMIT = 256 << 10
"""Bytes a folder's README.md may have (it is outside the seal, so it is kept small: its words only)."""


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




def documentation_problem(root: str | Path) -> str | None:
    """The problem of ``root/README.md`` as a folder's documentation (:data:`DOC_FILE`), or None.

    Only its size is judged here: None when it is absent, a regular file within :data:`DOC_LIMIT`
    bytes, or not a regular file at all (a link, FIFO or device is refused by the seal's walk,
    :func:`capshim.evidence.seal.foreign_entries`, which never opens it). Nothing is read.
    """
    try:
        st = os.lstat(Path(root) / DOC_FILE)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and st.st_size > DOC_LIMIT:
        return (f"{DOC_FILE}: {st.st_size} bytes, over the {DOC_LIMIT // 1024} KiB a folder's documentation "
                "may have (it is outside the seal, so only words belong there)")
    return None
