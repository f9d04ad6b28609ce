"""Shared fixtures: the built Vulkan shim and the stock probe of this machine's device.

These tests use the real Vulkan loader and the machine's real driver
(lavapipe on a CPU-only machine, installed by ./setup.sh).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: Variables of the user's environment that the suite keeps although they match :func:`scrubbed`'s
#: rule: where capshim builds its shims (a user sets it where the home folder is not writable), the
#: library path a Python or compiler may need to start at all, and the suite's own golden switch.
KEPT = frozenset({"CAPSHIM_CACHE_DIR", "CAPSHIM_UPDATE_GOLDEN", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"})


def scrubbed(name: str) -> bool:
    """Whether the suite removes ``name`` from its environment before any test runs.

    The rule is the product's own list of variables that change a GPU workload
    (:func:`capshim.bench.inherited_env.recorded`: ``GGML_*``, ``LLAMA_*``, ``VK_*``, ``MESA_*``,
    ``CUDA_*``, ``LD_PRELOAD``, ...) plus capshim's own ``CAPSHIM_*`` (``CAPSHIM_DB`` would send the
    tests' bundles to the user's store), less :data:`KEPT`. A test of environment handling sets the
    variables it needs itself (``monkeypatch.setenv``, a child's ``env=``).
    """
    from capshim.bench.inherited_env import recorded

    return (recorded(name) or name.startswith("CAPSHIM_")) and name not in KEPT


#: What was removed (name -> value), shown in the session header: the suite is hermetic, whatever
#: Vulkan, CUDA or llama.cpp variables the shell that runs it exported.
SCRUBBED = {k: os.environ.pop(k) for k in sorted(os.environ) if scrubbed(k)}


def pytest_report_header(config):
    """One header line naming the user's variables the suite set aside (none: nothing is printed)."""
    if SCRUBBED:
        return [f"capshim tests: unset from the environment (tests/conftest.py scrubbed): {', '.join(SCRUBBED)}"]
    return []


# Set after the scrub above (which removes a user's CAPSHIM_*): capshim wraps its messages to the
# terminal (80 columns off one: capshim.contracts.messages); the suite's assertions read each message as one line, so the whole suite (its child processes and
# CliRunner included) prints them unwrapped. tests/test_messages.py checks the wrapping itself.
os.environ["CAPSHIM_MESSAGE_WIDTH"] = "0"


@pytest.fixture(scope="session")
def vk_build():
    from capshim.backends import vulkan

    return vulkan.build()


@pytest.fixture(scope="session")
def stock_probe(vk_build):
    from capshim.backends import vulkan

    return vulkan.probe()


def run_capshim(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: int = 600,
                input: str | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m capshim.cli ARGS`` in a child process; stdout and stderr kept apart."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "capshim.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=timeout, input=input)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is neither a zombie nor dead (reads /proc/PID/stat)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def default_signals() -> None:
    """``preexec_fn`` of a child that a test sends signals to: SIGTERM, SIGHUP and SIGINT at their defaults.

    A suite started under ``nohup`` (SIGHUP ignored) or as a script's background job (SIGINT ignored)
    passes those ignored dispositions on, and capshim keeps an ignored signal ignored (as a shell
    does); the tests of signal handling need the dispositions a terminal gives.
    """
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)


def wait_for(ready, timeout: float = 120, what: str = "the event") -> None:
    """Wait until ``ready()`` is true (polled every 20 ms), or fail after ``timeout`` seconds.

    The tests of signals and timing wait on an event (a file the child writes once its handler is
    in place, a process that has exited), never on a fixed sleep: a loaded machine only delays them.
    """
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.02)


def running(pid: int, program: str) -> bool:
    """Whether process ``pid`` is alive and runs ``program`` (its /proc/PID/cmdline's first word ends so)."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    return alive(pid) and Path(argv0).name == program


def sleeping_pid(marker: Path) -> int | None:
    """The pid a fake workload wrote to ``marker`` before ``exec sleep``, once that process sleeps; else None.

    The fake workloads of the interrupt tests run ``echo $$ > MARKER; exec sleep 60``: a signal sent
    once this returns a pid reaches a run that is surely in its sleep.
    """
    try:
        pid = int(marker.read_text())
    except (OSError, ValueError):
        return None
    return pid if running(pid, "sleep") else None


def terminal_say(config, prefix: str = "capshim tests"):
    """A function that prints one line on the terminal now, whatever the capture (with or without ``-s``).

    For long steps inside tests (the llama-bench build: minutes on 2 cores) so a run shows signs of
    life: the line goes through pytest's terminal reporter with the capture suspended for it.
    """
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capman = config.pluginmanager.getplugin("capturemanager")

    def say(msg: str) -> None:
        line = f"[{prefix}] {msg}"
        if reporter is None:
            print(line, file=sys.__stderr__, flush=True)
            return
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            reporter.ensure_newline()
            reporter.write_line(line)

    return say


@pytest.fixture(scope="session")
def progress(pytestconfig):
    """:func:`terminal_say` for this run: ``progress("step ...")`` prints at once."""
    return terminal_say(pytestconfig)


def pytest_terminal_summary(terminalreporter):
    """Print the fuzz campaigns' counts (tests/fuzzing.py) so each CI log shows executions per run."""
    from tests.fuzzing import STATS

    if STATS:
        terminalreporter.section("capshim fuzz campaigns")
        for s in STATS:
            terminalreporter.write_line(f"{s['driver']}: {s['executions']} executions, seed {s['seed']}, "
                                        f"{s['seconds']} s")


@pytest.fixture(autouse=True)
def _stop_signal_dispositions_restored():
    """Each test starts and ends with this process's Ctrl-C / SIGTERM / SIGHUP handlers as they were.

    A command run in-process (CliRunner) that was stopped by a signal leaves those signals ignored
    until the process exits (contracts.signals.SealGuard.ignore_after); children started by later
    tests would inherit the ignored dispositions.
    """
    sigs = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    before = {s: signal.getsignal(s) for s in sigs}
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def write_script(tmp_path, body: str, name: str = "w"):
    """An executable ``/bin/sh`` script ``tmp_path/name`` running ``body`` (a stand-in program)."""
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return p
