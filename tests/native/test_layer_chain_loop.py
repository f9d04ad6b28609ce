"""A pNext chain that loops back on itself, given to the layer's device role
directly (vk_layer_loop.c stands in for the loader and the driver: under the
real loader such a chain hangs the loader before the layer sees it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from capshim import profiles, status
from capshim.backends import vulkan
from capshim.native.build import WARNINGS, run_compiler

pytestmark = pytest.mark.slow  # every test here runs a real component (tests/test_tiers.py)

SOURCE = Path(__file__).resolve().parent / "vk_layer_loop.c"
INITIALIZATION_FAILED = -3


def test_a_looping_pnext_chain_fails_closed_and_does_not_hang(vk_build, tmp_path):
    exe = tmp_path / "vk_layer_loop"
    run_compiler(["cc", "-std=c11", *WARNINGS, str(SOURCE), "-ldl", "-o", str(exe)])
    lower = profiles.parse('name="t"\napi="vulkan"\ndirection="lower"\nversion=1\ndescription="d"\n'
                           "[capabilities]\nshaderFloat16 = false\n", "t.toml")
    st = tmp_path / "status.jsonl"
    env = dict(os.environ)
    env.update(vulkan.launch_env(None, lower, st, tmp_path))
    proc = subprocess.run([str(exe), str(vk_build.library)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"create": INITIALIZATION_FAILED, "reached_next": 0, "query": "done"}
    cut = [e for e in status.read(st).events if e.get("event") == "chain_cut"]
    assert [(e["query"], e.get("result")) for e in cut] == [
        ("vkCreateDevice", "VK_ERROR_INITIALIZATION_FAILED"), ("vkGetPhysicalDeviceFeatures2", None)]
    assert all(e["limit"] == 65536 and e["layer"] == vulkan.LAYER_DEVICE for e in cut)
    assert "vkCreateDevice: pNext chain longer than 65536 structures (or a loop); " \
           "VK_ERROR_INITIALIZATION_FAILED" in proc.stderr
