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

- a tool capshim runs and reads (its probes, ``nm``, ``git``, ``ssh-keygen``, the compiler,
  ``sysctl``, ``codesign``) through :func:`run`: at most :data:`MAX_TOOL_OUTPUT` bytes of each
  stream are kept (the rest is read and dropped, so the tool never blocks on a full pipe), a
  time limit, and the tool killed when capshim is stopped by a signal.

Past a limit: a :class:`~capshim.errors.UsageError` (exit 2) of one line naming the input.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import threading

from capshim.errors import UsageError

__all__ = ["MAX_ARG_CHARS", "PATTERN_CPU_S", "MAX_TOOL_OUTPUT", "TOOL_TIMEOUT_S", "text", "finditer", "run"]

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


def finditer(rx: re.Pattern, subject: str, where: str, most: int | None = None) -> list[re.Match]:
    """Every match of ``rx`` in ``subject`` (the first ``most``), within :data:`PATTERN_CPU_S`
    seconds of CPU time.

    The time limit holds in the main thread, where the signal handler runs (elsewhere the
    matches are found without one; capshim matches in its main thread).

    Raises:
        UsageError: (exit 2) the pattern took longer: names ``where``, the pattern and the
            input's length, and says why (backtracking).
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return list(itertools.islice(rx.finditer(subject), most))
    old = signal.signal(signal.SIGVTALRM, _too_slow)
    try:
        signal.setitimer(signal.ITIMER_VIRTUAL, PATTERN_CPU_S)
        try:
            return list(itertools.islice(rx.finditer(subject), most))
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    except _Slow:
        raise UsageError(f"{where}: the pattern {rx.pattern[:60]!r} took more than {PATTERN_CPU_S:g} s on "
                         f"{len(subject)} characters (nested repetition such as (a+)+ backtracks without "
                         "end); write it without a repeated group") from None
    finally:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGVTALRM, old)


MAX_TOOL_OUTPUT = (64 << 20) + 1
"""Bytes of a tool's stdout (and of its stderr) that :func:`run` keeps: one more than the JSON
reader takes (:data:`capshim.jsonread.MAX_BYTES`, 64 MiB), so a probe that prints more is refused
by it as too large rather than read in part."""

TOOL_TIMEOUT_S = 600.0
"""Seconds a tool may run when its caller gives no limit (a compiler building a shim takes tens)."""


def _drain(stream, keep: list, limit: int) -> None:
    """Read ``stream`` to its end, keeping its first ``limit`` bytes in ``keep`` (a thread)."""
    total = 0
    with contextlib.suppress(OSError, ValueError):
        while True:
            block = stream.read(1 << 16)
            if not block:
                break
            if total < limit:
                keep.append(block[:limit - total])
            total += len(block)
    keep.append(total)


def run(cmd: list[str], *, timeout: float | None = TOOL_TIMEOUT_S, text: bool = True, input=None,
        env: dict | None = None, cwd=None, limit: int = MAX_TOOL_OUTPUT,
        group: bool = True) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True)`` with each stream kept to ``limit`` bytes.

    With ``group`` the tool runs in a process group of its own, so that what it starts (a
    compiler's passes) ends with it; without, it stays in capshim's (``ssh-keygen`` asking for a
    passphrase on the terminal). When capshim is stopped (a KeyboardInterrupt, such as
    :class:`capshim.contracts.signals.StopRequested`) or the time is up, the tool (its group) is
    killed with SIGKILL: a tool that ignores signals cannot hold capshim.

    Returns:
        A CompletedProcess; ``stdout``/``stderr`` are str (``text``, UTF-8, invalid bytes
        replaced) or bytes, at most ``limit`` bytes each.

    Raises:
        subprocess.TimeoutExpired: after ``timeout`` seconds (None: no limit), the tool killed.
        OSError: the tool cannot be started.
    """
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                            process_group=0 if group else None)

    def kill() -> None:
        with contextlib.suppress(OSError):
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
    outs: tuple[list, list] = ([], [])
    readers = [threading.Thread(target=_drain, args=(s, k, limit), daemon=True)
               for s, k in ((proc.stdout, outs[0]), (proc.stderr, outs[1]))]
    for t in readers:
        t.start()
    try:
        if input is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                proc.stdin.write(input.encode() if isinstance(input, str) else input)
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill()
            proc.wait()
            raise subprocess.TimeoutExpired(cmd, timeout) from None
    except BaseException:
        kill()
        proc.wait()
        raise
    finally:
        for t in readers:
            t.join(timeout=5)
        for s in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                s.close()
    data = [b"".join(b for b in k if isinstance(b, bytes)) for k in outs]
    if text:
        data = [d.decode("utf-8", errors="replace") for d in data]
    return subprocess.CompletedProcess(cmd, proc.returncode, data[0], data[1])
