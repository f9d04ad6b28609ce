"""Generic workloads, control workloads and the ncnn workload end to end on this machine's
Vulkan device (lavapipe in CI), through the real shims."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capshim import evidence
from capshim.bench import attest
from capshim.bench.workloads import ncnn
from tests.conftest import REPO, default_signals, run_capshim, sleeping_pid, wait_for

NCNN_STOCK = """[0 llvmpipe (LLVM 15.0.6, 256 bits)]  queueC=0[1]  queueT=0[1]  prefer-slm=0  rebar=1  r-score=4
[0 llvmpipe (LLVM 15.0.6, 256 bits)]  fp16-p/s/u/a=1/1/1/1  int8-p/s/u/a=1/1/1/1  bf16-p/s=1/0
[0 llvmpipe (LLVM 15.0.6, 256 bits)]  subgroup=8(8~8)  ops=1/1/1/1/1/1/0/1/0/0
[0 llvmpipe (LLVM 15.0.6, 256 bits)]  fp16-cm=0  int8-cm=0  bf16-cm=0  fp8-cm=0  fp6-cm=0  fp4-cm=0
[1 NVIDIA H200]  fp16-cm=16x16x16/16x8x16/16x8x8  int8-cm=16x16x32/16x8x32  bf16-cm=-
"""
# An older ncnn build (2022): three-letter fields and named subgroup operations.
NCNN_OLD = """[0 Intel GPU]  fp16-p/s/a=1/1/0  int8-p/s/a=1/1/1
[0 Intel GPU]  subgroup=32  basic/vote/ballot/shuffle=1/1/0/1
"""


def test_parse_ncnn_reads_storage_arithmetic_subgroup_and_cooperative_matrix():
    p = attest.parse_ncnn(NCNN_STOCK)
    d0 = p["ncnn"]
    assert d0["device_name"] == "llvmpipe (LLVM 15.0.6, 256 bits)"
    assert (d0["fp16_packed"], d0["fp16_storage"], d0["fp16_uniform"], d0["fp16_arithmetic"]) == (True,) * 4
    assert d0["bf16_packed"] is True and d0["bf16_storage"] is False
    assert (d0["subgroup_size"], d0["subgroup_min"], d0["subgroup_max"]) == (8, 8, 8)
    assert d0["fp16_cm"] == d0["int8_cm"] == d0["bf16_cm"] == "none"
    d1 = p["ncnn:1"]
    assert d1["fp16_cm"] == "16x16x16/16x8x16/16x8x8" and d1["int8_cm"] == "16x16x32/16x8x32"
    assert "bf16_cm" not in d1  # '-' means unknown
    old = attest.parse_ncnn(NCNN_OLD)["ncnn"]
    assert old["fp16_arithmetic"] is False and old["int8_arithmetic"] is True
    assert old["subgroup_size"] == 32 and old["subgroup_vote"] is True and old["subgroup_ballot"] is False
    # parse_path keeps llama.cpp's line and adds ncnn's; unrelated bracketed lines are ignored
    both = attest.parse_path("ggml_vulkan: 0 = X (Y) | uma: 0 | fp16: 1 | warp size: 8\n" + NCNN_STOCK
                             + "[INFO] loading\n")
    assert both["vulkan"]["fp16"] is True and both["ncnn"]["fp16_arithmetic"] is True
    assert attest.parse_ncnn(NCNN_STOCK, device=1) == {"ncnn": p["ncnn:1"]}
    assert attest.parse_ncnn("[2024-01-01 12:00]  started=1\n[warn] x=1") == {}


def _worker(*prefix: str) -> tuple[dict, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([*prefix, sys.executable, "-m", "capshim.bench.workloads.ncnn_worker", "--repetitions", "2",
                        "--warmup", "1"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout), r.stderr


@pytest.mark.slow
def test_ncnn_sees_fp16_arithmetic_off_under_the_simulated_virtual_gpu(vk_build):
    pytest.importorskip("ncnn", reason="the ncnn extra is not installed (pip install 'capshim[ncnn]')")
    stock, stock_err = _worker()
    assert "fp16-p/s/u/a=1/1/1/1" in stock_err  # lavapipe, stock
    assert stock["path"]["ncnn"]["fp16_arithmetic"] is True
    assert len(stock["samples_ms"]) == 2 and all(v > 0 for v in stock["samples_ms"])
    assert stock["network"]["preset"] == "tiny" and stock["network"]["macs"] > 0
    capshim = [sys.executable, "-m", "capshim.cli", "run", "--quiet", "--simulate", "vulkan-paravirt", "--"]
    sim, sim_err = _worker(*capshim)
    assert "fp16-p/s/u/a=1/1/1/0" in sim_err
    assert sim["path"]["ncnn"]["fp16_arithmetic"] is False
    assert sim["path"]["ncnn"]["fp16_storage"] is True
    # the same network computes the same thing, up to fp16 rounding
    from capshim.bench.workloads.command import same_output

    assert same_output({"values": sim["output"], "rtol": 0.02}, {"values": stock["output"]})
    assert sim["output"] != stock["output"]  # but not bit for bit: the arithmetic path changed


@pytest.mark.slow
def test_missing_ncnn_is_a_clear_message(tmp_path, monkeypatch):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    code = "import sys; sys.modules['ncnn'] = None; from capshim.bench.workloads import ncnn_worker as w; sys.exit(w.main([]))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "pip install 'capshim[ncnn]'" in r.stderr and "Traceback" not in r.stderr
    import importlib.util

    from capshim.errors import CapshimError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ncnn" else real(name, *a))
    with pytest.raises(CapshimError, match=r"pip install 'capshim\[ncnn\]'"):
        ncnn.bench_workload("tiny")


@pytest.mark.slow
def test_bench_workload_ncnn_end_to_end(tmp_path, vk_build):
    pytest.importorskip("ncnn", reason="the ncnn extra is not installed (pip install 'capshim[ncnn]')")
    out = tmp_path / "b"
    r = run_capshim("bench", "--workload", "ncnn", "-r", "2", "--arm", "native=",
                    "--arm", "paravirt=simulate:vulkan-paravirt",
                    "--arm", "unlocked=simulate:vulkan-paravirt,profile:restore", "--out", str(out), "--json",
                    timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert evidence.verify(out) == []
    s = json.loads(r.stdout)
    assert s["tests"] == ["ncnn-tiny"]
    assert s["metrics"]["ncnn-tiny"] == {**s["metrics"]["ncnn-tiny"], "unit": "ms", "better": "lower",
                                         "spec": "json:samples_ms"}
    native, para = s["arms"]["native"], s["arms"]["paravirt"]
    assert para["state"] == "active" and native["state"] == "native"
    assert {run["device"] for run in native["runs"] + para["runs"]} == {"attested"}  # ncnn's device block
    assert native["path"]["ncnn"]["fp16_arithmetic"] is True and para["path"]["ncnn"]["fp16_arithmetic"] is False
    # the restore profile above the simulated device gives ncnn its fp16 arithmetic back
    assert s["arms"]["unlocked"]["state"] == "active"
    assert s["arms"]["unlocked"]["path"]["ncnn"]["fp16_arithmetic"] is True
    assert "fp16-p/s/u/a=1/1/1/0" in (out / "raw" / "paravirt-1.stderr").read_text()
    assert "fp16-p/s/u/a=1/1/1/1" in (out / "raw" / "unlocked-1.stderr").read_text()
    assert para["output_check"] == "same output as native"
    assert native["tests"]["ncnn-tiny"]["n"] == 2 * 10  # 2 processes x 10 timed inferences
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["workload"]["kind"] == "ncnn" and meta["workload"]["metric"]["unit"] == "ms"
    assert meta["workload"]["versions"]["ncnn"]
    report = (out / "report.md").read_text()
    assert "| median (ms, lower is better) |" in report and "| ncnn-tiny |" in report and "ncnn fp16 arith" in report


def _script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return p


# True in a process whose device-role configuration lowers shaderFloat16 (the simulated arm).
SIMULATED = 'grep -q "^shaderFloat16=0" "${CAPSHIM_VK_DEVICE_CONFIG:-/nonexistent}" 2>/dev/null'


@pytest.mark.slow
def test_generic_json_metric_control_and_output_file_check(tmp_path, vk_build):
    outfile = tmp_path / "result.txt"
    app = _script(tmp_path, "my-app", f'if {SIMULATED}; then echo changed > "{outfile}"; v=20; '
                                      f'else echo same > "{outfile}"; v=10; fi\n'
                                      'echo "starting"; echo "{\\"fps\\": [$v, $v]}"\n'
                                      # the same process then makes Vulkan calls, so the shim is active
                                      'exec vulkaninfo --summary >/dev/null 2>&1')
    ctl = _script(tmp_path, "fake-llama-bench", f'if {SIMULATED}; then t=50; else t=100; fi\n'
                                                'echo "[{\\"n_prompt\\": 8, \\"n_gen\\": 0, \\"samples_ts\\": '
                                                '[$t, $t.5, $t.2]}]"')
    out = tmp_path / "b"
    r = run_capshim("bench", "-r", "3", "--warmup", "0", "--arm", "native=", "--arm", "sim=simulate:vulkan-paravirt",
                    "--metric", "json:fps", "--unit", "fps", "--better", "higher", "--check-output",
                    "--output-file", str(outfile), "--control", f"cpu={ctl}", "--out", str(out), "--json",
                    "--", str(app), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert evidence.verify(out) == []
    assert s["metrics"]["fps"]["better"] == "higher" and s["metrics"]["fps"]["unit"] == "fps"
    assert s["arms"]["sim"]["tests"]["fps"]["speedup"]["value"] == pytest.approx(2.0)
    # the output file differed: the arm is not a result
    assert s["arms"]["sim"]["state"] == "wrong-output"
    assert s["arms"]["sim"]["output_check"] == "output differs from native, --output-file result.txt line 1: " \
                                               "sim 'changed', native 'same'"
    # the llama-bench control halved in the simulated arm: flagged
    ctest = "cpu pp8 (control)"
    assert s["controls"]["cpu"]["arms"]["sim"][ctest]["moved"] is True
    assert any(f.startswith("control cpu moved: 0.50x") for f in s["arms"]["sim"]["flags"])
    assert (out / "raw" / "sim+cpu-1.json").is_file() and not (out / "raw" / "sim.cpu-1.json").exists()
    from capshim import summary

    assert summary.load(out / "summary.json")["controls"]["cpu"]["tests"] == [ctest]  # valid summary.json
    rep = run_capshim("report", str(out), timeout=120)
    assert rep.returncode == 0 and "fps (fps, higher is better)" in rep.stdout, rep.stderr
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["controls"]["cpu"]["metric"]["unit"] == "tok/s"
    assert len(meta["arms"]["sim"]["control_runs"]) == 3


@pytest.mark.slow
def test_generic_wall_metric_on_a_shell_command(tmp_path, vk_build):
    out = tmp_path / "b"
    r = run_capshim("bench", "-r", "2", "--warmup", "0", "--metric", "wall", "--check-output", "--out", str(out),
                    "--", "sh", "-c", "exec vulkaninfo --summary >/dev/null", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert list(s["arms"]) == ["native", "vm-stock", "vm-unlocked"]
    assert s["arms"]["vm-stock"]["state"] == "active" and s["arms"]["vm-unlocked"]["state"] == "active"
    assert s["metrics"]["wall"]["unit"] == "s" and s["metrics"]["wall"]["better"] == "lower"
    assert s["arms"]["vm-stock"]["output_check"].startswith("same output")  # empty stdout everywhere
    assert "median (s," in r.stdout and "lower is" in r.stdout  # unit and direction once, in the header


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["--metric", "fps", "--", "true"], "--metric 'fps': expected wall, json:PATH or regex:PATTERN"),
    (["--metric", "json:fps", "--", "true"], "--better higher|lower"),
    (["--metric", "wall"], "give the command to measure after --"),
    (["--unit", "ms", "--", "true"], "--unit goes with --metric"),
    (["--workload", "ncnn", "--", "true"], "give no command after --"),
    (["--network", "tiny", "--metric", "wall", "--", "true"], "--network is for --workload ncnn"),
    (["--control", "x", "--metric", "wall", "--", "true"], "expected NAME=CMD"),
    (["--control", "x=no-such-program-xyz", "--metric", "wall", "--", "true"], "not found or not executable"),
    (["--control", "x=true", "--control", "x=true", "--metric", "wall", "--", "true"], "names must be unique"),
    (["--metric", "wall", "--", "no-such-program-xyz"], "'no-such-program-xyz': not found"),
])
def test_bad_generic_usage_exits_2(args, needle, tmp_path):
    r = run_capshim("bench", "--arm", "a=", "--out", str(tmp_path / "b"), *args, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_ctrl_c_during_a_control_keeps_the_arm_and_records_the_control(tmp_path):
    import signal

    # the first control run (any arm) is quick; the second sleeps until it is interrupted
    ctl = _script(tmp_path, "slow-control",
                  f'[ -f "{tmp_path}/slow" ] && echo $$ > "{tmp_path}/sleeping" && exec sleep 60\ntouch "{tmp_path}/slow"')
    out = tmp_path / "b"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "capshim.cli", "bench", "--arm", "a=", "--arm", "b=", "-r", "2",
                             "--warmup", "0", "--metric", "wall", "--control", f"ctl={ctl}", "--out", str(out),
                             "--", "true"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    # a run's files reach the bundle only when it ends: wait for the second control's own marker, then
    # for that process to be in its sleep (an event, not a fixed pause)
    wait_for(lambda: proc.poll() is not None or sleeping_pid(tmp_path / "sleeping") is not None, 120,
             "the second control run to sleep")
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert evidence.verify(out) == []
    s = json.loads((out / "summary.json").read_text())
    meta = json.loads((out / "metadata.json").read_text())
    # round 1 ran in the seeded order of metadata.json's schedule: everything before the
    # stopped control finished and is recorded, nothing after it ran
    order = meta["schedule"][0]
    assert sorted(order) == ["a", "a+ctl", "b", "b+ctl"]
    stopped = [u for u in order if u.endswith("+ctl")][1]
    done = order[:order.index(stopped)]
    ctl_runs = {arm: meta["arms"][arm].get("control_runs", []) for arm in ("a", "b")}
    assert ctl_runs[stopped[0]][-1]["signal"] == "SIGINT"
    first = [u for u in done if u.endswith("+ctl")][0]
    assert ctl_runs[first[0]][0]["exit_code"] == 0 and ctl_runs[first[0]][0]["control"] == "ctl"
    for arm in ("a", "b"):
        wall = s["arms"][arm]["tests"].get("wall")
        assert (wall["n"] if wall else 0) == (1 if arm in done else 0)
        assert s["arms"][arm]["state"] == ("native" if arm in done else "failed")
