"""``capshim bench`` end to end: real llama.cpp on the machine's Vulkan device, and
stand-in workloads that crash, hang or get interrupted."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capshim import evidence
from tests._report_paths import FIXTURES
from tests.conftest import REPO, default_signals, run_capshim, sleeping_pid

FIXTURE = REPO / "tests" / "fixtures" / "llama-bench" / "cpu-tiny.json"


@pytest.mark.slow
def test_default_bench_writes_a_verified_bundle_with_three_active_arms(tmp_path):
    out = tmp_path / "bundle"
    r = run_capshim("bench", "-r", "2", "--warmup", "1", "--n-prompt", "64", "--n-gen", "16", "--out", str(out),
                    timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert evidence.verify(out) == []
    summary = json.loads((out / "summary.json").read_text())
    arms = summary["arms"]
    assert list(arms) == ["native", "vm-stock", "vm-unlocked"]
    assert arms["native"]["state"] == "native"
    # every run's own stderr names the probed device (lavapipe): attested (issue 20)
    assert {run["device"] for a in arms.values() for run in a["runs"]} == {"attested"}
    assert arms["vm-stock"]["state"] == "active" and arms["vm-unlocked"]["state"] == "active"
    assert summary["baseline"] == "vm-stock"
    for arm in arms.values():
        assert set(arm["tests"]) == {"pp64", "tg16"}
        for t in arm["tests"].values():
            # 2 processes of 3 timed repetitions each (the CPU-device default), after an in-process warm-up
            assert t["processes"] == 2 and t["repetitions"] == 3 and t["n"] == 6 and t["median"] > 0
    # llama.cpp's own capability line shows the lowered path in vm-stock only
    stderr = (out / "raw" / "vm-stock-1.stderr").read_text()
    assert "fp16: 0" in stderr and "shared memory: 24576" in stderr
    native = (out / "raw" / "native-1.stderr").read_text()
    assert "shared memory: 24576" not in native
    assert arms["vm-stock"]["path"]["vulkan"]["shared_memory"] == 24576
    assert arms["vm-unlocked"]["path"]["vulkan"]["shared_memory"] == arms["native"]["path"]["vulkan"]["shared_memory"]
    assert "create_tensor:" not in stderr and "llama_model_loader:" in stderr  # --log-level info
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["workload"]["model_sha256"] and meta["workload"]["binary_sha256"]
    assert meta["workload"]["log_level"] == "info" and "--log-level" in meta["workload"]["argv"]
    assert meta["shims"]["vulkan_layer"]["sha256"]
    assert "vulkan-paravirt" in meta["arms"]["vm-stock"]["simulate"]["text"]
    run1 = meta["arms"]["vm-stock"]["runs"][0]
    assert run1["env_delta"]["VK_INSTANCE_LAYERS"].startswith("VK_LAYER_CAPSHIM_device")
    assert run1["exec_argv"][:2] == ["/bin/sh", "-c"]  # the pid wrapper around the workload
    # native is launched the same way, its variables set to values that enable nothing
    assert meta["arms"]["native"]["runs"][0]["env_delta"]["VK_INSTANCE_LAYERS"] == os.environ.get("VK_INSTANCE_LAYERS", "")
    assert meta["arms"]["native"]["runs"][0]["exec_argv"][:2] == ["/bin/sh", "-c"]
    assert arms["native"]["runs"][0]["telemetry"]["before"]["load"]
    rows = (out / "results.csv").read_text().splitlines()
    assert rows[0].startswith("arm,run,round,position,sample,test,tok_s") and len(rows) == 1 + 3 * 2 * 2 * 3
    assert "speed is not the claim" in r.stdout and "% of host" not in r.stdout  # lavapipe: a CPU device
    assert "vm-stock" in r.stdout and "vm-unlocked" in r.stdout  # the table


def _fake_workload(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-llama-bench"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return script


@pytest.mark.slow
def _device_line(probe: dict) -> str:
    """A shell line printing llama.cpp's device line for the probed device on stderr: the fixture's rows
    come from a CPU build, and a run counts only when its output names the probed device (issue 20)."""
    d = probe["device"]
    return f"echo 'ggml_vulkan: 0 = {d['name']} ({d['driver']}) | uma: 0 | fp16: 1 | warp size: 8' >&2"


def test_a_crashing_arm_is_recorded_and_the_others_go_on(tmp_path, stock_probe):
    # The stand-in crashes (SIGSEGV) in the arm whose device layer is configured.
    script = _fake_workload(tmp_path, f'[ -n "$CAPSHIM_VK_DEVICE_CONFIG" ] && kill -SEGV $$\n'
                                      f'{_device_line(stock_probe)}\ncat "{FIXTURE}"')
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "stock=", "--arm", "sim=simulate:vulkan-paravirt", "-r", "2", "--warmup", "0",
                    "--out", str(out), "--", str(script))
    assert r.returncode == 1, r.stderr
    assert evidence.verify(out) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms"]["sim"]["state"] == "failed"
    assert [run["signal"] for run in summary["arms"]["sim"]["runs"]] == ["SIGSEGV", "SIGSEGV"]
    assert summary["arms"]["stock"]["state"] == "native"
    assert summary["arms"]["stock"]["tests"]["pp64"]["n"] > 0
    assert "capshim: arm sim failed: killed by SIGSEGV (and 1 more failed run(s))" in r.stderr


@pytest.mark.slow
def test_inert_shim_is_flagged_and_strict_exits_3(tmp_path, stock_probe):
    # A workload that never touches Vulkan: the layer never loads.
    script = _fake_workload(tmp_path, f'{_device_line(stock_probe)}\ncat "{FIXTURE}"')
    out = tmp_path / "b"
    r = run_capshim("bench", "--strict", "--arm", "stock=", "--arm", "sim=simulate:vulkan-paravirt", "-r", "1",
                    "--warmup", "0", "--out", str(out), "--", str(script))
    assert r.returncode == 3, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms"]["sim"]["state"] == "inert"
    assert summary["arms"]["sim"]["shim_result"] is False


@pytest.mark.slow
def test_a_run_on_the_cpu_backend_is_no_result_and_strict_exits_3(tmp_path):
    """Issue 20's case: llama.cpp says 'Invalid device index' and runs on its CPU backend in every
    arm; no arm is a shim result, no speedup is printed, a warning names each arm."""
    stderr = FIXTURES / "kernels" / "tiny-cpu-fallback.stderr"
    script = _fake_workload(tmp_path, f'cat "{stderr}" >&2\ncat "{FIXTURE}"')
    out = tmp_path / "b"
    r = run_capshim("bench", "--strict", "--arm", "stock=", "--arm", "sim=simulate:vulkan-paravirt", "-r", "2",
                    "--warmup", "0", "--out", str(out), "--", str(script))
    assert r.returncode == 3, r.stderr
    assert evidence.verify(out) == []
    summary = json.loads((out / "summary.json").read_text())
    why = "llama.cpp ran on the CPU backend, not on Vulkan (ggml_vulkan: Invalid device index 7 in " \
          "GGML_VK_VISIBLE_DEVICES.)"
    for arm in ("stock", "sim"):
        a = summary["arms"][arm]
        assert a["state"] == "cpu-backend" and a["shim_result"] is False and a["device_check"] == why
        assert [run["device"] for run in a["runs"]] == ["cpu-backend", "cpu-backend"]
        assert all(t["speedup"] is None for t in a["tests"].values())
        assert f"capshim: arm {arm} is cpu-backend: {why}: not a result on the probed device" in r.stderr
    assert [w["arm"] for w in summary["warnings"] if w["test"] is None] == ["stock", "sim"]
    assert "warning: arm sim is cpu-backend" in (out / "report.md").read_text()
    assert "(no arm ran on it)" in r.stdout  # the title names the probed device, and says so
    r = run_capshim("bench", "--arm", "stock=", "--arm", "sim=simulate:vulkan-paravirt", "-r", "1",
                    "--warmup", "0", "--out", str(tmp_path / "c"), "--", str(script))
    assert r.returncode == 0, r.stderr  # without --strict: a warning, not a failure


def test_inherited_device_selection_that_names_no_device_is_exit_2_before_any_run(tmp_path):
    marker = tmp_path / "ran"
    script = _fake_workload(tmp_path, f'touch "{marker}"\ncat "{FIXTURE}"')
    r = run_capshim("bench", "--arm", "stock=", "--arm", "sim=simulate:vulkan-paravirt", "-r", "1", "--warmup", "0",
                    "--out", str(tmp_path / "b"), "--", str(script), env={"GGML_VK_VISIBLE_DEVICES": "7"})
    assert r.returncode == 2, r.stderr
    assert "capshim: GGML_VK_VISIBLE_DEVICES=7 index 7 names no device" in r.stderr
    assert "Invalid device index" in r.stderr and "Traceback" not in r.stderr
    assert not marker.exists() and not (tmp_path / "b").exists()


def test_inherited_llama_cpp_environment_is_recorded_and_warned_about(tmp_path):
    script = _fake_workload(tmp_path, f'cat "{FIXTURE}"')
    out = tmp_path / "b"
    env = {"GGML_VK_DISABLE_F16": "1", "LLAMA_ARG_API_KEY": "hunter2", "MESA_SHADER_CACHE_DISABLE": "true",
           "CUDA_VISIBLE_DEVICES": "0", "MY_PRIVATE_THING": "nope"}
    r = run_capshim("bench", "--arm", "a=", "--arm", "b=", "-r", "1", "--warmup", "0", "--out", str(out), "--",
                    str(script), env=env)
    assert r.returncode == 0, r.stderr
    assert evidence.verify(out) == []
    inherited = json.loads((out / "metadata.json").read_text())["inherited_env"]
    assert inherited["variables"]["GGML_VK_DISABLE_F16"] == "1"
    assert inherited["variables"]["MESA_SHADER_CACHE_DISABLE"] == "true"
    assert inherited["variables"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert inherited["variables"]["LLAMA_ARG_API_KEY"] == "<redacted>" and "MY_PRIVATE_THING" not in inherited["variables"]
    assert "hunter2" not in (out / "metadata.json").read_text()
    summary = json.loads((out / "summary.json").read_text())
    (w,) = [x for x in summary["warnings"] if x["arm"] is None]
    assert w["warning"].startswith("GGML_VK_DISABLE_F16=1 inherited: every arm runs without fp16")
    assert f"warning: {w['warning']}" in summary["notes"]
    assert "GGML_VK_DISABLE_F16=1 inherited" in (out / "report.md").read_text()
    assert "capshim: warning: GGML_VK_DISABLE_F16=1 inherited" in r.stderr


@pytest.mark.slow
def test_timeout_is_recorded(tmp_path):
    script = _fake_workload(tmp_path, "sleep 30")
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "stock=", "-r", "1", "--warmup", "0", "--timeout", "1", "--out", str(out),
                    "--", str(script))
    assert r.returncode == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms"]["stock"]["runs"][0]["timed_out"] is True
    assert evidence.verify(out) == []


def _bench_until(out, script, reps, ready, seconds):
    """Start ``capshim bench`` (arms a and b) in the background; return it once ``ready()`` or after ``seconds``."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "capshim.cli", "bench", "--arm", "a=", "--arm", "b=", "-r",
                             str(reps), "--warmup", "0", "--out", str(out), "--", str(script)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    deadline = time.time() + seconds
    while not ready() and time.time() < deadline:
        time.sleep(0.1)
    return proc


def _interrupt(tmp_path, sig):
    script = _fake_workload(tmp_path, f'[ -f "{tmp_path}/slow" ] && echo $$ > "{tmp_path}/sleeping" && exec sleep 60\n'
                                      f'touch "{tmp_path}/slow"\ncat "{FIXTURE}"')
    out = tmp_path / "b"
    # the run's files reach the bundle only when it ends: wait for the second run's own marker,
    # then for that process to be in its sleep (the event, not a fixed pause)
    proc = _bench_until(out, script, 3, lambda: sleeping_pid(tmp_path / "sleeping") is not None, 120)
    assert sleeping_pid(tmp_path / "sleeping") is not None, proc.communicate()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    return proc, out, stderr


@pytest.mark.slow
def test_ctrl_c_leaves_a_valid_bundle_of_what_finished(tmp_path):
    proc, out, stderr = _interrupt(tmp_path, signal.SIGINT)
    assert proc.returncode == 130, stderr
    assert evidence.verify(out) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    first, second = json.loads((out / "metadata.json").read_text())["schedule"][0]  # the order is shuffled
    assert summary["arms"][first]["tests"]["pp64"]["n"] >= 1
    # the stopped run is recorded with its signal; the arm has no finished run
    assert summary["arms"][second]["runs"][0]["signal"] == "SIGINT"
    assert summary["arms"][second]["state"] == "failed"
    assert json.loads((out / "metadata.json").read_text())["interrupted"] is True
    assert "interrupted (SIGINT)" in stderr


@pytest.mark.slow
def test_sigterm_is_handled_like_ctrl_c_and_leaves_no_workload_behind(tmp_path):
    proc, out, stderr = _interrupt(tmp_path, signal.SIGTERM)
    assert proc.returncode == 143, stderr
    assert evidence.verify(out) == []
    summary = json.loads((out / "summary.json").read_text())
    second = json.loads((out / "metadata.json").read_text())["schedule"][0][1]
    assert summary["arms"][second]["runs"][0]["signal"] == "SIGTERM"
    left = subprocess.run(["pgrep", "-f", f"{tmp_path}/fake-llama-bench"], capture_output=True, text=True)
    assert left.stdout.strip() == ""


@pytest.mark.slow
def test_sighup_seals_the_bundle_too(tmp_path):
    proc, out, stderr = _interrupt(tmp_path, signal.SIGHUP)  # the terminal went away
    assert proc.returncode == 129, stderr
    assert evidence.verify(out) == []
    summary = json.loads((out / "summary.json").read_text())
    second = json.loads((out / "metadata.json").read_text())["schedule"][0][1]
    assert summary["interrupted"] is True and summary["arms"][second]["runs"][0]["signal"] == "SIGHUP"


@pytest.mark.slow
def test_bad_bench_usage_exits_2(tmp_path):
    r = run_capshim("bench", "--arm", "x=profile:no-such", "--out", str(tmp_path / "b"), "--", "true")
    assert r.returncode == 2 and "no-such" in r.stderr
    r = run_capshim("bench", "--arm", "a=", "--baseline", "zzz", "--", "true")
    assert r.returncode == 2 and "--baseline" in r.stderr
    r = run_capshim("bench", "--arm", "bad name=", "--", "true")
    assert r.returncode == 2 and "arm name" in r.stderr
    r = run_capshim("bench", "--model", str(tmp_path / "missing.gguf"), "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and "--model" in r.stderr
    r = run_capshim("bench", "--model", "/etc/passwd", "--out", str(tmp_path / "d"))
    assert r.returncode == 2 and "not a GGUF file" in r.stderr
    assert "Traceback" not in r.stderr


def _rows_with_tokens(tokens):
    rows = json.loads(FIXTURE.read_text())[:2]
    for row in rows:
        row["capshim_output"] = {"token_ids": tokens}
    return json.dumps(rows)


@pytest.mark.slow
def test_wrong_output_marks_the_arm(tmp_path):
    same, other = tmp_path / "same.json", tmp_path / "other.json"
    same.write_text(_rows_with_tokens([1, 2, 3]))
    other.write_text(_rows_with_tokens([9, 9, 9]))
    marker = tmp_path / "first-done"
    # the first process (arm "native") prints the reference tokens, every later one other tokens
    script = _fake_workload(tmp_path, f'if [ -f "{marker}" ]; then cat "{other}"; else touch "{marker}"; '
                                      f'cat "{same}"; fi')
    out = tmp_path / "b"
    r = run_capshim("bench", "--check-output", "--arm", "native=", "--arm", "fast=", "-r", "1", "--warmup", "0",
                    "--out", str(out), "--", str(script))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms"]["native"]["state"] == "native"
    assert summary["arms"]["fast"]["state"] == "wrong-output"
    assert summary["arms"]["fast"]["shim_result"] is False
    assert re.search(r"capshim: arm fast: tokens differ from native, first at token \d+: fast \d+, native \d+: not a result", r.stderr), r.stderr


def test_host_baseline_from_a_llama_bench_file(tmp_path):
    script = _fake_workload(tmp_path, f'cat "{FIXTURE}"')
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "stock=", "--host-baseline", str(FIXTURE), "-r", "2", "--warmup", "0",
                    "--out", str(out), "--", str(script))
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["host"]["source"].endswith("cpu-tiny.json")
    pct = summary["arms"]["stock"]["tests"]["pp64"]["pct_of_host"]["value"]
    assert abs(pct - 100.0) < 1e-9  # the same samples on both sides


@pytest.mark.slow
def test_second_ctrl_c_during_a_slow_finalize_still_seals(tmp_path):
    # 1,000 series (one n_prompt each, metrics.MAX_RUN_TESTS): the analysis takes seconds. SIGINT once the runs are done, then again:
    # the analysis finishes; the second one cuts a slow step (report, chart) short, recorded as skipped, and the bundle is sealed (exit 130).
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"n_prompt": 512 + i, "n_gen": 0, "samples_ts": [100 + i / 1000, 101, 99]}
                                for i in range(1000)]))
    script = _fake_workload(tmp_path, f'cat "{rows}"')
    out = tmp_path / "b"
    proc = _bench_until(out, script, 1, lambda: len(list((out / "raw").glob("*-1.stderr"))
                                                    if (out / "raw").is_dir() else []) >= 2, 120)
    proc.send_signal(signal.SIGINT)  # both runs done: capshim is analysing 2 x 1,000 series
    seen = []  # the event for the second: capshim said it got the first (stopping, or sealing)
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("capshim: SIGINT"):
            break
    proc.send_signal(signal.SIGINT)
    stdout, rest = proc.communicate(timeout=300)
    stderr = "".join(seen) + rest
    assert proc.returncode == 130, stderr[-3000:]
    assert "Aborted" not in stderr and "Traceback" not in stderr
    assert evidence.verify(out) == []
    meta = json.loads((out / "metadata.json").read_text())
    skipped = [f for f in meta["finalize_failures"] if f["error"] == "skipped: interrupted by SIGINT"]
    assert skipped and skipped[0]["step"] in ("report", "chart"), meta["finalize_failures"]
    assert len(json.loads((out / "summary.json").read_text())["tests"]) == 1000  # the analysis is never cut
    summary = json.loads((out / "summary.json").read_text())
    assert summary["finalize_failures"] == meta["finalize_failures"]
    assert (out / "results.csv").read_text().count("\n") == 1 + 2 * 1000 * 3  # the data are all there
    assert len(list((out / "raw").glob("*.json"))) == 2
