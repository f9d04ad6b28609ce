"""Issue 29 item 5: what capshim reads from outside is bounded in size and time, and a stop signal
ends every command within seconds whatever it is doing (capshim.contracts.bounded, signals)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capshim.bench import metrics
from capshim.bench.workloads.command import extract
from capshim.contracts import bounded
from capshim.errors import UsageError
from tests.conftest import REPO, default_signals, run_capshim

#: Every pathological input must be refused well within this (a loaded 2-core machine).
LIMIT_S = 120


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-2000:]
    return " ".join(stderr.split())


def test_a_backtracking_pattern_is_stopped_naming_it():
    metric = metrics.parse_spec(r"regex:(a+)+$", better="lower")
    t0 = time.monotonic()
    with pytest.raises(UsageError, match=r"\(a\+\)\+\$' took more than 2 s on 30001 characters"):
        extract(metric, "a" * 30000 + "!", "", 1.0, "raw/a-1.txt")
    assert time.monotonic() - t0 < 30
    linear = metrics.parse_spec(r"regex:took ([0-9.]+) s", better="lower")
    assert extract(linear, "x" * (8 << 20) + "\ntook 1.5 s\n", "", 1.0, "raw/a-1.txt") == [1.5]


def test_a_pattern_or_selection_of_huge_length_is_refused_before_it_is_parsed():
    with pytest.raises(UsageError, match="at most 4096"):
        metrics.parse_spec("regex:(" + "a" * 10000 + ")", better="lower")
    with pytest.raises(UsageError, match="--since: 100000 characters"):
        bounded.text("2" * 100000, "--since")


@pytest.mark.parametrize("args", [
    ("db", "list", "--since", "2" * 100000),
    pytest.param(("db", "list", "--device", "a*" * 50000, "--match", "glob"), marks=pytest.mark.slow),
    pytest.param(("db", "show", "x" * 100000), marks=pytest.mark.slow),
    pytest.param(("db", "compare", "name=" + "y" * 100000, "1"), marks=pytest.mark.slow),
])
def test_a_selector_or_date_of_huge_length_is_one_line_exit_2(tmp_path, args):
    r = run_capshim("--verbose", args[0], "--db", f"sqlite:///{tmp_path / 'r.db'}", *args[1:], timeout=LIMIT_S)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "characters (at most 4096)" in _one_line(r.stderr)


def test_a_store_url_of_huge_length_from_the_environment_is_one_line_exit_2(tmp_path):
    r = run_capshim("db", "list", env={"CAPSHIM_DB": "sqlite:///" + "d/" * 50000}, timeout=LIMIT_S)
    assert r.returncode == 2 and "CAPSHIM_DB: 100010 characters (at most 4096)" in _one_line(r.stderr), r.stderr


def test_a_date_with_an_offset_is_compared_in_utc():
    from capshim.db.store import Store

    cond = Store._date_cond("since", "2026-01-01T05:30:00+05:30")
    assert cond.right.value == "2026-01-01T00:00:00Z"


@pytest.fixture()
def pathological(tmp_path):
    """A FIFO, /dev/zero and a 2 GB sparse file, as profile, Khronos JSON and bundle inputs."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(2 << 30)
    return {"fifo": str(fifo), "zero": "/dev/zero", "big": str(big)}


@pytest.mark.parametrize("which", ["fifo", "zero", "big"])
@pytest.mark.parametrize("cmd", [("profile", "check"), *(pytest.param(c, marks=pytest.mark.slow) for c in
                                                        (("profile", "show"), ("report",), ("run", "--profile")))])
def test_a_fifo_dev_zero_or_sparse_2gb_input_is_refused_at_once(pathological, which, cmd):
    path = pathological[which]
    args = (*cmd, path, "--", "true") if cmd[0] == "run" else (*cmd, path)
    t0 = time.monotonic()
    r = run_capshim(*args, timeout=LIMIT_S)
    assert time.monotonic() - t0 < LIMIT_S
    assert r.returncode == 2, r.stderr[-2000:]
    text = _one_line(r.stderr)
    assert "not a regular file" in text or "larger than" in text, text


@pytest.mark.slow
@pytest.mark.parametrize("which", ["fifo", "big"])
def test_db_add_of_a_fifo_or_sparse_2gb_llama_bench_file_is_refused_before_hashing(tmp_path, pathological, which):
    t0 = time.monotonic()
    r = run_capshim("db", "--db", f"sqlite:///{tmp_path / 'r.db'}", "add", "--arm", f"a={pathological[which]}",
                    timeout=LIMIT_S)
    assert r.returncode == 2, r.stderr[-2000:]
    text = _one_line(r.stderr)
    assert ("not a regular file" if which == "fifo" else "2147483648 bytes, larger than the 268435456") in text, text
    assert time.monotonic() - t0 < 60  # not hashed: 2 GB of SHA-256 took 12 s on the loaded machine


@pytest.mark.slow
def test_a_metric_command_writing_1_gb_fails_its_runs_naming_stdout(tmp_path):
    script = tmp_path / "flood.sh"
    script.write_text("#!/bin/sh\nhead -c 1073741824 /dev/zero\necho 'took 1.0 s'\n")
    script.chmod(0o755)
    r = run_capshim("bench", "--arm", "a=", "-r", "1", "--warmup", "0", "--metric", r"regex:took ([0-9.]+) s",
                    "--better", "lower", "--out", str(tmp_path / "b"), "--", str(script), timeout=LIMIT_S * 3)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "more than the 268435456 capshim reads" in _one_line(r.stderr + r.stdout)
    kept = sum(p.stat().st_size for p in (tmp_path / "b" / "raw").iterdir())
    assert kept < (300 << 20)  # head and tail of the 1 GB, not all of it


def _locked_db(tmp_path: Path):
    """A results store another process holds an exclusive lock on; returns (url, the locker)."""
    db = tmp_path / "r.db"
    assert run_capshim("db", "--db", f"sqlite:///{db}", "list", timeout=LIMIT_S).returncode == 0
    locker = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time\n"
                               f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
                               "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    assert locker.stdout.readline().strip() == "locked"
    return db, locker


def _blocked_on(db: Path, argv: list[str]) -> subprocess.Popen:
    """capshim ``argv`` started, returned once it has the store open (its descriptor is the event)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "capshim.cli", *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if any(os.path.realpath(f"/proc/{proc.pid}/fd/{fd}") == str(db) for fd in os.listdir(f"/proc/{proc.pid}/fd")):
                return proc
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"capshim never opened {db}: {proc.poll()}")


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the store open")
@pytest.mark.parametrize("sig, code, twice", [pytest.param(signal.SIGINT, 130, False, marks=pytest.mark.slow),
                                             pytest.param(signal.SIGTERM, 143, False, marks=pytest.mark.slow),
                                             (signal.SIGTERM, 143, True)])
def test_a_signal_ends_a_command_waiting_on_a_locked_store(tmp_path, sig, code, twice):
    """sqlite waits for the lock inside a library call the signal's Python handler cannot enter: the
    watchdog ends capshim STOP_GRACE_S seconds after the signal (at once after a second one)."""
    db, locker = _locked_db(tmp_path)
    try:
        proc = _blocked_on(db, ["db", "--db", f"sqlite:///{db}", "list"])
        t0 = time.monotonic()
        proc.send_signal(sig)
        if twice:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=LIMIT_S)
        took = time.monotonic() - t0
    finally:
        locker.kill()
        locker.wait()
    assert proc.returncode == code, err
    text = _one_line(err)
    assert "stopped" in text and len(err.strip().splitlines()) == 1, err
    assert took < 60  # STOP_GRACE_S (5 s) and a loaded machine's start-up, not the lock's wait


#: Waits a command can be in: the statement that waits, after the setup it needs (``path`` is a FIFO
#: or a file another process holds locked).
WAITS = {
    "pattern": "re.search(r'(a+)+$', 'a' * 60 + '!')",  # re checks for signals while it matches
    "fifo": "open(path).read()",  # a FIFO no one writes: open(2) waits, EINTR runs the handler
    "lock": "import fcntl; fcntl.flock(open(path, 'a'), fcntl.LOCK_EX)",  # the model cache's lock
}


@pytest.mark.parametrize("wait", list(WAITS))
def test_a_signal_ends_a_command_in_each_kind_of_wait(tmp_path, wait):
    """SIGTERM while the command waits ends it with 143 (its line on stderr is the event that it waits)."""
    path = tmp_path / "x"
    holder = None
    if wait == "fifo":
        os.mkfifo(path)
    elif wait == "lock":
        holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                                   f"f = open({str(path)!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                                   "print('locked', flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
    code = ("import re, sys\nfrom capshim.contracts import signals\n"
            f"path = {str(path)!r}\n"
            "with signals.ends_on_signal():\n"
            "    try:\n"
            "        print('waiting', file=sys.stderr, flush=True)\n"
            f"        {WAITS[wait]}\n"
            "    except KeyboardInterrupt as exc:\n"
            "        print('stopped', exc.signal_name, file=sys.stderr, flush=True)\n"
            "        raise SystemExit(signals.exit_code(exc.signal_name))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    try:
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True,
                                preexec_fn=default_signals)
        assert proc.stderr.readline().strip() == "waiting"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=LIMIT_S)
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
    assert proc.returncode == 143 and "stopped SIGTERM" in err, err


def test_a_tools_output_is_kept_to_the_limit_and_read_to_its_end():
    r = bounded.run(["sh", "-c", "head -c 200000000 /dev/zero; echo done >&2"], limit=1 << 20, timeout=LIMIT_S)
    assert r.returncode == 0 and len(r.stdout) == 1 << 20 and r.stderr == "done\n"
    assert bounded.run(["cat"], input=b"abc", text=False, timeout=LIMIT_S).stdout == b"abc"
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):  # its child holds the pipes: the group is killed
        bounded.run(["sh", "-c", "trap '' INT TERM; sleep 600; echo never"], timeout=1)
    assert time.monotonic() - t0 < 5.5  # not 1 s + the readers' 5 s wait for a pipe a survivor holds


def test_a_signal_ends_a_command_waiting_on_a_tool_that_ignores_signals(tmp_path):
    """The tool (trapping SIGINT and SIGTERM) is killed and capshim exits 130; the tool's file is the
    event that it runs."""
    ready = tmp_path / "ready"
    code = ("import sys\nfrom capshim.contracts import bounded, signals\n"
            "with signals.ends_on_signal():\n"
            "    try:\n"
            f"        bounded.run(['sh', '-c', \"trap '' INT TERM; echo $$ > {ready}; exec sleep 600\"])\n"
            "    except KeyboardInterrupt as exc:\n"
            "        raise SystemExit(signals.exit_code(exc.signal_name))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    deadline = time.monotonic() + LIMIT_S
    while not (ready.exists() and ready.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    tool = int(ready.read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=LIMIT_S)
    assert proc.returncode == 130, err
    with pytest.raises(ProcessLookupError):
        for _ in range(200):  # reaped by capshim before it exited: gone, not a zombie of ours
            os.kill(tool, 0)
            time.sleep(0.05)


def test_a_run_over_the_series_or_value_limit_fails_naming_it():
    """The analysis is not cut short by a signal, so what it takes is bounded per run."""
    many = metrics.parse_spec(r"regex:v=([0-9]+)", better="lower")
    out = "v=1\n" * (metrics.MAX_RUN_SAMPLES + 5)
    assert len(extract(many, out, "", 1.0, "raw/a-1.txt")) == metrics.MAX_RUN_SAMPLES + 1  # stops reading there
    with pytest.raises(metrics.MetricError, match="more than 100000 values in one run"):
        metrics.check_run_size([{"test": "t"}] * (metrics.MAX_RUN_SAMPLES + 1), "raw/a-1.txt")
    with pytest.raises(metrics.MetricError, match=r"raw/a-1.json: 1001 tests \(series\) in one run, more than the 1000"):
        metrics.check_run_size([{"test": f"pp{i}"} for i in range(1001)], "raw/a-1.json")
    metrics.check_run_size([{"test": f"pp{i}"} for i in range(1000)], "raw/a-1.json")


def test_a_fifo_left_at_the_output_file_is_an_error_not_a_wait(tmp_path):
    from capshim.bench.workloads.command import command_workload

    target = tmp_path / "out.txt"
    w = command_workload(["true"], metrics.parse_spec("wall"), check_output=True, output_file=target)
    os.mkfifo(target)  # what a hostile run leaves where its output file should be
    with pytest.raises(metrics.MetricError, match="out.txt: the run did not leave it readable: not a regular file"):
        w.adapter.fingerprint("", "raw/a-1.txt")


def test_a_postgresql_server_that_never_answers_is_an_error_within_the_connect_limit(monkeypatch):
    """libpq waits forever by default; capshim gives it PG_CONNECT_TIMEOUT_S (here 2 s)."""
    import socket

    from capshim.db import store

    monkeypatch.setattr(store, "PG_CONNECT_TIMEOUT_S", 2)
    with socket.socket() as server:  # listens, never accepts: the client waits for the server's first bytes
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(store.DbError, match="timeout expired"):
            store.Store.open(f"postgresql://u@127.0.0.1:{port}/x")
        assert time.monotonic() - t0 < 60


def test_an_output_of_millions_of_lines_is_fingerprinted_from_its_head():
    """--check-output kept every line of a run's output as a string (256 MiB of empty lines: 268
    million of them); now the first HEAD_LINES and a count."""
    from capshim.bench.workloads.base import OutputDigest

    many = OutputDigest(b"\n" * (64 << 20), "stdout")
    assert many.n_lines == 64 << 20 and len(many.head) == OutputDigest.HEAD_LINES
    a, b = OutputDigest(b"x\r\ny\nz", "stdout"), OutputDigest(b"x\ny\nw\n", "stdout")
    assert (a.n_lines, b.n_lines) == (3, 3)
    assert a.first_difference(b, "arm", "ref") == "stdout line 3: arm 'z', ref 'w'"


def test_a_stop_while_the_options_are_parsed_is_the_same_exit(monkeypatch):
    """click turns a KeyboardInterrupt outside the command into "Aborted!" and exit 1."""
    from click.testing import CliRunner

    from capshim.cli import app
    from capshim.contracts import signals

    def stop(*a, **k):
        raise signals.StopRequested("SIGTERM")

    monkeypatch.setattr(app.SuggestingGroup, "make_context", stop)
    r = CliRunner().invoke(app.main, ["profiles"])
    assert r.exit_code == 143 and "stopped (SIGTERM)" in r.output and "Aborted" not in r.output, r.output
