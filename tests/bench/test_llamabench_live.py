"""Real llama-bench, built from the llama-cpp-python sdist's llama.cpp (cached), parsed live.

Slow on a cold cache (download about 75 MB and a 5-minute build on 2 cores);
seconds afterwards. Not mocked: it runs the real binary on a real GGUF model.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests._report_paths import FIXTURES
from capshim.bench import analysis, attest, llamabench
from capshim.bench.llamacpp_build import ensure_llama_bench

pytestmark = pytest.mark.slow


def _capture_module():
    spec = importlib.util.spec_from_file_location("capture", FIXTURES / "llama-bench" / "capture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench_env(tmp_path_factory, progress):
    import sys

    sys.path.insert(0, str(FIXTURES))
    from tiny_gguf import write_tiny_llama

    binary = ensure_llama_bench(say=lambda m: progress(f"llama-bench build: {m}"))
    model = write_tiny_llama(tmp_path_factory.mktemp("model") / "tiny-llama.gguf")
    return binary, model, _capture_module()


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_live_output_parses(bench_env, fmt):
    binary, model, cap = bench_env
    proc = cap.run_bench(binary, model, fmt)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # stdout as the harness sees it, with a BOM and a stray init line in front
    rows = llamabench.parse_output("\ufeffload_backend: something\n" + proc.stdout, f"live-{fmt}")
    assert [r["test"] for r in rows] == ["pp64", "tg16", "pp64+tg16", "pp64 @ d64", "tg16 @ d64",
                                         "pp64+tg16 @ d64"]
    for r in rows:
        assert len(r["samples_ts"]) == 3 and all(v > 0 for v in r["samples_ts"])
        assert r["model_filename"] == str(model)
    recs = llamabench.to_records(rows, "cpu", 1)
    s = analysis.analyze(recs, {"cpu": {"state": "native", "path": attest.parse_path(proc.stderr)}}, "cpu")
    assert s["arms"]["cpu"]["tests"]["pp64"]["n"] == 3


def test_build_is_cached(bench_env):
    binary, _, _ = bench_env
    assert ensure_llama_bench() == binary
    assert Path(binary).stat().st_size > 1_000_000


def test_bench_of_a_cpu_build_is_cpu_backend_in_every_arm(bench_env, tmp_path, stock_probe):
    """Issue 20 end to end: a real llama-bench without Vulkan, benched against the probed Vulkan
    device; every arm is marked cpu-backend from llama-bench's own rows, none is a shim result."""
    import json

    from tests.conftest import run_capshim

    binary, model, _ = bench_env
    out = tmp_path / "b"
    r = run_capshim("bench", "--strict", "--arm", "stock=", "--arm", "sim=simulate:vulkan-paravirt", "-r", "1",
                    "--warmup", "0", "--out", str(out), "--", str(binary), "-m", str(model), "-p", "16", "-n", "0",
                    "-r", "1", "-t", "2", timeout=600)
    assert r.returncode == 3, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    for arm in ("stock", "sim"):
        assert s["arms"][arm]["state"] == "cpu-backend", s["arms"][arm]
        assert "llama-bench reports backends CPU" in s["arms"][arm]["device_check"]
    assert "capshim: arm sim is cpu-backend" in r.stderr
