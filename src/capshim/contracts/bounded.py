"""Limits on what capshim reads from outside that is not a file: one place for each.

Files have their readers' limits (:func:`capshim.paths.read_limited`: regular files only, so a
FIFO or ``/dev/zero`` is refused before a read; :mod:`capshim.jsonread` and
:mod:`capshim.contracts.tomlread`: size, depth, digits). This module bounds the rest:

- text given on the command line that capshim parses (a ``db`` selection or filter value, a
  date, a ``--metric regex:`` pattern) has at most :data:`MAX_ARG_CHARS` characters
  (:func:`text`);
- a user's regular expression runs on a workload's output (at most
  ``capshim.bench.llamabench.MAX_OUTPUT_BYTES``) for at most :data:`PATTERN_CPU_S` seconds
  of CPU time (:func:`finditer`): Python's ``re`` backtracks, and a pattern such as ``(a+)+$``
  on a long line of ``a`` takes years. The stop is the process's virtual-time timer
  (``ITIMER_VIRTUAL``, ``SIGVTALRM``), which ``re`` notices while it matches (it checks for
  signals as it goes), and which the seal guard's wall-clock timer (``SIGALRM``) does not use.

Past a limit: a :class:`~capshim.errors.UsageError` (exit 2) of one line naming the input.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading

from capshim.errors import UsageError

__all__ = ["MAX_ARG_CHARS", "PATTERN_CPU_S", "text", "finditer"]

MAX_ARG_CHARS = 4096
"""Characters a selection, filter value, date or pattern given on the command line may have (a
date is 10 to 32, a bundle name at most 64, a selection of every filter a few hundred)."""

PATTERN_CPU_S = 2.0
"""Seconds of CPU time a user's pattern may take on one run's output (a linear pattern reads
256 MiB in well under a second)."""


def text(value: str, where: str, limit: int = MAX_ARG_CHARS) -> str:
    """``value`` when it has at most ``limit`` characters.

    Raises:
        UsageError: (exit 2) naming ``where`` and the length, before anything parses it.
    """
    if isinstance(value, str) and len(value) > limit:
        raise UsageError(f"{where}: {len(value)} characters (at most {limit}): {value[:24]!r}...")
    return value


class _Slow(Exception):
    pass


def _too_slow(signum, frame):
    raise _Slow()


def finditer(rx: re.Pattern, subject: str, where: str) -> list[re.Match]:
    """Every match of ``rx`` in ``subject``, within :data:`PATTERN_CPU_S` seconds of CPU time.

    The time limit holds in the main thread, where the signal handler runs (elsewhere the
    matches are found without one; capshim matches in its main thread).

    Raises:
        UsageError: (exit 2) the pattern took longer: names ``where``, the pattern and the
            input's length, and says why (backtracking).
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return list(rx.finditer(subject))
    old = signal.signal(signal.SIGVTALRM, _too_slow)
    try:
        signal.setitimer(signal.ITIMER_VIRTUAL, PATTERN_CPU_S)
        try:
            return list(rx.finditer(subject))
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    except _Slow:
        raise UsageError(f"{where}: the pattern {rx.pattern[:60]!r} took more than {PATTERN_CPU_S:g} s on "
                         f"{len(subject)} characters (nested repetition such as (a+)+ backtracks without "
                         "end); write it without a repeated group") from None
    finally:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGVTALRM, old)
