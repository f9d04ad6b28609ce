"""Stop signals, their exit codes, and the guard that keeps a seal.

Ctrl-C (SIGINT), SIGTERM and SIGHUP (the terminal closed) stop a bench, a
study or ``capshim run``; capshim then exits 128 + the signal's number: 130,
143 and 129 on Linux and macOS (POSIX leaves the numbers to the system; these
are the values of ``signal.h`` on both).

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
import signal
import threading
import time

from capshim.contracts import messages

STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)

SEAL_WAIT_S = 10.0
"""Seconds the slow finalize steps get after the first stop signal."""


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
            messages.emit(f"{signal.Signals(signum).name} while sealing {self.what}: the seal is written "
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
