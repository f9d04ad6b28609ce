"""Process templates: a worker started once per arm that forks one fresh child per run.

A template is started exactly as a plain worker run would be (the same argv and environment,
the arm's shim variables included) plus ``CAPSHIM_TEMPLATE_FD``: the number of its end of a
Unix socket pair. It imports what the worker measures with, makes NO GPU call (checked: see
:func:`gpu_state`), then serves requests one at a time: each request is the run's argv and
full environment, with its stdout and stderr descriptors attached (``SCM_RIGHTS``). The
template forks; the child starts its own session, takes the two descriptors as 1 and 2, the
request's environment as its own (so the per-run status file and padding apply) and runs the
worker's ``main``: the Vulkan instance, device, allocations and pipelines are all made in the
child, after the fork, and die with it. The template answers ``{"pid": N}`` then
``{"status": WAITSTATUS}``. docs/processes.md says what is shared and what stays fresh.

The parent side is :class:`Template` (used by :func:`capshim.bench.runs.run_one` when the
bench launches through templates). This module imports only the standard library: the
worker imports it.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

from capshim.bench.workloads.phases import FORKED_VAR
from capshim.contracts.environ import TEMPLATE_FD_VAR

#: The variable that makes a worker a template: the number of its socket descriptor.
FD_VAR = TEMPLATE_FD_VAR
#: Largest request or answer (bytes): an argv and an environment.
MAX_MESSAGE = 1 << 20

#: What a GPU API leaves in a process once it made a call: a Vulkan driver (an ICD loaded by
#: the loader on vkCreateInstance or vkEnumerate*), NVIDIA's user-space driver or CUDA's driver
#: library (``libcuda.so``, which the runtime loads on its first call), or an open GPU device
#: node. None of these may be in a template before it forks. CUDA's runtime and math libraries
#: (``libcudart``, ``libcublas``, ``libcudnn``: what ``import torch`` maps) make no driver call
#: until called, so they may be there.
GPU_LIBRARIES = re.compile(r"/((libvulkan_\w+|libnvidia-(glcore|eglcore|gpucomp|vulkan-producer)|"
                           r"libGLX_nvidia|libamdvlk|libcapshim_vk)[^/]*|libcuda)\.so")
GPU_NODES = re.compile(r"^/dev/(dri/|nvidia|kfd)")


def gpu_state(pid: int | str = "self") -> list[str]:
    """What of a GPU API a process holds: mapped GPU driver libraries (:data:`GPU_LIBRARIES`,
    from ``/proc/PID/maps``) and open GPU device nodes (:data:`GPU_NODES`, ``/proc/PID/fd``).

    Returns:
        The paths found, sorted (empty: no GPU call was made); ``["unknown: WHY"]`` when /proc
        cannot be read (a template then refuses to serve).
    """
    found: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)  # address perms offset dev inode [path]
                path = parts[5].strip() if len(parts) == 6 else ""
                if GPU_LIBRARIES.search(path):
                    found.add(path)
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if GPU_NODES.match(target):
                found.add(target)
    except OSError as exc:
        return [f"unknown: {exc}"]
    return sorted(found)


def _send(sock: socket.socket, obj: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode() + b"\n"
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def _recv(sock: socket.socket, buf: bytearray, want_fds: int = 0) -> tuple[dict | None, list[int]]:
    """One newline-ended JSON message (and up to ``want_fds`` descriptors); (None, []) at EOF.

    ``buf`` holds what was read past the message (the next one's start: two answers can arrive
    in one read when a child exits at once); pass the same one for every call on a socket.
    """
    fds: list[int] = []
    while b"\n" not in buf:
        if want_fds and not fds:
            data, got, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, want_fds)
            fds = list(got)
        else:
            data = sock.recv(MAX_MESSAGE)
        if not data:
            for fd in fds:
                os.close(fd)
            return None, []
        buf += data
        if len(buf) > MAX_MESSAGE:
            raise ValueError("template message too long")
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return json.loads(line), fds


def _die_with_parent() -> None:
    """Ask the kernel for SIGKILL when the template dies (prctl PR_SET_PDEATHSIG, Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def _child(main, sock: socket.socket, req: dict, fds: list[int], template_pid: int) -> None:
    """The forked child: its own session, the run's descriptors and environment, the worker."""
    code = 1
    try:
        os.setsid()
        _die_with_parent()
        if os.getppid() != template_pid:  # the template died between fork and prctl
            os._exit(1)
        sock.close()
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        pinned = "CAPSHIM_TARGET_PID" in os.environ  # the launch wrapper's: the shim's target
        os.environ.clear()
        os.environ.update(req["env"])
        os.environ[FORKED_VAR] = str(template_pid)
        if pinned:  # read by the layer at vkCreateInstance, in this child: it is the target now
            os.environ["CAPSHIM_TARGET_PID"] = str(os.getpid())
        sys.argv = [sys.argv[0], *req["args"]]
        code = main(list(req["args"]))
        sys.stdout.flush()
        sys.stderr.flush()
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException as exc:  # noqa: BLE001 - one line, never a traceback into the template
        try:
            os.write(2, f"capshim-template: child failed: {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
    os._exit(code if isinstance(code, int) else 1)


def serve(main, prepare) -> int:
    """Run as a template (the worker's ``__main__`` when :data:`FD_VAR` is set).

    Args:
        main: the worker's entry point, ``main(argv) -> exit code``, run in each child.
        prepare: imports what ``main`` will use (no GPU call), run once here.

    Returns:
        0 when the parent closed the socket, 3 when the template refused to serve (a GPU API
        already touched: its paths are written to stderr), 1 on a broken protocol.
    """
    sock = socket.socket(fileno=int(os.environ.pop(FD_VAR)))
    try:
        prepare()
    except Exception as exc:  # noqa: BLE001 - the children report it themselves
        print(f"capshim-template: preparing failed ({exc}); each child imports for itself",
              file=sys.stderr, flush=True)
    held = gpu_state()
    if held:
        print(f"capshim-template: refusing to fork, GPU state already here: {', '.join(held)}",
              file=sys.stderr, flush=True)
        _send(sock, {"refused": held})
        return 3
    _send(sock, {"ready": os.getpid(), "gpu_state": held})
    me = os.getpid()
    inbox = bytearray()
    while True:
        try:
            req, fds = _recv(sock, inbox, 2)
        except (OSError, ValueError) as exc:
            print(f"capshim-template: bad request: {exc}", file=sys.stderr, flush=True)
            return 1
        if req is None:
            return 0
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": "expected 2 descriptors"})
            continue
        pid = os.fork()
        if pid == 0:
            _child(main, sock, req, fds, me)
        for fd in fds:
            os.close(fd)
        try:
            _send(sock, {"pid": pid})
            status = _wait_child(sock, pid)
            if status is None:  # the parent is gone (EOF) or broke the protocol: the child goes too
                return 0
            _send(sock, {"status": status})
        except OSError:  # the parent is gone
            _end_child(pid)
            return 0


def kill_child(pid: int) -> None:
    """SIGKILL a child and its group: the group exists once the child called setsid, which it
    may not have yet, so the child itself is killed too."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _end_child(pid: int) -> int:
    """Kill a child (:func:`kill_child`) and reap it; its wait status."""
    kill_child(pid)
    return os.waitpid(pid, 0)[1]


def _wait_child(sock: socket.socket, pid: int) -> int | None:
    """The child's wait status; None (the child killed) when the socket turns readable first: the
    parent sends nothing while a child runs, so that is its end (EOF) or a broken protocol.
    Sleeps on the child's pidfd and the socket (no wake-ups while the child measures); polls
    every 50 ms where there is no pidfd (before Linux 5.3, some sandboxes)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            ready = select.select([sock] + ([pidfd] if pidfd is not None else []), [], [],
                                  None if pidfd is not None else 0.05)[0]
            if sock in ready:
                _end_child(pid)
                return None
    finally:
        if pidfd is not None:
            os.close(pidfd)


class TemplateError(Exception):
    """The template could not start, refused, died or broke the protocol (the run falls back)."""


class Template:
    """Parent side of one arm's template (the launch of a plain run plus :data:`FD_VAR`).

    Args:
        argv, env: exactly what a plain run of the arm would be started with.
        log: the file the template's own stdout and stderr go to (bytes; kept by the caller).
        ready_timeout: seconds to wait for the template's imports (raises TemplateError after).
    """

    def __init__(self, argv: list[str], env: dict[str, str], log, ready_timeout: float = 120.0):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = mine
        self._inbox = bytearray()
        try:
            self.proc = subprocess.Popen(argv, env={**env, FD_VAR: str(theirs.fileno())}, stdout=log,
                                         stderr=log, stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                                         start_new_session=True)
        except OSError as exc:
            mine.close()
            raise TemplateError(f"template did not start: {exc}") from None
        finally:
            theirs.close()
        msg = self._answer(ready_timeout)
        if "ready" not in msg:
            self.close()
            raise TemplateError(f"template refused: GPU state before fork: {msg.get('refused')}")
        self.gpu_state = msg.get("gpu_state", [])

    def _answer(self, timeout: float | None) -> dict:
        """The next message; TemplateError on EOF, a bad message or no answer within ``timeout``."""
        if (timeout is not None and not self._pending()
                and not select.select([self.sock], [], [], max(0.0, timeout))[0]):
            raise TemplateError(f"template gave no answer in {timeout:g} s")
        try:
            msg, _ = _recv(self.sock, self._inbox)
        except (OSError, ValueError) as exc:
            raise TemplateError(f"template broke the protocol: {exc}") from None
        if msg is None:
            rc = self.proc.poll()
            raise TemplateError(f"template exited ({'running' if rc is None else rc})")
        return msg

    def _pending(self) -> bool:
        """Whether a whole message was already read (it arrived with the one before)."""
        return b"\n" in self._inbox

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, args: list[str], env: dict[str, str], stdout: int, stderr: int, timeout: float,
            stop=lambda: None) -> tuple[int, bool, str | None, int]:
        """Fork one child for a run: (returncode as Popen's, timed out, stop signal name, child pid).

        ``args`` are the worker's flags (:func:`worker_flags`), ``env`` the run's whole environment,
        ``stdout``/``stderr`` descriptors the child writes to.

        The child's group is killed (SIGKILL) on a timeout or a stop request (checked every
        0.1 s). Raises TemplateError when the template is gone before the child started.
        """
        try:
            _send(self.sock, {"args": args, "env": env}, [stdout, stderr])
        except OSError as exc:
            raise TemplateError(f"template is gone: {exc}") from None
        pid = self._answer(30.0).get("pid")
        if not isinstance(pid, int):
            raise TemplateError("template sent no child pid")
        deadline = time.monotonic() + timeout
        timed_out, why = False, None
        while True:
            if self._pending() or select.select([self.sock], [], [], 0.1)[0]:
                break
            why = why or stop()
            if why or time.monotonic() > deadline:
                timed_out = not why
                kill_child(pid)
                msg = self._answer(30.0)
                return _returncode(msg.get("status", 0)), timed_out, why, pid
        msg = self._answer(None)
        return _returncode(msg.get("status", 0)), False, None, pid

    def close(self) -> None:
        """End the template and whatever child it has (their groups), and reap it."""
        try:
            self.sock.close()
        except OSError:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                self.proc.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc.poll()


def _returncode(status: int) -> int:
    """A wait status as Popen's returncode (negative: the signal)."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def worker_flags(argv: list[str], module: str) -> list[str] | None:
    """The flags of ``[python, -m, MODULE, flags...]`` (what a child's ``main`` parses); None
    when ``argv`` does not run ``module`` (such a workload is launched plainly)."""
    return list(argv[3:]) if len(argv) >= 3 and argv[1:3] == ["-m", module] else None

