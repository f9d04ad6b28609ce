"""A safe ``capshim run``: --status-file rules, signals forwarded, exec failures named (issue 9, item 4)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capshim import launch, status
from tests.conftest import REPO, default_signals, run_capshim, running, wait_for
from tests.conftest import alive as _alive


@pytest.mark.slow
@pytest.mark.parametrize("target", ["/dev/null", "/dev/stdout", "/dev/zero", "/dev/full"])
def test_status_file_device_is_refused(target):
    r = run_capshim("run", "--status-file", target, "--simulate", "vulkan-paravirt", "--", "true")
    assert r.returncode == 2, r.stderr
    assert f"--status-file {target}: is a" in r.stderr and "regular file" in r.stderr
    assert "Traceback" not in r.stderr and "/proc/" not in r.stderr


@pytest.mark.slow
def test_status_file_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    r = run_capshim("run", "--status-file", str(fifo), "--simulate", "vulkan-paravirt", "--", "true", timeout=60)
    assert r.returncode == 2 and "is a FIFO" in r.stderr


def test_status_file_fifo_in_prepare_does_not_block(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(launch.UsageError, match="FIFO"):
        launch.prepare(["true"], status_file=fifo, run_dir=tmp_path / "r")


def test_status_file_link_and_folder_are_refused(tmp_path):
    (tmp_path / "real").write_text("mine")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for target, what in ((tmp_path / "link", "a link"), (tmp_path, "a folder")):
        with pytest.raises(launch.UsageError, match=what):
            launch.check_status_file(str(target), force=True)
    assert (tmp_path / "real").read_text() == "mine"


def test_existing_status_file_needs_force(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text("my notes")
    with pytest.raises(launch.UsageError, match="--force"):
        launch.check_status_file(str(f))
    assert f.read_text() == "my notes"
    assert launch.check_status_file(str(f), force=True) == f


def test_status_file_folder_is_created(tmp_path):
    p = launch.check_status_file(str(tmp_path / "a" / "b" / "s.jsonl"))
    assert p.parent.is_dir()


def test_status_read_refuses_devices_and_is_bounded(tmp_path):
    for dev in ("/dev/zero", "/dev/full"):
        rep = status.read(dev)  # returns at once, empty: no MemoryError
        assert rep.events == [] and rep.bad_lines == []
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as fh:
        fh.write(b'{"event":"loaded","shim":"metal","pid":1}\n')
        fh.write(b"[" * 200_000 + b"\n")  # deeper than the JSON decoder's recursion: a bad line, not a crash
        fh.write(b"x" * (status.MAX_LINE_BYTES + 1) + b"\n")
    rep = status.read(big)
    assert len(rep.events) == 1 and rep.bad_lines == [2, 3]


def _script(tmp_path: Path, name: str, body: bytes, mode: int = 0o755) -> Path:
    p = tmp_path / name
    p.write_bytes(body)
    p.chmod(mode)
    return p


def test_exec_problem_accepts_programs_and_scripts(tmp_path):
    import shutil

    assert launch.exec_problem(shutil.which("true")) is None
    assert launch.exec_problem(str(_script(tmp_path, "ok", b"#!/bin/sh\necho\n"))) is None
    assert "interpreter" in launch.exec_problem(str(_script(tmp_path, "e", b"#!\n")))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["interpreter", "random", "folder"])
def test_run_exec_failures_are_named(tmp_path, kind):
    if kind == "interpreter":
        cmd = _script(tmp_path, "w", b"#!/nonexistent/python9\nprint(1)\n")
        want = "interpreter (#! line) was not found: /nonexistent/python9"
    elif kind == "random":
        cmd = _script(tmp_path, "w", bytes(range(7, 250)) * 8)
        want = "not an executable format"
    else:
        cmd = tmp_path / "d"
        cmd.mkdir()
        want = "is a folder"
    for shim in ([], ["--simulate", "vulkan-paravirt"]):
        r = run_capshim("run", *shim, "--", str(cmd))
        assert "Traceback" not in r.stderr
        # refused before anything runs: /bin/sh (the shim wrapper) would run random bytes as a script
        assert r.returncode == 2 and want in r.stderr and "inert" not in r.stderr, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_is_forwarded_and_waited_for(tmp_path, sig):
    marker = tmp_path / "child.pid"
    script = _script(tmp_path, "w", (
        "#!/bin/sh\n"
        f"trap 'echo got >> \"{marker}.sig\"; exit 7' {sig.name[3:]}\n"
        f"echo $$ > '{marker}'\n"  # the event the test waits for: written once the trap is in place
        "while :; do sleep 0.05; done\n").encode())
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "capshim.cli", "run", "--simulate", "vulkan-paravirt", "--",
                             str(script)], env=env, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    wait_for(lambda: proc.poll() is not None or (marker.exists() and marker.read_text().strip()), 120,
             "the command's trap")
    assert proc.poll() is None, proc.stderr.read()
    child = int(marker.read_text())
    proc.send_signal(sig)
    rc = proc.wait(timeout=60)
    assert rc == 7, proc.stderr.read()  # the command's own exit code
    assert (tmp_path / "child.pid.sig").read_text() == "got\n"
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # no orphan
    assert not list(tmp_path.glob("capshim-run-*"))  # its temp folder is gone


def _start_and_wait_for(tmp_path, body: str, n: int, program: str | None = "sleep"):
    """Start ``capshim run -- forker.sh``; return once it wrote ``n`` pids (each running ``program``)."""
    pids = tmp_path / "pids"
    script = _script(tmp_path, "forker.sh", body.replace("PIDS", str(pids)).encode())
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "capshim.cli", "run", "--", str(script)], env=env,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    wait_for(lambda: proc.poll() is not None or (pids.exists() and len(pids.read_text().split()) >= n), 120,
             f"{n} pids")
    assert proc.poll() is None, proc.stderr.read()
    got = [int(x) for x in pids.read_text().split()]
    if program:
        wait_for(lambda: all(running(p, program) for p in got), 60, f"every pid to run {program}")
    return proc, got


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigterm_ends_the_commands_whole_group(tmp_path):
    """A TERM-ignoring background subshell plus a foreground sleep: SIGTERM to capshim → 143, nothing survives."""
    proc, pids = _start_and_wait_for(tmp_path, (
        "#!/bin/sh\n"
        "( trap '' TERM; sleep 300 & echo $! >> 'PIDS'; wait ) &\n"
        "sh -c 'echo $$ >> PIDS; exec sleep 300'\n"), 2)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    assert rc == 143, proc.stderr.read()
    assert time.monotonic() - t0 < launch.TERM_GRACE_S + launch.LEFTOVER_GRACE_S + 5
    wait_for(lambda: not any(_alive(p) for p in pids), 30, "the SIGKILLed group to die")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_command_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    proc, pids = _start_and_wait_for(tmp_path, "#!/bin/sh\ntrap '' TERM\necho $$ >> 'PIDS'\nsleep 300\n", 1,
                                    program=None)  # the trap is in place before the pid is written
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    took = time.monotonic() - t0
    assert rc == 137 and launch.TERM_GRACE_S - 1 < took < launch.TERM_GRACE_S + 10, (rc, took)
    assert not any(_alive(p) for p in pids)


@pytest.mark.slow
def test_background_child_is_ended_when_the_command_exits(tmp_path):
    """The command exits 5 leaving `sleep 300 &`: exit 5 passes through, the sleep is ended."""
    pids = tmp_path / "pids"
    script = _script(tmp_path, "w", f"#!/bin/sh\nsleep 300 &\necho $! > '{pids}'\nexit 5\n".encode())
    r = run_capshim("run", "--", str(script), timeout=60)
    assert r.returncode == 5, r.stderr
    assert not _alive(int(pids.read_text()))


@pytest.mark.slow
def test_run_gives_a_command_that_cds_absolute_paths(tmp_path):
    """`--status-file rel.jsonl` and a command that cds: CAPSHIM_STATUS_FILE is absolute."""
    seen = tmp_path / "seen"
    script = _script(tmp_path, "w", f"#!/bin/sh\ncd /\necho \"$CAPSHIM_STATUS_FILE\" > '{seen}'\n".encode())
    r = run_capshim("run", "--status-file", "rel.jsonl", "--simulate", "vulkan-paravirt", "--", str(script),
                    cwd=tmp_path, timeout=120)
    assert r.returncode in (0, 3), r.stderr
    assert seen.read_text().strip() == str(tmp_path / "rel.jsonl")
    lc = launch.prepare(["true"], run_dir=Path(os.path.relpath(tmp_path / "r")),
                        status_file=Path(os.path.relpath(tmp_path / "s.jsonl")))
    assert lc.status_file.is_absolute() and lc.run_dir.is_absolute()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_cleanup_grace_leaves_no_orphan(tmp_path, sig):
    """The command exits at once, leaving a TERM-ignoring child; a signal to capshim while it waits
    out the grace before SIGKILL must not cut the cleanup short."""
    pids = tmp_path / "pids"
    script = _script(tmp_path, "ign.sh", (
        "#!/bin/sh\ntrap '' TERM HUP INT\n"
        f"( sleep 783 ) &\necho $$ $! >> '{pids}'\nexit 0\n").encode())
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "capshim.cli", "run", "--", str(script)], env=env,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, 120, "the command's pids")
    command, sub = (int(x) for x in pids.read_text().split())
    # the event: the command itself has exited (capshim reaped it), so capshim is in end_group's grace
    wait_for(lambda: not _alive(command), 60, "the command to exit")
    proc.send_signal(sig)
    proc.wait(timeout=60)
    wait_for(lambda: not _alive(sub), 30, "the TERM-ignoring child to be killed")


def test_a_signal_ignored_when_capshim_started_stays_ignored():
    """`nohup capshim run CMD`: CMD inherited SIGHUP ignored; capshim keeps it ignored rather than forward
    it and SIGKILL the command after the grace (the suite under nohup failed with 137 instead of 7)."""
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with launch._forward_signals() as fw:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is fw
            os.kill(os.getpid(), signal.SIGHUP)  # ignored by the kernel: nothing to wait for
            assert fw.times == [] and fw.pending == []
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


@pytest.mark.slow
def test_a_signal_while_the_command_starts_reaches_it():
    """The handlers are in place before the command starts: a SIGTERM that arrives before its group is
    known is held, then sent to the group once it runs (it used to kill capshim and orphan the command)."""
    with launch._forward_signals() as fw:
        signal.raise_signal(signal.SIGTERM)  # the handler runs before raise_signal returns
        assert fw.pending == [signal.SIGTERM] and len(fw.times) == 1
        child = subprocess.Popen(["sleep", "300"], process_group=0, preexec_fn=default_signals)
        fw.started(child.pid)
        assert child.wait(timeout=60) == -signal.SIGTERM
