""""Did you mean" for a name outside a closed set: the one rule every command uses.

A misspelt profile key, command, preset, study dimension, metric, profile name
or choice gets the known name closest to it, compared case-insensitively with
:func:`difflib.get_close_matches` (``shaderfloat16`` -> ``shaderFloat16``,
``benhc`` -> ``bench``). Nothing is suggested when no known name is close, so
a suggestion is never a guess at random.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["CUTOFF", "closest", "did_you_mean"]

#: The least :class:`difflib.SequenceMatcher` ratio a suggestion needs (0..1). 0.75 takes one
#: letter dropped, doubled or swapped in a name of four letters or more (``benhc``, ``wal``,
#: ``tinny``) and refuses unrelated names of the same length.
CUTOFF = 0.75


def closest(name: str, known: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The name of ``known`` closest to ``name`` (case-insensitive, ratio at least ``cutoff``),
    spelt as ``known`` spells it, or None when none is close or ``name`` is itself known."""
    folded: dict[str, str] = {}
    for k in known:
        folded.setdefault(str(k).lower(), str(k))
    if name in folded.values():
        return None
    match = difflib.get_close_matches(str(name).lower(), list(folded), n=1, cutoff=cutoff)
    return folded[match[0]] if match else None


def did_you_mean(name: str, known: Iterable[str], cutoff: float = CUTOFF) -> str:
    """`` (did you mean 'X'?)`` for :func:`closest`, or "" when none is close: appended to the
    message that names the unknown ``name``."""
    match = closest(name, known, cutoff)
    return f" (did you mean '{match}'?)" if match else ""
