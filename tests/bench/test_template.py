"""Process templates (capshim.bench.workloads.template, capshim.bench.templates) and the worker's
cheaper process: its phase clock and its numpy-free logits arithmetic."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from capshim.bench import templates
from capshim.bench.workloads import logits, phases, template
from capshim.bench.workloads.template import Template, TemplateError, gpu_state, worker_flags

REPO = Path(__file__).resolve().parents[2]

#: A stand-in worker serving as a template: each child runs one behaviour named by its flags.
FAKE = '''
import os, sys, time
from capshim.bench.workloads.template import serve
def main(args):
    if args[0] == "env":
        print(os.environ.get("RUN_VAR"), os.getpid(), os.getppid(), os.environ.get("CAPSHIM_FORKED_FROM"))
        print("to stderr", file=sys.stderr)
        return 0
    if args[0] == "exit":
        return int(args[1])
    if args[0] == "hang":
        print("hanging", flush=True)
        time.sleep(3600)
    return 9
sys.exit(serve(main, lambda: None))
'''


def _env(**extra) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE)
    log = open(tmp_path / "template.log", "wb")
    tpl = Template([sys.executable, str(script)], _env(), log, ready_timeout=60)
    yield tpl, tmp_path
    tpl.close()
    log.close()


def _files(tmp_path: Path, n: int):
    return open(tmp_path / f"out{n}", "w+b"), open(tmp_path / f"err{n}", "w+b")


def _gone(pid: int, seconds: float = 30) -> bool:
    """Whether ``pid`` exits within ``seconds``: waits on its pidfd (readable once it exits)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], seconds)[0])
    finally:
        os.close(fd)


def test_each_child_is_its_own_process_with_the_runs_environment(fake):
    tpl, tmp = fake
    pids = set()
    for n in range(3):
        out, err = _files(tmp, n)
        with out, err:
            rc, timed_out, why, pid = tpl.run(["env"], _env(RUN_VAR=f"run{n}"), out.fileno(), err.fileno(), 60)
            assert (rc, timed_out, why) == (0, False, None)
            out.seek(0)
            var, child, parent, forked = out.read().decode().split()
            err.seek(0)
            assert err.read() == b"to stderr\n"
        assert var == f"run{n}" and int(child) == pid and int(parent) == tpl.proc.pid == int(forked)
        pids.add(pid)
    assert len(pids) == 3 and tpl.proc.pid not in pids


def test_exit_codes_pass_through_and_no_descriptor_leaks(fake):
    tpl, tmp = fake
    before = len(os.listdir(f"/proc/{tpl.proc.pid}/fd"))
    for n, code in enumerate((0, 3, 1)):
        out, err = _files(tmp, n)
        with out, err:
            assert tpl.run(["exit", str(code)], _env(), out.fileno(), err.fileno(), 60)[0] == code
    assert len(os.listdir(f"/proc/{tpl.proc.pid}/fd")) == before


def test_timeout_kills_the_child_and_the_template_serves_on(fake):
    tpl, tmp = fake
    out, err = _files(tmp, 0)
    with out, err:
        rc, timed_out, why, pid = tpl.run(["hang"], _env(), out.fileno(), err.fileno(), 0.5)
    assert (rc, timed_out, why) == (-signal.SIGKILL, True, None)
    assert _gone(pid)
    out, err = _files(tmp, 1)
    with out, err:
        assert tpl.run(["exit", "0"], _env(), out.fileno(), err.fileno(), 60)[:3] == (0, False, None)


def test_stop_request_ends_the_child(fake):
    tpl, tmp = fake
    out, err = _files(tmp, 0)
    calls = []

    def stop():
        calls.append(1)
        return "SIGTERM" if len(calls) > 2 else None

    with out, err:
        rc, timed_out, why, pid = tpl.run(["hang"], _env(), out.fileno(), err.fileno(), 600, stop)
    assert (rc, timed_out, why) == (-signal.SIGKILL, False, "SIGTERM")


def test_killing_the_template_kills_its_child(fake):
    tpl, tmp = fake
    out, err = _files(tmp, 0)
    # the template answers the pid before it waits; read it by hand to kill the template mid-run
    template._send(tpl.sock, {"args": ["hang"], "env": _env()}, [out.fileno(), err.fileno()])
    pid = tpl._answer(60)["pid"]
    os.kill(tpl.proc.pid, signal.SIGKILL)
    assert _gone(pid), "the child outlived its template (PR_SET_PDEATHSIG)"
    with pytest.raises(TemplateError):
        tpl.run(["exit", "0"], _env(), out.fileno(), err.fileno(), 5)
    out.close()
    err.close()


def test_a_template_that_cannot_serve_raises(tmp_path):
    with open(tmp_path / "log", "wb") as log, pytest.raises(TemplateError, match="exited"):
        Template([sys.executable, "-c", "import sys; sys.exit(5)"], _env(), log, ready_timeout=60)


@pytest.mark.slow
def test_gpu_state_sees_a_vulkan_instance_and_the_template_has_none(tmp_path):
    """The check is real: a process that made a Vulkan call has the driver mapped; the worker's
    template (which imported cyllama) has not, before or after its children ran."""
    probe = ("import json, cyllama.llama.llama_cpp as cy\n"
             "from capshim.bench.workloads.template import gpu_state\n"
             "before = gpu_state(); cy.ggml_backend_load_all(); print(json.dumps([before, gpu_state()]))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                       env=_env(GGML_VK_VISIBLE_DEVICES="0"))
    before, after = json.loads(r.stdout.strip().splitlines()[-1])
    assert before == []
    assert after, f"no GPU driver mapped after ggml's Vulkan backend started: {r.stderr[-2000:]}"


def test_worker_flags():
    assert worker_flags(["py", "-m", "mod", "--a", "1"], "mod") == ["--a", "1"]
    assert worker_flags(["py", "mod.py"], "mod") is None


def test_run_forked_falls_back_with_a_note(tmp_path):
    launcher = SimpleNamespace(mode="template", templates={})
    wl = SimpleNamespace(argv=[sys.executable, "-m", templates.TEMPLATE_WORKERS[0], "--model", "x"])
    out, err = _files(tmp_path, 0)
    with out, err:
        got = templates.run_forked(launcher, "arm", wl, [sys.executable, "-c", "raise SystemExit(4)"], _env(),
                                   out, err, 10, lambda: None, tmp_path)
        assert got is None
        assert "exited" in templates.fallback_note(launcher, "arm")
        plain = SimpleNamespace(mode="plain", templates={})
        assert templates.run_forked(plain, "arm", wl, [], {}, out, err, 10, lambda: None, tmp_path) is None


def test_logits_arithmetic_matches_numpy():
    rng = random.Random(7)
    for n in (2, 5, 1024, 32000):
        vals = list(np.asarray([rng.gauss(0, 3) for _ in range(n)], dtype=np.float32).astype(float))
        ref = np.asarray(vals, dtype=np.float32)
        assert logits.float32s(vals).tobytes() == ref.tobytes()
        assert logits.argmax(vals) == int(np.argmax(ref))
        top2 = np.partition(ref, -2)[-2:]
        assert logits.top1_margin(vals) == float(top2[1] - top2[0])
        assert logits.all_finite(vals)
    assert not logits.all_finite([1.0, float("nan")]) and not logits.all_finite([float("inf"), 1.0])
    assert logits.argmax([1.0, 3.0, 3.0]) == 1 and logits.top1_margin([3.0, 3.0]) == 0.0


def test_phase_clock():
    age = phases.process_age()
    assert age is not None and 0 <= age < 3600
    ph = phases.Phases()
    ph.mark("imports")
    ph.mark("imports")
    rec = ph.record()
    assert list(rec) == list(phases.PHASES) and rec["imports"] >= 0 and rec["measure"] is None


@pytest.mark.slow
def test_templated_worker_rows_match_a_plain_workers(tmp_path):
    """The real worker, forked from its template: the same rows (keys, tests, token ids) as a plain
    process, its own pid, its own Vulkan instance (the device line in its stderr), the phases."""
    from capshim.bench import model
    from capshim.bench.workloads import builtin

    tiny = model.ensure_model("tiny")
    argv = builtin.worker_command(tiny, n_prompt=32, n_gen=8, repetitions=1)
    env = _env(**builtin.worker_env(), GGML_VK_VISIBLE_DEVICES="0")
    plain = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert plain.returncode == 0, plain.stderr[-2000:]
    with open(tmp_path / "log", "wb") as log:
        tpl = Template(argv, env, log, ready_timeout=300)
        try:
            assert tpl.gpu_state == [] and gpu_state(tpl.proc.pid) == []
            out, err = _files(tmp_path, 0)
            with out, err:
                rc, timed_out, _why, pid = tpl.run(worker_flags(argv, templates.TEMPLATE_WORKERS[0]), env,
                                                   out.fileno(), err.fileno(), 600)
                out.seek(0)
                err.seek(0)
                forked, ferr = json.loads(out.read()), err.read().decode()
            assert (rc, timed_out) == (0, False), ferr[-2000:]
            assert gpu_state(tpl.proc.pid) == [], "the child's GPU state leaked into the template"
        finally:
            tpl.close()
    rows = json.loads(plain.stdout)
    assert [sorted(r) for r in forked] == [sorted(r) for r in rows]
    assert [(r["n_prompt"], r["n_gen"]) for r in forked] == [(r["n_prompt"], r["n_gen"]) for r in rows]
    assert forked[0]["capshim_output"]["token_ids"] == rows[0]["capshim_output"]["token_ids"]
    assert forked[0]["capshim_phases"]["forked"] and not rows[0]["capshim_phases"]["forked"]
    assert list(rows[0]["capshim_phases"]) == [*phases.PHASES, "forked"]
    assert "ggml_vulkan: 0 = " in ferr and pid not in (tpl.proc.pid, os.getpid())


def test_launch_mode_from_the_environment(monkeypatch):
    from capshim.bench import runs
    from capshim.errors import UsageError

    monkeypatch.delenv(runs.LAUNCH_VAR, raising=False)
    assert runs.launch_mode() == "plain"
    monkeypatch.setenv(runs.LAUNCH_VAR, "template")
    assert runs.launch_mode() == "template"
    monkeypatch.setenv(runs.LAUNCH_VAR, "fork")
    with pytest.raises(UsageError, match="CAPSHIM_BENCH_LAUNCH='fork': expected one of plain, template"):
        runs.launch_mode()


def test_h200_table_finds_two_clusters_and_an_aa_interval(tmp_path):
    """scripts/h200-precision/table.py on made-up processes: a bulk and a cluster 5% faster."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("h200_table", REPO / "scripts" / "h200-precision" / "table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    rng = random.Random(3)
    vals = [rng.gauss(38000, 200) for _ in range(20)] + [rng.gauss(39900, 200) for _ in range(8)]
    cut = table.split(vals)
    assert 38600 < cut < 39400
    same = table.aa(vals[::2], vals[1::2])
    assert same["bootstrap95"][0] < 1 < same["bootstrap95"][1] and same["welch95"][0] < 1 < same["welch95"][1]
    faster = table.aa([v * 1.1 for v in vals], vals)
    assert faster["welch95"][0] > 1.05
    text = "Vulkan Timings:\nADD: 3 x 10 us = 30 us\nMUL_MAT f16 m=1 n=2 k=3: 2 x 5.5e+01 us = 1.1e+02 us (1 GFLOPS/s)\n"
    assert table.perf_ops(text + text) == {"ADD": 60.0, "MUL_MAT f16 m=1 n=2 k=3": 220.0}


def test_the_parent_going_away_ends_the_running_child_and_the_template(fake):
    tpl, tmp = fake
    out, err = _files(tmp, 0)
    with out, err:
        template._send(tpl.sock, {"args": ["hang"], "env": _env()}, [out.fileno(), err.fileno()])
        pid = tpl._answer(60)["pid"]
        tpl.sock.close()  # as when the bench dies: its end of the socket closes
        assert _gone(pid), "the child outlived its parent bench"
        assert _gone(tpl.proc.pid), "the template outlived its parent bench"
    assert tpl.proc.wait(30) == 0


def test_two_messages_in_one_read_are_both_delivered():
    a, b = __import__("socket").socketpair()
    with a, b:
        a.sendall(b'{"pid": 5}\n{"status": 0}\n')
        inbox = bytearray()
        assert template._recv(b, inbox) == ({"pid": 5}, [])
        assert inbox == b'{"status": 0}\n'
        assert template._recv(b, inbox) == ({"status": 0}, [])
        a.close()
        assert template._recv(b, inbox) == (None, [])
