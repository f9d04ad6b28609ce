"""The built-in worker on real llama.cpp (cyllama-vulkan) through the real
Vulkan loader and lavapipe (GGML_VK_VISIBLE_DEVICES=0 selects the CPU-type
device). Small prompt and generation sizes keep it quick on 2 cores; Mesa's
shader cache (worker_env) makes runs after the first one fast."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cyllama.llama.llama_cpp  # noqa: E402,F401 - required: the real llama.cpp (setup.sh installs it)

from capshim.bench import model  # noqa: E402
from capshim.bench.workloads import builtin  # noqa: E402
from capshim.bench.workloads import builtin_worker as worker  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
N_PROMPT, N_GEN, REPS = 48, 16, 2
DEVICE_LINE = re.compile(
    r"^ggml_vulkan: 0 = (?P<name>.+?) \((?P<driver>[^)]*)\) \| uma: \d \| fp16: (?P<fp16>\d) \| "
    r"bf16: \d \| warp size: \d+ \| shared memory: \d+ \| int dot: \d \| matrix cores: \S+",
    re.M)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(builtin.worker_env())
    env["GGML_VK_VISIBLE_DEVICES"] = "0"
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _run(argv: list[str], **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=_env(**extra), timeout=600)


@pytest.fixture(scope="module")
def tiny() -> Path:
    return model.ensure_model("tiny")


@pytest.fixture(scope="module")
def stock_runs(tiny) -> list[subprocess.CompletedProcess]:
    argv = builtin.worker_command(tiny, n_prompt=N_PROMPT, n_gen=N_GEN, repetitions=REPS)
    runs = [_run(argv), _run(argv)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    return runs


@pytest.mark.slow
def test_stdout_is_one_llama_bench_json_array(stock_runs, tiny):
    out = stock_runs[0].stdout
    rows = json.loads(out)  # nothing but the JSON on stdout
    assert isinstance(rows, list) and len(rows) == 2
    pp, tg = rows
    assert (pp["n_prompt"], pp["n_gen"]) == (N_PROMPT, 0)
    assert (tg["n_prompt"], tg["n_gen"]) == (0, N_GEN)
    keys = {"build_commit", "build_number", "model_filename", "model_type", "model_size",
            "model_n_params", "n_threads", "n_gpu_layers", "test_time", "avg_ns", "stddev_ns",
            "avg_ts", "stddev_ts", "samples_ns", "samples_ts", "capshim_output"}
    # only what the worker measured or set: no guessed llama-bench fields
    unset = {"backends", "type_k", "type_v", "cpu_mask", "cpu_strict", "poll", "use_mmap", "split_mode", "main_gpu",
             "no_kv_offload", "tensor_split", "embeddings"}
    for row in rows:
        assert keys <= set(row), keys - set(row)
        assert not unset & set(row), unset & set(row)
        assert row["model_filename"] == str(tiny)
        assert row["model_n_params"] > 0 and row["model_size"] > 0
        assert row["n_gpu_layers"] == 99
        assert len(row["samples_ns"]) == len(row["samples_ts"]) == REPS
        assert all(ns > 0 for ns in row["samples_ns"])
        assert all(ts > 0 for ts in row["samples_ts"])
        n = row["n_prompt"] + row["n_gen"]
        for ns, ts in zip(row["samples_ns"], row["samples_ts"]):
            assert ts == pytest.approx(n * 1e9 / ns, rel=1e-4)
        assert row["avg_ts"] == pytest.approx(sum(row["samples_ts"]) / REPS, rel=1e-4)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["test_time"])
    assert isinstance(pp["build_number"], int) and pp["build_number"] > 0


@pytest.mark.slow
def test_capshim_output_has_greedy_tokens_and_digest(stock_runs):
    rows = json.loads(stock_runs[0].stdout)
    out = rows[0]["capshim_output"]
    assert rows[1]["capshim_output"] == out
    ids = out["token_ids"]
    assert len(ids) == N_GEN and all(isinstance(t, int) for t in ids)
    assert re.fullmatch(r"[0-9a-f]{64}", out["logits_sha256"])
    assert out["nonfinite_logits"] is False
    # The synthetic model's greedy path is its successor cycle: real llama.cpp
    # computes what the writer built, with a margin of whole logits.
    succ = model.successor_map(model.PRESETS["tiny"])
    assert [succ[a] for a in ids[:-1]] == ids[1:]
    assert out["top1_margin_min"] > 2.0


@pytest.mark.slow
def test_llama_cpp_logs_and_the_vulkan_device_line_go_to_stderr(stock_runs):
    r = stock_runs[0]
    m = DEVICE_LINE.search(r.stderr)
    assert m, r.stderr[:3000]
    assert "llvmpipe" in m.group("name")
    assert "llama_model_loader" in r.stderr
    assert "ggml_vulkan" not in r.stdout and "llama_" not in r.stdout
    assert "capshim-builtin: pp48:" in r.stderr


@pytest.mark.slow
def test_info_log_level_drops_llama_cpp_debug_lines_but_keeps_the_device_line(stock_runs, tiny):
    info = stock_runs[0].stderr  # worker_command's default: --log-level info
    for needle in ("create_tensor:", "llama_graph_n_input_tensors", "load_tensors: layer ",
                   "llama_kv_cache: layer "):
        assert needle not in info, needle
    assert DEVICE_LINE.search(info)
    assert "ggml_vulkan: Found 1 Vulkan devices:" in info  # DEBUG in llama.cpp, kept by prefix
    assert "llama_model_loader: - kv" in info and "print_info:" in info  # INFO
    assert "capshim-builtin: model and context ready" in info and "capshim-builtin: tg16:" in info
    # in order: llama.cpp's load log, then the worker's own lines
    assert info.index("llama_model_loader:") < info.index("capshim-builtin: model and context ready")

    argv = builtin.worker_command(tiny, n_prompt=N_PROMPT, n_gen=N_GEN, repetitions=1, log_level="debug")
    r = _run(argv)
    assert r.returncode == 0, r.stderr[-3000:]
    debug = r.stderr
    assert "create_tensor: loading tensor" in debug and "load_tensors: layer " in debug
    assert DEVICE_LINE.search(debug).group(0) == DEVICE_LINE.search(info).group(0)
    # every line kept at info is byte-identical to a debug run's (timings aside)
    timed = re.compile(r"took|tok/s| in \d+\.\d+ s|capshim-builtin: phases ")
    assert [x for x in info.splitlines() if not timed.search(x)] == \
        [x for x in debug.splitlines() if x in set(info.splitlines()) and not timed.search(x)]
    assert len(info.encode()) < len(debug.encode())


def test_log_filter_levels_and_continuations():
    out: list[bytes] = []
    f = worker.LogFilter(write=out.append)
    L = worker
    for level, text in [(L.GGML_LOG_LEVEL_INFO, b"load: a\n"), (L.GGML_LOG_LEVEL_DEBUG, b"create_tensor: x\n"),
                        (L.GGML_LOG_LEVEL_CONT, b"more of x\n"), (L.GGML_LOG_LEVEL_DEBUG, b"ggml_vulkan: 0 = d | uma: 0\n"),
                        (L.GGML_LOG_LEVEL_CONT, b"."), (L.GGML_LOG_LEVEL_WARN, b"w\n"), (L.GGML_LOG_LEVEL_CONT, b"."),
                        (L.GGML_LOG_LEVEL_ERROR, b"e \xff\n"), (L.GGML_LOG_LEVEL_NONE, b"n\n"), (9, b"unknown\n"),
                        (L.GGML_LOG_LEVEL_DEBUG, b"ggml_metal_device_init: GPU name: x\n")]:
        f(level, text, None)
    assert out == [b"load: a\n", b"ggml_vulkan: 0 = d | uma: 0\n", b".", b"w\n", b".", b"e \xff\n", b"n\n",
                   b"unknown\n", b"ggml_metal_device_init: GPU name: x\n"]
    assert (f.kept, f.dropped) == (9, 2)


def test_log_filter_never_raises():
    def broken(_data):
        raise OSError("stderr is gone")

    f = worker.LogFilter(write=broken)
    f(worker.GGML_LOG_LEVEL_ERROR, b"e\n", None)  # the write fails: the message is lost, nothing raised
    f("not a level", b"x\n", None)
    f(worker.GGML_LOG_LEVEL_INFO, None, None)  # a NULL text
    out: list[bytes] = []
    g = worker.LogFilter(write=out.append)
    g(worker.GGML_LOG_LEVEL_INFO, "text as str\n")
    assert out == [b"text as str\n"]


@pytest.mark.slow
def test_greedy_tokens_are_stable_across_runs(stock_runs):
    a, b = (json.loads(r.stdout)[0]["capshim_output"] for r in stock_runs)
    assert a["token_ids"] == b["token_ids"]


@pytest.mark.slow
def test_fp16_off_gives_the_same_tokens(tiny, stock_runs):
    # llama.cpp's own switch for what a capability profile does from below:
    # fp32 shaders instead of fp16 ones must not change the greedy tokens.
    argv = builtin.worker_command(tiny, n_prompt=N_PROMPT, n_gen=N_GEN, repetitions=1)
    r = _run(argv, GGML_VK_DISABLE_F16="1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert DEVICE_LINE.search(r.stderr).group("fp16") == "0"
    assert DEVICE_LINE.search(stock_runs[0].stderr).group("fp16") == "1"
    off = json.loads(r.stdout)[0]["capshim_output"]
    stock = json.loads(stock_runs[0].stdout)[0]["capshim_output"]
    assert off["token_ids"] == stock["token_ids"]
    assert off["top1_margin_min"] > 2.0


@pytest.mark.slow
def test_missing_model_is_one_line_and_exit_2(tmp_path):
    r = _run(builtin.worker_command(tmp_path / "nope.gguf", n_prompt=8, n_gen=4))
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "model file not found" in r.stderr and "nope.gguf" in r.stderr


@pytest.mark.slow
def test_broken_model_fails_with_one_error_line(tmp_path):
    bad = tmp_path / "junk.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 4096)
    r = _run(builtin.worker_command(bad, n_prompt=8, n_gen=4))
    assert r.returncode == 1
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("capshim-builtin: error: ") and "junk.gguf" in last


@pytest.mark.slow
def test_bad_flags_exit_2():
    r = _run([sys.executable, "-m", "capshim.bench.workloads.builtin_worker", "--model", "x", "--repetitions", "0"])
    assert r.returncode == 2 and r.stdout == ""
    assert "--repetitions" in r.stderr


def test_worker_command_and_env(tmp_path):
    argv = builtin.worker_command("/m.gguf", n_prompt=7, n_gen=3, repetitions=2, threads=1,
                                  ngl=0, seed=5, flash_attn=0)
    assert argv[:3] == [sys.executable, "-m", "capshim.bench.workloads.builtin_worker"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags == {"--model": "/m.gguf", "--n-prompt": "7", "--n-gen": "3", "--repetitions": "2",
                     "--ngl": "0", "--seed": "5", "--threads": "1", "--flash-attn": "0", "--log-level": "info"}
    assert builtin.worker_command("/m.gguf", log_level="debug")[-2:] == ["--log-level", "debug"]
    env = builtin.worker_env(tmp_path)
    assert env["MESA_SHADER_CACHE_DIR"] == str(tmp_path / "mesa-shader-cache")
    assert (tmp_path / "mesa-shader-cache").is_dir()
    assert "GGML_VK_VISIBLE_DEVICES" not in env


@pytest.mark.slow
def test_bench_passes_the_log_level_from_its_variable(monkeypatch):
    from capshim.errors import UsageError

    monkeypatch.delenv(builtin.WORKER_LOG_LEVEL_VAR, raising=False)
    w = builtin.builtin_workload("tiny", 8, 4, check_output=True)
    assert w.log_level == "info" and w.argv[w.argv.index("--log-level") + 1] == "info"
    monkeypatch.setenv(builtin.WORKER_LOG_LEVEL_VAR, "debug")
    w = builtin.builtin_workload("tiny", 8, 4, check_output=True)
    assert w.log_level == "debug" and w.argv[w.argv.index("--log-level") + 1] == "debug"
    monkeypatch.setenv(builtin.WORKER_LOG_LEVEL_VAR, "trace")
    with pytest.raises(UsageError, match=builtin.WORKER_LOG_LEVEL_VAR):
        builtin.builtin_workload("tiny", 8, 4, check_output=True)


def test_prompt_tokens_are_deterministic_and_in_range():
    a = worker.prompt_tokens(100, 50, bos=1, seed=3)
    assert a == worker.prompt_tokens(100, 50, bos=1, seed=3)
    assert a != worker.prompt_tokens(100, 50, bos=1, seed=4)
    assert len(a) == 100 and a[0] == 1 and all(3 <= t < 50 for t in a[1:])
    assert worker.prompt_tokens(0, 50, bos=1) == []
    assert worker.prompt_tokens(3, 50, bos=None)[0] >= 3


@pytest.mark.slow
def test_warm_up_run_is_on_by_default_and_can_be_turned_off(tiny):
    assert "--no-warmup" not in builtin.worker_command("/m.gguf")
    argv = builtin.worker_command(tiny, n_prompt=N_PROMPT, n_gen=N_GEN, repetitions=1, warmup_run=False)
    assert argv[-1] == "--no-warmup"
    r = _run(argv)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout)
    assert [len(row["samples_ts"]) for row in rows] == [1, 1]  # the warm-up run is never a sample
