"""Stop signals, their exit codes, and the guard that keeps a seal.

Ctrl-C (SIGINT), SIGTERM and SIGHUP (the terminal closed) stop every command
within seconds, whatever it is doing; capshim then exits 128 + the signal's
number: 130, 143 and 129 on Linux and macOS (POSIX leaves the numbers to the
system; these are the values of ``signal.h`` on both). The one mechanism is
:func:`ends_on_signal`, held by capshim's entry around every command; a bench,
a study and ``capshim run`` hold the signals themselves while they run (below,
and :mod:`capshim.launch`).

:class:`SealGuard` is installed before the first run starts and stays until
the seal is written: the first signal only records a stop request (the run in
progress is ended and recorded), later signals shorten the slow optional
steps, and none of them can skip the seal.

A study (ablate, tune, kernels) holds one guard from before its first bench
to its study seal; each bench runs inside :meth:`SealGuard.stoppable`, where
the first signal stops the runs (:class:`StopRequested`, a KeyboardInterrupt,
which the bench's runner records as an interruption) unless a bundle is being
sealed at that moment (a nested guard is entered): then it only waits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

from capshim.contracts import messages

STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)

SEAL_WAIT_S = 10.0
"""Seconds the slow finalize steps get after the first stop signal."""

STOP_GRACE_S = 5.0
"""Seconds a command outside a seal has, after its first stop signal, to end by itself (its
cleanup: a tool killed, a temporary folder removed); then, or at a second signal, capshim exits
128+N at once (:func:`ends_on_signal`). The children it starts in their own process group (a
bench's runs, ``capshim run``'s program) are ended by the handlers that hold the signals then."""


def _end_now(signum: int, why: str) -> None:
    """Say why on stderr and exit 128+N without cleanup."""
    with contextlib.suppress(OSError, ValueError):
        os.write(2, f"capshim: {signal.Signals(signum).name}: {why}; stopped now\n".encode())
    os._exit(exit_code(signum))


@contextlib.contextmanager
def ends_on_signal():
    """Held around every command (capshim's entry, :mod:`capshim.cli.app`): a stop signal ends it
    within :data:`STOP_GRACE_S` seconds whatever it is doing, with exit 128+N and no traceback.

    The first stop signal raises :class:`StopRequested` where the command is (a read, a wait, a
    pattern: ``re`` checks for signals while it matches), so its cleanup runs and the entry exits
    128+N. A watchdog thread learns of the signal through the interpreter's wakeup descriptor
    (written by the C-level handler even while the main thread is inside a library call that
    does not return, a database waiting on a lock): if capshim still runs :data:`STOP_GRACE_S`
    seconds later, or at a second signal, it ends the process (:func:`_end_now`). A signal that
    another handler took (a :class:`SealGuard` sealing a bundle, ``capshim run`` forwarding it to
    its program) follows that handler's rule. A signal ignored when capshim started (``nohup``)
    stays ignored. Only in the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    first: list[int] = []

    def handler(signum, frame):
        if first:
            _end_now(first[0], "a second stop signal")
        first.append(signum)
        raise StopRequested(signal.Signals(signum).name)

    old = {}
    for sig in STOP_SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                old[sig] = signal.signal(sig, handler)
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    try:
        prev_fd = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
    except (ValueError, OSError):
        prev_fd = None
    if prev_fd is not None:
        threading.Thread(target=_watchdog, args=(rfd, handler), name="capshim-stop", daemon=True).start()
    try:
        yield
    finally:
        if prev_fd is not None:
            with contextlib.suppress(ValueError, OSError):
                signal.set_wakeup_fd(prev_fd)
        os.close(wfd)  # the watchdog reads the end of the pipe and stops
        if prev_fd is None:
            os.close(rfd)
        for sig, prev in old.items():  # one that a guard left ignored (capshim is stopping) stays so
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(sig) is handler:
                    signal.signal(sig, prev if not first else signal.SIG_IGN)


def _watchdog(rfd: int, handler) -> None:
    """The thread of :func:`ends_on_signal`: reads signal numbers from the wakeup descriptor ``rfd``."""
    import select

    stops = {int(s) for s in STOP_SIGNALS}
    first, deadline = None, None
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([rfd], [], [], wait)
        if ready:
            got = os.read(rfd, 64)
            if not got:  # the command ended (ends_on_signal closed the pipe)
                os.close(rfd)
                return
            for num in got:
                if num not in stops or signal.getsignal(num) is not handler:
                    continue  # not a stop signal, or another handler's (a seal guard, capshim run)
                if first is not None:
                    _end_now(first, "a second stop signal")
                first, deadline = num, time.monotonic() + STOP_GRACE_S
        elif deadline is not None and time.monotonic() >= deadline:
            if signal.getsignal(first) is not handler:  # a seal guard took over: its rule applies
                deadline = time.monotonic() + STOP_GRACE_S
                continue
            _end_now(first, f"still busy {STOP_GRACE_S:g} s after the signal")


def exit_code(name: str | int | None) -> int:
    """The exit status for a stop by signal ``name`` (``"SIGTERM"`` or a number): 128 + N; 130 when unknown."""
    if name is None:
        return 128 + signal.SIGINT
    try:
        num = int(name) if isinstance(name, int) else int(signal.Signals[name])
    except (KeyError, ValueError):
        return 128 + signal.SIGINT
    return 128 + num


class StepInterrupted(BaseException):
    """Raised inside an abortable step (:meth:`SealGuard.abortable`) by a signal that stops it.

    A BaseException so that a step's own ``except Exception`` does not swallow it.
    ``signal_name`` is the signal that asked to stop (``"SIGINT"`` ...).
    """

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


class StopRequested(KeyboardInterrupt):
    """Raised by the first stop signal inside :meth:`SealGuard.stoppable`: stop the runs, then seal.

    A KeyboardInterrupt, so that a bench's runner ends the run in progress and
    seals what finished, as it does for Ctrl-C. ``signal_name``: ``"SIGINT"`` ...
    """

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


class SealGuard:
    """Holds Ctrl-C / SIGTERM / SIGHUP so that a bundle or study is always sealed.

    The first such signal prints that the bundle is being sealed and gives the
    slow steps (report, chart: run inside :meth:`abortable`; the analysis is not one)
    :data:`SEAL_WAIT_S` seconds more; a second signal, or the end of that wait,
    interrupts the step that is running (:class:`StepInterrupted`, raised
    inside the step only) and the remaining slow steps are skipped. A signal
    outside a slow step only waits: the data files, metadata.json and
    SHA256SUMS are always written. After the seal :meth:`exit_if_signalled`
    exits 128+N. Guards nest: an inner one shares the outer one's state. Only
    the main thread can hold signal handlers: elsewhere the guard does nothing.
    """

    _active: "SealGuard | None" = None

    def __init__(self, what: str = "the bundle"):
        self.what = what
        self.first: tuple[int, float] | None = None
        self.abort: str | None = None
        self.in_step = 0
        self.old: dict = {}
        self.outer: SealGuard | None = None
        self.nested = 0
        self.stop_depth = 0

    @property
    def signal_name(self) -> str | None:
        """The first stop signal received (``"SIGINT"``, ``"SIGTERM"``, ``"SIGHUP"``), or None."""
        return signal.Signals(self.first[0]).name if self.first else None

    def _handler(self, signum, frame):
        now = time.monotonic()
        alarm = signum == getattr(signal, "SIGALRM", None)
        if alarm:
            if self.first is None:
                return
            self.abort = self.abort or signal.Signals(self.first[0]).name
        elif self.first is None:
            self.first = (signum, now)
            if self.stop_depth and not self.nested:
                messages.emit(f"{signal.Signals(signum).name}: stopping; what finished is sealed whatever "
                              f"happens (signal again to skip the slow steps of the seal)")
                self._start_alarm()
                raise StopRequested(signal.Signals(signum).name)
            messages.emit(f"{signal.Signals(signum).name}: stopping; {self.what} is sealed with what finished, "
                          f"whatever happens; slow steps (report, chart) get {SEAL_WAIT_S:g} s more "
                          "(signal again to skip them now)")
            self._start_alarm()
            return
        else:
            self.abort = self.abort or signal.Signals(signum).name
        if self.in_step:
            raise StepInterrupted(self.abort)

    def _start_alarm(self) -> None:
        if hasattr(signal, "setitimer") and getattr(signal, "SIGALRM", None) in self.old:
            with contextlib.suppress(ValueError, OSError):
                signal.setitimer(signal.ITIMER_REAL, SEAL_WAIT_S)

    @contextlib.contextmanager
    def stoppable(self):
        """Run the measuring part (a bench's runs): the first stop signal raises :class:`StopRequested` here.

        Not while a nested guard is entered (a bundle being sealed): then the
        signal only waits, like any later one. Raises StopRequested at once when
        a signal already arrived (nothing more is started after a stop request).
        """
        if self.first is not None:
            raise StopRequested(self.signal_name)
        self.stop_depth += 1
        try:
            yield
        finally:
            self.stop_depth -= 1

    @contextlib.contextmanager
    def abortable(self):
        """Run a slow, optional step: a stopping signal raises :class:`StepInterrupted` in it.

        Raises StepInterrupted at once when an earlier signal already stopped the slow steps.
        """
        if self.abort:
            raise StepInterrupted(self.abort)
        self.in_step += 1
        try:
            yield
        finally:
            self.in_step -= 1

    def __enter__(self):
        if SealGuard._active is not None:
            self.outer = SealGuard._active
            self.outer.nested += 1
            return self.outer
        if threading.current_thread() is threading.main_thread():
            for sig in (*STOP_SIGNALS, getattr(signal, "SIGALRM", None)):
                if sig is None:
                    continue
                with contextlib.suppress(ValueError, OSError):
                    self.old[sig] = signal.signal(sig, self._handler)
            SealGuard._active = self
        return self

    def __exit__(self, *exc):
        if self.outer is not None:
            self.outer.nested -= 1
            return False
        if SealGuard._active is self:
            SealGuard._active = None
        if hasattr(signal, "setitimer") and getattr(signal, "SIGALRM", None) in self.old:
            with contextlib.suppress(ValueError, OSError):
                signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, old in self.old.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, old)
        self.old = {}
        return False

    def ignore_after(self) -> None:
        """Leave further stop signals ignored when the guard ends (capshim is stopping already).

        Call it inside the guard once capshim will exit because of a signal: a burst of signals
        after the guard would otherwise end the process by the signal's default action before
        it exits with 128+N. Nothing for an inner guard, or outside the main thread.
        """
        if self.outer is None:
            for sig in STOP_SIGNALS:
                if sig in self.old:
                    self.old[sig] = signal.SIG_IGN

    def exit_if_signalled(self) -> None:
        """After the seal: a signal that waited stops capshim now (exit 128+N); nothing for an inner guard."""
        if self.first is not None and self.outer is None:
            messages.emit(f"{self.what} sealed; stopping ({signal.Signals(self.first[0]).name})")
            raise SystemExit(128 + self.first[0])
