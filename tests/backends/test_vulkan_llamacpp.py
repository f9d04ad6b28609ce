"""Real llama.cpp (cyllama-vulkan's Vulkan backend) under the capshim layers, on
this machine's Vulkan device (lavapipe in CI: GGML_VK_VISIBLE_DEVICES=0)."""

from __future__ import annotations

import json
import os
import re

import pytest

from capshim import profiles
from capshim.profiles import ondevice
from capshim.bench import model
from capshim.bench.workloads import builtin
from tests.conftest import REPO, run_capshim

pytestmark = pytest.mark.slow  # every test here runs a real component (tests/test_tiers.py)

LINE = re.compile(r"^ggml_vulkan: 0 = .*\| fp16: (?P<fp16>\d) \|.*\| shared memory: (?P<shmem>\d+) \|", re.M)
PARAVIRT = profiles.load("vulkan-paravirt")


@pytest.fixture(scope="module")
def worker():
    tiny = model.ensure_model("tiny")  # F16 weights
    return builtin.worker_command(tiny, n_prompt=32, n_gen=24, repetitions=1)


def _env():
    env = builtin.worker_env()
    env["GGML_VK_VISIBLE_DEVICES"] = os.environ.get("GGML_VK_VISIBLE_DEVICES", "0")
    env["PYTHONPATH"] = str(REPO / "src")
    return env


def _run(worker, *shim_args, tmp_path=None):
    status = tmp_path / "status.jsonl"
    r = run_capshim("run", "--force", "--status-file", str(status), *shim_args, "--", *worker, env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    m = LINE.search(r.stderr)
    assert m, r.stderr[-3000:]
    tokens = json.loads(r.stdout)[0]["capshim_output"]["token_ids"]
    return m, tokens, r


def test_llamacpp_sees_the_simulated_device_and_generates_the_same_tokens(worker, stock_probe, tmp_path):
    stock, stock_tokens, _ = _run(worker, tmp_path=tmp_path)
    assert stock["fp16"] == ("1" if stock_probe["capabilities"]["shaderFloat16"] else "0")
    assert int(stock["shmem"]) == stock_probe["capabilities"]["maxComputeSharedMemorySize"]

    sim, sim_tokens, r = _run(worker, "--simulate", "vulkan-paravirt", tmp_path=tmp_path)
    assert sim["fp16"] == "0"
    assert int(sim["shmem"]) == PARAVIRT.capabilities["maxComputeSharedMemorySize"]
    assert "VK_LAYER_CAPSHIM_device active" in r.stderr
    assert len(sim_tokens) == 24 and sim_tokens == stock_tokens


def test_unlock_profile_restores_llamacpp_path(worker, stock_probe, tmp_path):
    restore = tmp_path / "restore.toml"
    restore.write_text(ondevice.restore_profile(stock_probe, PARAVIRT).text)
    both, tokens, r = _run(worker, "--simulate", "vulkan-paravirt", "--profile", str(restore), "--strict",
                           tmp_path=tmp_path)
    assert both["fp16"] == ("1" if stock_probe["capabilities"]["shaderFloat16"] else "0")
    assert int(both["shmem"]) == stock_probe["capabilities"]["maxComputeSharedMemorySize"]
    assert "VK_LAYER_CAPSHIM_app active" in r.stderr and "VK_LAYER_CAPSHIM_device active" in r.stderr
