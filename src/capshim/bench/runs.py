"""One run of one arm: the launch every arm shares, the process, its files and its result.

Every arm, native included, is launched the same way (:class:`Launcher`): the
same pid wrapper and the same variables present, set for an arm without shims
to values that enable nothing, and the environment padded to a common size
plus a random offset (``CAPSHIM_BENCH_PAD``, after hyperfine's randomized
environment offset). :func:`run_one` starts the process in its own session,
waits (ending it on a timeout or a stop request), copies its stdout, stderr and
status file into the bundle and parses its output through the workload adapter.
"""

from __future__ import annotations

import errno
import os
import random
import re
import select
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from capshim import launch, paths
from capshim.backends.vkloader import LIST_VARS
from capshim.bench import attest, llamabench, metrics, telemetry, templates
from capshim.bench.arms import Arm
from capshim.bench.workloads.base import Workload
from capshim.contracts import environ
from capshim.errors import CapshimError
from capshim.evidence import Bundle


@dataclass
class RunResult:
    """One finished (or failed) arm run; ``round``/``position`` say when it ran (position from 1);
    ``control`` names the control workload it ran (None: the workload itself)."""

    arm: str
    run: int
    exit_code: int | None
    signal: str | None
    timed_out: bool
    seconds: float
    records: list[dict]
    path: dict
    shim_states: dict[str, dict]
    token_ids: list[int] | None
    error: str | None = None
    exec_argv: list[str] = field(default_factory=list)
    env_delta: dict[str, str] = field(default_factory=dict)
    round: int = 0
    position: int = 0
    telemetry: dict = field(default_factory=dict)
    contaminated: list[str] = field(default_factory=list)
    excluded: bool = False
    control: str | None = None
    left_processes: int = 0
    stderr_truncated: int = 0
    launch: str = "plain"

    def info(self) -> dict:
        """The ``runs`` entry of the arm in summary.json (``control_runs`` in metadata.json for a control)."""
        return {**({"control": self.control} if self.control else {}), "run": self.run, "round": self.round, "position": self.position, "exit_code": self.exit_code,
                "signal": self.signal, "timed_out": self.timed_out, "seconds": round(self.seconds, 3),
                "error": self.error, "shims": self.shim_states, "telemetry": self.telemetry,
                "contaminated": self.contaminated, "excluded": self.excluded,
                "left_processes": self.left_processes, "launch": self.launch,
                **({"stderr_truncated_bytes": self.stderr_truncated} if self.stderr_truncated else {})}


#: The dynamic linker's own list of libraries to load first (ld.so(8)): a shim that preloads itself (the
#: CUDA shim) adds to it, so an arm without that shim keeps the user's own value, never an empty one.
PRELOAD_VARS = ("LD_PRELOAD",)
#: The variable whose length pads every run's environment (hyperfine: HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET).
PAD_VAR = "CAPSHIM_BENCH_PAD"
#: Largest random offset added to the common environment size (bytes), as hyperfine uses.
PAD_RANGE = 4096


def _env_size(env: dict[str, str]) -> int:
    """Bytes the environment takes on the new process's stack: ``NAME=value\\0`` per variable."""
    return sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in env.items())


#: How runs are launched (``CAPSHIM_BENCH_LAUNCH``): ``plain`` (default) execs a fresh process per
#: run; ``template`` forks each run from a per-arm template process (docs/processes.md), for
#: workloads whose command is ``python -m WORKER`` of a worker that serves templates.
LAUNCH_MODES = ("plain", "template")
LAUNCH_VAR = "CAPSHIM_BENCH_LAUNCH"


@dataclass
class Launcher:
    """Launches every arm the same way (module docstring): the same wrapper, the same variables,
    a padded environment. ``keys`` are the variables any arm sets; ``size`` the largest base
    environment of any arm (bytes); ``mode`` one of :data:`LAUNCH_MODES`; ``templates`` the
    live templates by run label (:mod:`capshim.bench.templates`)."""

    keys: list[str]
    size: int
    rng: random.Random
    mode: str = "plain"
    templates: dict = field(default_factory=dict)

    def close(self) -> None:
        """End every template (a no-op for plain launching)."""
        from capshim.bench import templates

        templates.close_all(self.templates)

    @staticmethod
    def neutral(key: str) -> str:
        """The value of a variable that enables nothing: the user's own value for the loader's
        layer lists (:data:`capshim.backends.vkloader.LIST_VARS`) and ``LD_PRELOAD``
        (:data:`PRELOAD_VARS`) (so this process sees what a
        plain launch sees), else empty."""
        if key in LIST_VARS or key in PRELOAD_VARS:
            return os.environ.get(key, "")
        return ""

    def build(self, lc: "launch.Launch", workload_env: dict[str, str]) -> tuple[list[str], dict, dict]:
        """(exec_argv, full environment, recorded delta) of one run."""
        delta = {k: lc.env_delta.get(k, self.neutral(k)) for k in self.keys}
        delta.update(lc.env_delta)
        env = environ.child_base()  # a stray template variable would keep the CUDA shim stock
        env.pop(PAD_VAR, None)
        env.update(delta)
        env.update(workload_env)
        target = self.size + 64 + self.rng.randrange(PAD_RANGE)
        pad = max(0, target - _env_size(env) - len(PAD_VAR) - 2)
        delta[PAD_VAR] = env[PAD_VAR] = "x" * pad
        exec_argv = lc.exec_argv
        if exec_argv == lc.argv:  # no shim asked for: the same wrapper all the same
            exec_argv = ["/bin/sh", "-c", launch.PID_WRAPPER, "capshim-run", *lc.argv]
        return exec_argv, env, delta


def make_launcher(arms: list[Arm], workload: Workload, work: Path, rng: random.Random) -> Launcher:
    """One launcher for the workload and its controls: the variables any arm sets, the largest environment."""
    keys: list[str] = []
    size = 0
    for w in (workload, *workload.controls):
        for arm in arms:
            probe_dir = work / f"probe-{w.label(arm.name)}"
            try:
                lc = launch.prepare(w.argv, arm.profile, arm.simulate, run_dir=probe_dir,
                                    status_file=probe_dir / "status.jsonl", placements=arm.placements)
            except launch.UsageError:  # the command cannot start: each of its runs records why
                continue
            keys += [k for k in lc.env_delta if k not in keys]
            size = max(size, _env_size({**lc.env(), **w.env}))
    if "CAPSHIM_STATUS_FILE" not in keys:
        keys.append("CAPSHIM_STATUS_FILE")
    return Launcher(keys, size, rng, mode=launch_mode())


def launch_mode() -> str:
    """The launch mode from ``CAPSHIM_BENCH_LAUNCH`` (:data:`LAUNCH_MODES`; default ``plain``).

    Raises:
        UsageError: another value (names the variable and the choices).
    """
    mode = os.environ.get(LAUNCH_VAR) or "plain"
    if mode not in LAUNCH_MODES:
        raise launch.UsageError(f"{LAUNCH_VAR}={mode!r}: expected one of {', '.join(LAUNCH_MODES)}")
    return mode


def _stdout_path(bundle: Bundle, label: str, n: int, fh) -> Path:
    """``raw/LABEL-N.json`` or ``.txt``: the bundle's name for the stdout written to ``fh``, by what it
    holds (:meth:`Bundle.raw_stdout`); more than llama-bench's output limit is text, unread."""
    fh.flush()
    fh.seek(0)
    return bundle.raw_stdout(label, n, fh.read(llamabench.MAX_OUTPUT_BYTES + 1))


def _copy_output(fh, dst: Path) -> None:
    """Copy what a run wrote to ``fh`` (capshim's own descriptor of its private output file)
    into the bundle file ``dst``, through that descriptor: whatever the workload did to the
    private path (replaced it with a link, say), the bundle gets only what was written to it."""
    fh.flush()
    fh.seek(0)
    # the bundle's own file: never through a link or into a FIFO planted at its name (contracts.output's rule)
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with open(fd, "wb") as out:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(dst))
        shutil.copyfileobj(fh, out, 1 << 20)


def run_one(bundle: Bundle, arm: Arm, n: int, workload: Workload, timeout: float, work: Path,
            record: bool = True, launcher: Launcher | None = None, probe: telemetry.Telemetry | None = None,
            position: tuple[int, int] = (0, 0), stop: Callable[[], str | None] = lambda: None) -> RunResult:
    """Run ``workload`` once under ``arm``; its files go into ``bundle`` when ``record``.

    Args:
        bundle: the bundle its stdout, stderr and status copy go into (``raw/LABEL-N.*``,
            :meth:`Workload.label`).
        n: the run's number (its round).
        timeout: seconds before the process group is killed (recorded as timed out).
        work: the private work folder (the run's own folder is made in it).
        record: False for a warm-up run (nothing goes into the bundle).
        launcher: builds the same launch for every arm (:class:`Launcher`).
        probe: telemetry snapshots before and after (contamination).
        position: (round, position in the round) recorded with the run.
        stop: returns the name of a stop signal once one arrived (the seal guard's request):
            the process group is then ended and the run recorded as ``interrupted (SIGNAL)``.

    Returns:
        The RunResult; a run that failed, timed out, could not start or was stopped has ``error``.
    """
    label = workload.label(arm.name)
    run_dir = work / f"{label}-{n}{'' if record else '-warmup'}"
    # The status file lives in the private work folder, never in the bundle: the workload may write
    # that path (and its folder), so only a copy of the one file goes into status/ after the run.
    status_file = run_dir / "status.jsonl"
    t0 = time.monotonic()
    try:
        lc = launch.prepare(workload.argv, arm.profile, arm.simulate, run_dir=run_dir, status_file=status_file,
                            placements=arm.placements)
    except launch.UsageError as exc:  # the workload vanished or changed since the bench started
        return _not_started(bundle, arm, n, record, t0, str(exc), workload.argv, position=position,
                            workload=workload)
    launcher = launcher or Launcher(list(lc.env_delta), 0, random.Random(0))
    if "CAPSHIM_STATUS_FILE" in launcher.keys:
        lc.env_delta.setdefault("CAPSHIM_STATUS_FILE", str(lc.status_file))  # absolute (launch.prepare)
    exec_argv, env, delta = launcher.build(lc, workload.env)
    # stdout and stderr go to private files too (a workload can find the path of its own stdout
    # through /proc/self/fd/1 and must not learn a path inside the bundle); the bundle gets copies
    # read through capshim's own descriptors after the run.
    run_dir.mkdir(parents=True, exist_ok=True)
    priv_out, priv_err = run_dir / "stdout.json", run_dir / "stderr.txt"
    out_path = bundle.raw_json(label, n) if record else priv_out  # named by its content after the run
    err_path = bundle.raw_stderr(label, n) if record else priv_err
    workload.before_run()
    before = probe.snapshot() if probe else {}
    t0 = time.monotonic()
    with open(priv_out, "w+b") as out, open(priv_err, "w+b") as err:
        try:
            rc, timed_out, stopped, pid, how = _start(launcher, label, workload, exec_argv, env, out, err,
                                                      timeout, stop, work)
        except OSError as exc:  # missing interpreter, not an executable format, a folder, deleted
            return _not_started(bundle, arm, n, record, t0, launch.exec_failure(workload.argv[0], exc),
                                exec_argv, lc.env_delta, position=position, workload=workload)
        if stopped:
            left = launch.end_group(pid)
            if record:
                out_path = _stdout_path(bundle, label, n, out)
                _copy_output(out, out_path)
                _copy_output(err, err_path)
                bundle.write_run(label, n, status_src=status_file)
            states = {name: s.to_dict() for name, s in lc.states().items()}
            return RunResult(arm.name, n, None, stopped, False, time.monotonic() - t0, [], {}, states, None,
                             f"interrupted ({stopped})", exec_argv, {}, position[0], position[1],
                             control=workload.control, left_processes=left, launch=how)
        seconds = time.monotonic() - t0
        # what the workload left running in its session (a `( sleep 1000 ) &`): SIGTERM, grace, SIGKILL
        left = launch.end_group(pid)
        if record:
            out_path = _stdout_path(bundle, label, n, out)
            _copy_output(out, out_path)
            _copy_output(err, err_path)
            bundle.write_run(label, n, status_src=status_file)
    after = probe.snapshot() if probe else {}
    sig = signal.Signals(-rc).name if rc < 0 and -rc in signal.Signals._value2member_map_ else None
    exit_code = rc if rc >= 0 else None
    stdout = _read_output(out_path)
    too_much = _cap_stderr(out_path, llamabench.MAX_OUTPUT_BYTES)  # the bundle keeps its head and tail
    stderr_cut = _cap_stderr(err_path)
    stderr = _read_output(err_path)
    error = _failure(rc, timed_out, timeout, sig, stderr) or (
        f"stdout: {too_much + llamabench.MAX_OUTPUT_BYTES} bytes, more than the {llamabench.MAX_OUTPUT_BYTES} "
        "capshim reads of a run's output; not read (print less)" if too_much else None)
    records, tokens, error = _parse(workload, stdout, stderr, str(out_path), arm.name, n, seconds, error)
    states = {name: s.to_dict() for name, s in lc.states().items()}
    dirty = telemetry.contamination(before, after, {os.getpid(), pid, *templates.pids(launcher)}) if probe else []
    for rec in records:
        rec["round"], rec["position"], rec["contaminated"] = position[0], position[1], bool(dirty)
    recorded_delta = environ.record({k: (f"<{len(v)} bytes>" if k == PAD_VAR else v)
                                     for k, v in {**delta, **workload.env}.items()})
    return RunResult(arm.name, n, exit_code, sig, timed_out, seconds, records, attest.parse_path(stderr), states,
                     tokens, error, exec_argv, recorded_delta, position[0], position[1],
                     {"before": before, "after": after} if probe else {}, dirty, control=workload.control,
                     left_processes=left, stderr_truncated=stderr_cut, launch=how)


def _start(launcher: Launcher, label: str, workload: Workload, exec_argv: list[str], env: dict, out, err,
           timeout: float, stop: Callable[[], str | None], work: Path) -> tuple[int, bool, str | None, int, str]:
    """Start and wait for one run, forked from its template or as a plain process:
    (returncode, timed out, stop signal name, pid, how it was launched: ``launch`` of the run).

    Raises:
        OSError: the plain process could not start.
    """
    forked = templates.run_forked(launcher, label, workload, exec_argv, env, out, err, timeout, stop, work)
    if forked is not None:
        return forked
    why_not = templates.fallback_note(launcher, label)
    how = ("plain" if launcher.mode == "plain" else
           f"plain (template failed: {why_not})" if why_not else "plain (no template for this workload)")
    proc = subprocess.Popen(exec_argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    rc, timed_out, stopped = _wait(proc, timeout, stop)
    return rc, timed_out, stopped, proc.pid, how


def _parse(workload: Workload, stdout: str, stderr: str, source: str, arm: str, n: int, seconds: float,
           error: str | None) -> tuple[list[dict], object, str | None]:
    """``(records, output fingerprint, error)`` of a finished run: nothing parsed when it failed
    (``error``); the workload's records, within :func:`capshim.bench.metrics.check_run_size`'s
    limits, else the error that names them."""
    if error is not None:
        return [], None, error
    try:
        records, tokens = workload.parse(stdout, source, arm, n, stderr=stderr, seconds=seconds)
        metrics.check_run_size(records, source)
    except CapshimError as exc:
        return [], None, str(exc)
    return records, tokens, None


def _failure(rc: int, timed_out: bool, timeout: float, sig: str | None, stderr: str) -> str | None:
    """Why a finished process failed (``timed out after N s``, ``killed by SIG``, ``exit N: <line>``), or None."""
    if timed_out:
        return f"timed out after {timeout:g} s"
    if rc == 0:
        return None
    error = f"killed by {sig}" if sig else f"exit {rc}"
    line = error_line(stderr)
    return f"{error}: {line[:300]}" if line else error


#: llama.cpp's (and ggml's) own error lines: ``ggml_vulkan: Error: ...``,
#: ``llama_model_load: error loading model: ...``, ``..._impl: failed to load model``.
_LLAMA_ERROR = re.compile(r"^(?:ggml|llama)\w*: .*\berror\b", re.IGNORECASE)
_LLAMA_FAILED = re.compile(r"^(?:ggml|llama)\w*: .*\bfailed\b", re.IGNORECASE)


def error_line(stderr: str) -> str | None:
    """The line of a failed run's stderr that says why it failed (the run's ``error`` after ``exit N: ``).

    llama.cpp's own first error line (``ggml_vulkan: Error: ...``, ``llama_model_load: error ...``;
    else its first ``... failed ...`` line) when there is one: the root cause, which a binding's
    last line (cyllama's generic "could not load it. Possible causes: ...") hides; else the last
    non-empty line. None for an empty stderr.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for pattern in (_LLAMA_ERROR, _LLAMA_FAILED):
        own = next((line for line in lines if pattern.match(line)), None)
        if own:
            return own
    return lines[-1] if lines else None


#: The most of one run's stderr a bundle keeps (its first and last half; the rest is left out, with a
#: line saying how much, and the run records ``stderr_truncated_bytes``).
MAX_STDERR_KEEP = 32 << 20


def _cap_stderr(path: Path, cap: int = MAX_STDERR_KEEP) -> int:
    """Cut a run's stderr (or stdout) file over ``cap`` bytes down to its head and tail, in place, in
    bounded memory.

    Returns:
        How many bytes were left out (0: the file was kept whole).
    """
    try:
        size = os.stat(path).st_size
    except OSError:
        return 0
    if size <= cap:
        return 0
    half = cap // 2
    cut = size - 2 * half
    what = "stdout" if path.name.endswith((".json", ".txt")) else "stderr"
    marker = (f"\n[capshim: {cut} bytes of this run's {what} left out here; the first and last "
              f"{half} bytes are kept]\n").encode()
    with open(path, "r+b") as fh:
        src, dst = size - half, half
        fh.seek(dst)
        fh.write(marker)
        dst += len(marker)
        while src < size:  # dst < src throughout: copying forward never overwrites unread bytes
            fh.seek(src)
            chunk = fh.read(min(1 << 20, size - src))
            fh.seek(dst)
            fh.write(chunk)
            src += len(chunk)
            dst += len(chunk)
        fh.truncate(dst)
    return cut


def _read_output(path: Path) -> str:
    """A run's stdout or stderr as text, at most llamabench.MAX_OUTPUT_BYTES (+1 so too much is seen)."""
    data = paths.read_limited(path, llamabench.MAX_OUTPUT_BYTES + 1, truncate=True)
    return data.decode("utf-8", errors="replace")


def _not_started(bundle: Bundle, arm: Arm, n: int, record: bool, t0: float, reason: str, argv: list[str],
                 env_delta: dict | None = None, position: tuple[int, int] = (0, 0), *,
                 workload: Workload) -> RunResult:
    """A run whose command could not be started: recorded as a failed run with the reason
    (a control's under ``<arm>+<control>``, :meth:`Workload.label`)."""
    if record:
        bundle.write_run(workload.label(arm.name), n, stdout=b"", stderr=f"capshim: {reason}\n")
    return RunResult(arm.name, n, None, None, False, time.monotonic() - t0, [], {}, {}, None,
                     f"not started: {reason}", list(argv), dict(env_delta or {}), position[0], position[1],
                     control=workload.control)


def _kill(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue




def _wait(proc: subprocess.Popen, timeout: float, stop: Callable[[], str | None]) -> tuple[int, bool, str | None]:
    """Wait for ``proc``: (exit status, timed out, stop signal name or None); its group is killed on
    a timeout or a stop request (checked every 0.1 s: the seal guard's handler only records it).

    The return comes as soon as the process exits, so a run's wall-clock seconds are exact: on
    Linux the wait blocks on a pidfd (``os.pidfd_open``, Linux 5.3); elsewhere it polls every
    millisecond. (``Popen.wait(timeout=)`` polls with growing sleeps, so a 64 ms process was seen
    to end at 100 ms: ``--metric wall`` read a 1.54x "speed-up" between identical arms.)
    """
    deadline = time.monotonic() + timeout
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            why = stop()
            if why:
                _kill(proc)
                return proc.wait(), False, why
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(proc)
                return proc.wait(), True, None
            rc = _exit_within(proc, pidfd, min(0.1, left))
            if rc is not None:
                return rc, False, None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _exit_within(proc: subprocess.Popen, pidfd: int | None, seconds: float) -> int | None:
    """``proc``'s exit status if it exits within ``seconds``, else None; wakes at once on the exit."""
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.poll(max(1, int(seconds * 1000)))
        return proc.poll()
    end = time.monotonic() + seconds
    while True:
        rc = proc.poll()
        if rc is not None or time.monotonic() >= end:
            return rc
        time.sleep(0.001)
