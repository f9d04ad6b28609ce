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

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from capshim import backends
from capshim import status as st
from capshim.errors import UsageError
from capshim.profiles import Profile

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
        env = dict(os.environ)
        for var in ("CAPSHIM_TARGET_PID", "CAPSHIM_INHERIT", "CAPSHIM_VK_APP_CONFIG", "CAPSHIM_VK_DEVICE_CONFIG"):
            env.pop(var, None)
        env.update(self.env_delta)
        return env

    def states(self) -> dict[str, st.ShimState]:
        """Classify each requested shim from the status file (call after the process ended)."""
        report = st.read(self.status_file)
        return self.backend.summarize_status(report, self.shims) if self.backend else {}

    def cleanup(self) -> None:
        """Remove the temporary run folder, if the launcher made one."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def prepare(argv: list[str], profile: Profile | None = None, simulate: Profile | None = None,
            inherit: bool = False, quiet: bool = False, run_dir: Path | None = None,
            status_file: Path | None = None) -> Launch:
    """Prepare a run of ``argv`` with the shims for ``profile`` and ``simulate``.

    Args:
        argv: the command and its arguments (non-empty).
        profile: the shim profile (``--profile``): Vulkan app role or Metal dylib.
        simulate: the Vulkan device-role profile (``--simulate``).
        inherit: let the command's children inherit the shims.
        quiet: no banner on stderr (CAPSHIM_QUIET=1).
        run_dir: folder for configuration files; a temporary one when None.
        status_file: the status file; ``run_dir/status.jsonl`` when None.

    Raises:
        UsageError: empty command, profiles for different APIs, or --simulate
            for an API without a device role (:func:`capshim.backends.for_profiles`).
        BuildError: the shim cannot be built.
    """
    if not argv:
        raise UsageError("no command given: capshim run [OPTIONS] -- CMD [ARGS...]")
    backend = backends.for_profiles(profile, simulate)
    exe = argv[0]
    if ("/" in exe and not os.access(exe, os.X_OK)) or ("/" not in exe and shutil.which(exe) is None):
        raise UsageError(f"cannot run '{exe}': not found or not executable")
    tmp = None
    if run_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="capshim-run-")
        run_dir = Path(tmp.name)
    run_dir.mkdir(parents=True, exist_ok=True)
    status_file = status_file or run_dir / "status.jsonl"
    try:
        status_file.write_text("")  # this run's events only: a file kept from an earlier run would mislead
    except OSError as exc:
        raise UsageError(f"status file {status_file}: cannot write: {exc.strerror}") from None
    delta: dict[str, str] = {}
    shims: list[str] = []
    if backend is not None:
        delta = backend.launch_env(profile, simulate, status_file, run_dir, inherit=inherit, quiet=quiet)
        shims = backend.requested_shims(profile, simulate)
    if inherit and delta:
        delta["CAPSHIM_INHERIT"] = "1"
    exec_argv = list(argv) if (inherit or not delta) else ["/bin/sh", "-c", PID_WRAPPER, "capshim-run", *argv]
    return Launch(list(argv), exec_argv, delta, status_file, shims, run_dir, tmp, backend)


def exit_code_of(returncode: int) -> int:
    """The shell convention: a process killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def run(launch: Launch, timeout: float | None = None) -> int:
    """Run a prepared launch in the foreground with inherited stdio; return its exit code.

    The command's stdout and stderr are the caller's own (never merged).
    Ctrl-C is delivered to the command (same process group); the launcher
    waits for it to exit.

    Raises:
        UsageError: the command cannot be started (not found, not executable).
    """
    try:
        proc = subprocess.Popen(launch.exec_argv, env=launch.env())
    except OSError as exc:
        raise UsageError(f"cannot run '{launch.argv[0]}': {exc.strerror}") from None
    try:
        rc = proc.wait(timeout=timeout)
    except KeyboardInterrupt:
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
    return exit_code_of(rc)
