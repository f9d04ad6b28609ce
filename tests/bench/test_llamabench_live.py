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
