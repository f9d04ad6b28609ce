"""Environment variables whose names or values are not UTF-8.

POSIX environments are bytes. Python decodes them with surrogate escapes, so a
value such as ``b"caf\\xe9"`` reaches capshim as ``"caf\\udce9"``, which JSON
encoders and UTF-8 writers refuse. capshim carries such variables unchanged to
the workload (``os.environb``) and records them escaped, never fails on them.
"""

from __future__ import annotations

import os


def is_clean(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogates from undecodable bytes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def recordable(text: str) -> str:
    """``text`` safe to write as UTF-8 JSON: undecodable bytes shown as ``\\xNN``."""
    if is_clean(text):
        return text
    raw = os.fsencode(text)
    return raw.decode("utf-8", errors="backslashreplace")


def record(environ: dict[str, str]) -> dict[str, str]:
    """A copy of ``environ`` with every name and value made :func:`recordable`."""
    return {recordable(k): recordable(v) for k, v in environ.items()}
