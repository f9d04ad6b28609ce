"""summary.json: the summary as strict JSON (no NaN or infinities; ``allow_nan=False``)."""

from __future__ import annotations

import json as _json

__all__ = ["serialize"]


def serialize(summary: dict) -> str:
    """The summary as indented JSON text ending in a newline.

    Raises:
        ValueError: a value is NaN or infinite (a summary holds finite numbers only).
    """
    return _json.dumps(summary, indent=2, allow_nan=False) + "\n"
