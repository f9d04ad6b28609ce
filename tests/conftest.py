"""Shared fixtures: the built Vulkan shim and the stock probe of this machine's device.

These tests use the real Vulkan loader and the machine's real driver
(lavapipe on a CPU-only machine, installed by ./setup.sh).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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
