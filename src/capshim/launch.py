"""Run one command with capability shims enabled for that process alone (``capshim run``).

The launcher resolves the profiles, asks the backend of each profile's API for
the environment that enables its shim, starts the command, waits for it, and
classifies the shims from the status file (:mod:`capshim.status`).

Children: the command runs under ``/bin/sh -c 'CAPSHIM_TARGET_PID=$$ ... exec'``
so the variable holds the command's own pid (exec keeps it). The Vulkan layer
stays stock in any other process (the command's children inherit the
environment, but not the pid) unless ``--inherit`` sets ``CAPSHIM_INHERIT=1``.
The Metal shim removes its injection variables at load instead (issue 4).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from capshim import backends, program
from capshim import status as st
from capshim.contracts import environ, folders, output
from capshim.errors import CapshimError, UsageError
from capshim.profiles import Profile, targets

#: Variables whose values are paths (colon-separated lists), made absolute by :func:`prepare`.
_PATH_VARS = ("CAPSHIM_STATUS_FILE", "CAPSHIM_VK_APP_CONFIG", "CAPSHIM_VK_DEVICE_CONFIG", "CAPSHIM_CUDA_CONFIG",
              "VK_ADD_LAYER_PATH", "VK_LAYER_PATH", "DYLD_INSERT_LIBRARIES")

PID_WRAPPER = 'CAPSHIM_TARGET_PID=$$; export CAPSHIM_TARGET_PID; exec "$@"'


@dataclass
class Launch:
    """A prepared run.

    Attributes:
        argv: the command as given.
        exec_argv: what is executed (the pid wrapper around argv, unless inherit).
        env_delta: variables added to the environment (what the evidence bundle records).
        status_file: the shims' status file.
        shims: names of the shims asked for (Vulkan layer names or "metal").
        run_dir: folder with this run's configuration files.
        backend: the backend of the profiles' API (None without profiles).
    """

    argv: list[str]
    exec_argv: list[str]
    env_delta: dict[str, str]
    status_file: Path
    shims: list[str]
    run_dir: Path
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)
    backend: backends.Backend | None = None

    def env(self) -> dict[str, str]:
        """The full environment for the process: ours plus the delta."""
        env = environ.child_base()  # a stray CAPSHIM_TEMPLATE_FD would keep the CUDA shim stock
        env.update(self.env_delta)
        return env

    def states(self) -> dict[str, st.ShimState]:
        """Classify each requested shim from the status file (call after the process ended)."""
        report = st.read(self.status_file)
        if self.backend is None:
            return {}
        return self.backend.run_states(report, self.shims, self.argv, wrapped=self.exec_argv != self.argv)

    def cleanup(self) -> None:
        """Remove the temporary run folder, if the launcher made one."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def prepare(argv: list[str], profile: Profile | None = None, simulate: Profile | None = None,
            inherit: bool = False, quiet: bool = False, run_dir: Path | None = None,
            status_file: Path | None = None, placements: list | None = None) -> Launch:
    """Prepare a run of ``argv`` with the shims for ``profile`` and ``simulate``.

    Args:
        argv: the command and its arguments (non-empty).
        profile: the shim profile (``--profile``): Vulkan app role or Metal dylib.
        simulate: the Vulkan device-role profile (``--simulate``).
        inherit: let the command's children inherit the shims.
        quiet: no banner on stderr (CAPSHIM_QUIET=1).
        run_dir: folder for configuration files; a temporary one when None.
        status_file: the status file; ``run_dir/status.jsonl`` when None.
        placements: profiles placed on devices (:func:`capshim.profiles.roles.place_targeted`,
            already checked against the devices); ``profile`` and ``simulate`` are then the first
            of each role, which pick the backend and the shims.

    Raises:
        UsageError: empty command, profiles for different APIs, or --simulate
            for an API without a device role (:func:`capshim.backends.for_profiles`).
        BuildError: the shim cannot be built.
    """
    if not argv:
        raise UsageError("no command given: capshim run [OPTIONS] -- CMD [ARGS...]")
    backend = backends.for_profiles(profile, simulate)
    problem = exec_problem(argv[0])
    if problem:
        raise UsageError(f"cannot run {problem}")
    tmp = None
    if run_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="capshim-run-")
        run_dir = Path(tmp.name)
    # every path the command gets in its environment is absolute: a command that changes folder
    # (cd) must still find its status file and configuration files
    run_dir = Path(run_dir).absolute()
    run_dir.mkdir(parents=True, exist_ok=True)
    status_file = Path(status_file).absolute() if status_file else run_dir / "status.jsonl"
    _fresh_status_file(status_file)  # this run's events only: a file kept from an earlier run would mislead
    delta: dict[str, str] = {}
    shims: list[str] = []
    if backend is not None:
        if targets.targeted(placements):
            delta = backend.launch_env_targeted(placements, status_file, run_dir, inherit=inherit, quiet=quiet)
            _append_event(status_file, targets.targets_event(backend.name, placements, os.getpid()))
        else:
            delta = backend.launch_env(profile, simulate, status_file, run_dir, inherit=inherit, quiet=quiet)
        shims = backend.requested_shims(profile, simulate)
    for var in _PATH_VARS:
        if delta.get(var):
            delta[var] = ":".join(os.path.abspath(p) if p else p for p in delta[var].split(":"))
    if inherit and delta:
        delta["CAPSHIM_INHERIT"] = "1"
    exec_argv = list(argv) if (inherit or not delta) else ["/bin/sh", "-c", PID_WRAPPER, "capshim-run", *argv]
    return Launch(list(argv), exec_argv, delta, status_file, shims, run_dir, tmp, backend)


def _append_event(path: Path, event: dict) -> None:
    """One JSON line appended to the status file (the launcher's own events, docs/status.md).

    Raises:
        CapshimError: the file cannot be written (names it).
    """
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event, separators=(",", ":")) + "\n")
    except OSError as exc:
        raise CapshimError(f"status file {path}: cannot write: {exc.strerror}") from None


def _fresh_status_file(path: Path) -> None:
    """Empty (or create) a status file; refuse anything but a regular file, without blocking on a FIFO.

    Raises:
        UsageError: a device, FIFO, folder or link, or not writable (names the file).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        why = {errno.ENXIO: "is a FIFO", errno.ELOOP: "is a link", errno.EISDIR: "is a folder"}.get(
            exc.errno, exc.strerror)
        raise UsageError(f"status file {path}: {why}; give a regular file in a writable folder") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"status file {path}: is not a regular file (a device or FIFO); "
                             "give a regular file in a writable folder")
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def check_status_file(path: str, force: bool = False, inputs: tuple = ()) -> Path:
    """Validate ``capshim run --status-file PATH`` before anything runs; create its folder.

    Rules: the path must not name a device (``/dev/null``, ``/dev/stdout``,
    ``/dev/zero``), a FIFO, a folder or a link; an existing regular file is
    refused unless ``force`` (it would be emptied), and always when it is one of ``inputs`` (the
    profile files, the program: :func:`capshim.contracts.output.refuse_inputs`); a missing folder
    is created.

    Returns:
        The absolute path (the file is created empty by :func:`prepare`).

    Raises:
        UsageError: names the flag, the file and why (exit 2).
    """
    p = Path(path)
    flag = f"--status-file {path}"
    folders.refuse_inside_sealed(p, "--status-file")  # the output rule's: a sealed folder stays as sealed
    output.refuse_inputs(p, "--status-file", inputs)  # never over the profile or the program it runs
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{flag}: {exc.strerror}") from None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):  # lstat: a link is not one either
            raise UsageError(f"{flag}: is {output.kind(st.st_mode)}; the status file must be a regular file in a writable "
                             "folder (the shims append JSON lines to it and capshim reads it back)")
        if not force:
            raise UsageError(f"{flag}: the file exists and would be emptied; remove it, choose another "
                             "name, or pass --force")
    folder = p.absolute().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag}: cannot create folder {folder}: {exc.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: folder {folder} is not writable")
    return p.absolute()


def exec_problem(exe: str) -> str | None:
    """Why ``exe`` cannot be started, checked before anything runs (one line naming it and the
    cause), or None when it can (:func:`capshim.program.inspect`).

    The shim wrapper starts commands through ``/bin/sh``, which reports a program it cannot exec
    only as exit 126 or 127 (and would run a file of any bytes as a shell script); so capshim
    checks first: not found, a folder, no execute permission, a ``#!`` line whose interpreter is
    missing, an ELF file the kernel refuses (another machine, truncated, damaged program headers,
    a missing program interpreter), and a file that is neither a ``#!`` script nor an ELF or
    Mach-O program. An executable file capshim cannot read is left to exec.
    """
    return program.inspect(exe).refusal


def exec_failure(exe: str, exc: OSError) -> str:
    """Why ``exe`` could not be started, in words, from the ``OSError`` of exec.

    ENOENT for a file that exists means its ``#!`` interpreter is missing;
    ENOEXEC means neither a ``#!`` script nor a binary for this machine
    (execve(2)).
    """
    path = exe if "/" in exe else (shutil.which(exe) or exe)
    exe = program.show(exe)
    if exc.errno == errno.ENOENT and os.path.isfile(path):
        interp = ""
        with contextlib.suppress(OSError):
            with open(path, "rb") as fh:
                head = fh.read(256)
            if head.startswith(b"#!"):
                interp = ": " + program.show(head[2:].split(b"\n", 1)[0].decode(errors="replace").strip())
        return f"'{exe}': its interpreter (#! line) was not found{interp}"
    if exc.errno == errno.ENOENT:
        return f"'{exe}': no longer exists"
    if exc.errno == errno.ENOEXEC:
        return f"'{exe}': not an executable format (no #! line and not a program for this machine)"
    if os.path.isdir(path):
        return f"'{exe}': is a folder, not a program"
    return f"'{exe}': {exc.strerror or exc}"


def exit_code_of(returncode: int) -> int:
    """The shell convention: a process killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


#: Seconds a command gets to exit after capshim forwarded SIGTERM/SIGHUP/SIGINT (or its
#: ``timeout`` ran out) before its process group gets SIGKILL.
TERM_GRACE_S = 10.0
#: Seconds what is left of a finished command's process group gets after SIGTERM before SIGKILL.
LEFTOVER_GRACE_S = 2.0


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``.

    Read from ``/proc`` where there is one; elsewhere ``[pgid]`` when the
    group still has a member (``killpg(pgid, 0)``), else ``[]``.
    """
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            return [pgid]
        return [pgid]
    found = []
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after the command name: state ppid pgrp ... (proc(5))
        if len(fields) > 2 and fields[0] not in (b"Z", b"X") and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def end_group(pgid: int, grace: float = LEFTOVER_GRACE_S) -> int:
    """End what is left of process group ``pgid``: SIGTERM, up to ``grace`` seconds, then SIGKILL.

    Returns:
        How many processes were left in the group (0: nothing to end).
    """
    left = group_members(pgid)
    if not left:
        return 0
    # Ctrl-C / SIGTERM / SIGHUP to capshim during the grace must not cut the cleanup short
    # (that left the group's survivors orphaned): they are held until the group is ended,
    # then delivered as usual.
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    main = threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held) if main else None
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                return len(left)
            deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5.0)
            while group_members(pgid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not group_members(pgid):
                break
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return len(left)


def run(launch: Launch, timeout: float | None = None) -> int:
    """Run a prepared launch in the foreground with inherited stdio; return its exit code.

    The command's stdout and stderr are the caller's own (never merged). The
    command runs in its own process group; in a terminal that group gets the
    terminal (Ctrl-C and Ctrl-Z reach it directly) and capshim takes it back
    afterwards. SIGTERM, SIGHUP and SIGINT sent to capshim are forwarded to the
    whole group (one that capshim itself started with ignored, as under ``nohup``, stays
    ignored); a command still running :data:`TERM_GRACE_S` seconds later
    (one that ignores the signal) gets SIGKILL. When the command exits, what is
    left of its group (background children) gets SIGTERM and, after
    :data:`LEFTOVER_GRACE_S` seconds, SIGKILL: nothing outlives ``capshim run``
    unless it left the group itself (setsid). The command's exit code is
    returned (143 / 129 / 130 when the forwarded signal killed it).

    Raises:
        UsageError: the command cannot be started (names it and why:
            missing interpreter, not an executable format, a folder).
    """
    # the handlers are in place before the command starts: a signal that arrives while it starts
    # (a loaded machine may run the command's first lines before Popen returns) reaches it too
    with _forward_signals() as fw:
        try:
            proc = subprocess.Popen(launch.exec_argv, env=launch.env(), process_group=0)
        except OSError as exc:
            raise UsageError(f"cannot run {exec_failure(launch.argv[0], exc)}") from None
        fw.started(proc.pid)
        tty = _give_terminal(proc.pid)
        try:
            try:
                rc = _wait(proc, timeout, fw.times)
            finally:
                # still forwarding: a signal that arrives now goes to the group (and end_group
                # holds it during its grace), so capshim never dies with survivors left behind
                end_group(proc.pid)
        finally:
            if tty is not None:
                _take_terminal(tty)
    return rc


def _give_terminal(pgid: int) -> int | None:
    """Make ``pgid`` the terminal's foreground group when capshim holds the terminal; its fd, else None."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
            return None
        old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(fd, pgid)
        finally:
            signal.signal(signal.SIGTTOU, old)
        with contextlib.suppress(OSError):  # it may have stopped on SIGTTIN before it had the terminal
            os.killpg(pgid, signal.SIGCONT)
        return fd
    except (OSError, ValueError, AttributeError):
        return None


def _take_terminal(fd: int) -> None:
    with contextlib.suppress(OSError, ValueError):
        old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(fd, os.getpgrp())
        finally:
            signal.signal(signal.SIGTTOU, old)


class _Forward:
    """The signal handler of :func:`_forward_signals`: sends each signal to the command's group.

    Attributes:
        times: the time of the first signal (empty until then).
        pgid: the command's process group once started (None before: signals wait in ``pending``).
    """

    def __init__(self):
        self.times: list[float] = []
        self.pgid: int | None = None
        self.pending: list[int] = []

    def __call__(self, signum, frame) -> None:
        if not self.times:
            self.times.append(time.monotonic())
        if self.pgid is None:
            self.pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)

    def started(self, pgid: int) -> None:
        """The command runs in group ``pgid``: send it what arrived while it was starting."""
        self.pgid = pgid
        for signum in self.pending:
            self(signum, None)


@contextlib.contextmanager
def _forward_signals():
    """While the command runs, SIGTERM, SIGHUP and SIGINT to capshim go to the command's group instead.

    Yields the :class:`_Forward` handler (call its ``started(pgid)`` once the command runs).
    A signal that was ignored when capshim started (``nohup capshim run``, or Ctrl-C in a job
    started with ``&`` by a script) stays ignored, as a shell keeps it: the command inherited the
    same ignored disposition, so forwarding it would only end in SIGKILL after the grace.
    """
    fw = _Forward()
    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None), signal.SIGINT):
            if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
                old[sig] = signal.signal(sig, fw)
    try:
        yield fw
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _wait(proc: subprocess.Popen, timeout: float | None, forwarded: list[float]) -> int:
    """Wait for the command; SIGTERM its group at ``timeout``; SIGKILL it TERM_GRACE_S after a signal."""
    start = time.monotonic()
    while True:
        try:
            return exit_code_of(proc.wait(timeout=0.1))
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:  # not the main thread's handler: treat like a forwarded SIGINT
            if not forwarded:
                forwarded.append(time.monotonic())
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGINT)
        now = time.monotonic()
        if timeout is not None and not forwarded and now - start >= timeout:
            forwarded.append(now)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        if forwarded and now - forwarded[0] >= TERM_GRACE_S:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return exit_code_of(proc.wait())
