"""capshim when its own stdout or stderr cannot be written: one line and an exit code, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _run_to(args, stdout=None, stderr=subprocess.PIPE):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "capshim.cli", *args], stdout=stdout, stderr=stderr,
                          env=env, timeout=300)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["profiles"], ["profiles", "--json"], ["--help"],
                                  ["profile", "show", "vulkan-paravirt"], ["db", "list"]])
def test_stdout_on_a_full_disk_is_exit_4(args, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSHIM_DB", str(tmp_path / "r.sqlite"))
    with open("/dev/full", "w") as full:
        r = _run_to(args, stdout=full)
    err = r.stderr.decode()
    assert r.returncode == 4, err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "cannot write the output: No space left on device" in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("unbuffered", ["1", None], ids=["unbuffered", "buffered"])
def test_stderr_on_a_full_disk_keeps_the_error_exit_code(monkeypatch, unbuffered):
    # without PYTHONUNBUFFERED (a clean environment, CI's) stderr is buffered: the failed write showed at
    # the final flush, and the exit code was 4 instead of the error's 2 (found by scripts/measure-timings)
    if unbuffered:
        monkeypatch.setenv("PYTHONUNBUFFERED", unbuffered)
    else:
        monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    with open("/dev/full", "w") as full:
        r = _run_to(["profile", "show", "/nonexistent/x.toml"], stdout=subprocess.PIPE, stderr=full)
    assert r.returncode == 2


def test_closed_pipe_is_a_quiet_exit():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run(f"'{sys.executable}' -m capshim.cli profiles --json | head -c0; exit ${{PIPESTATUS[0]}}",
                       shell=True, executable="/bin/bash", capture_output=True, text=True, env=env, timeout=300)
    assert "Traceback" not in r.stderr and r.stderr == ""
    assert r.returncode == 1


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_bench_verify_and_report_on_a_full_stdout_are_exit_4(tmp_path):
    """The bundle is sealed first; only the table on stdout fails: exit 4, one line, no traceback."""
    w = tmp_path / "w"
    w.write_text("#!/bin/sh\necho '[{\"n_prompt\":512,\"n_gen\":0,\"samples_ts\":[100]}]'\n")
    w.chmod(0o755)
    out = str(tmp_path / "b")
    for args in (["bench", "--arm", "a=", "--arm", "b=", "--baseline", "a", "--warmup", "0", "-r", "1",
                  "--out", out, "--", str(w)], ["evidence", "verify", out], ["report", out]):
        with open("/dev/full", "w") as full:
            r = _run_to(args, stdout=full)
        err = r.stderr.decode()
        assert r.returncode == 4 and "Traceback" not in err, (args, err)
        assert err.rstrip().endswith("capshim: cannot write the output: No space left on device")
    from capshim import evidence

    assert evidence.verify(tmp_path / "b") == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("stderr", ["2>/dev/full", "2>&-"], ids=["full", "closed"])
@pytest.mark.parametrize("unbuffered", ["1", None], ids=["unbuffered", "buffered"])
def test_run_with_stderr_full_or_closed_runs_the_command_and_keeps_its_exit_code(stderr, unbuffered):
    # capshim run's own notes (here: the CUDA shim stays inert in sh, which links no CUDA library) are
    # written to a stderr that fails or is closed: the command still runs, its exit code is capshim's,
    # and no note lands on stdout instead (print(file=None) writes to stdout)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    for quiet in (["--quiet"], []):
        cmd = (f"'{sys.executable}' -m capshim.cli run {' '.join(quiet)} --profile t4-class -- "
               f"sh -c 'echo RAN; exit 7' {stderr}")
        r = subprocess.run(cmd, shell=True, executable="/bin/bash", stdout=subprocess.PIPE, env=env,
                           timeout=300)
        assert (r.returncode, r.stdout) == (7, b"RAN\n"), (quiet, r)


def test_emit_on_a_failing_or_missing_stderr_is_dropped(monkeypatch, tmp_path):
    from capshim.contracts import messages

    monkeypatch.setattr(sys, "stderr", None)
    messages.emit("a note", "warning")  # 2>&-: nothing written, nothing raised
    assert sys.stderr is None
    full = open("/dev/full", "w", encoding="utf-8")  # noqa: SIM115 (emit replaces it)
    monkeypatch.setattr(sys, "stderr", full)
    messages.emit("a note " * 1000, "warning")
    assert sys.stderr is not full and sys.stderr.name == os.devnull
    sys.stderr.flush()  # the dropped text is not written again
    messages.emit("another note")
