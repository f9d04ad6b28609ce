"""Every C configuration parser's fuzz driver, under ASan+UBSan, over seeded mutations on each CI run.

The counts (executions per driver, seed, seconds) are printed at the end of the pytest run
("capshim fuzz campaigns"). The campaigns are bounded by a number of executions, not by time.
"""

from __future__ import annotations

import pytest

from tests.backends.test_metal_fuzz import CASES as METAL_CASES
from tests.fuzzing import campaign
from tests.native.test_vulkan_config_fuzz import EDGE as VULKAN_EDGE

pytestmark = pytest.mark.slow  # every test here runs a real component (tests/test_tiers.py)

EXECUTIONS = 5000
SEED = 20261130

VULKAN_DICT = [b"direction=raise\n", b"direction=lower\n", b"=", b"\n", b"\r\n", b"0x", b"extension.",
               b"VK_KHR_", b"maxComputeSharedMemorySize=", b"shaderFloat16=", b"apiVersion=", b"#", b"\x00",
               b"9" * 21, b"18446744073709551616", b"subgroupSupportedOperations="]
METAL_DICT = [b"LUME_METAL_APPLE_FAMILY_MAX=", b"CAPSHIM_METAL_APPLE_FAMILY_MAX=", b"CAPSHIM_METAL_FORCE_FAMILIES=",
              b"LUME_METAL_MAX_THREADGROUP_MEMORY=", b"CAPSHIM_METAL_RECOMMENDED_WORKING_SET_SIZE=", b"1009",
              b"0x", b",", b"\n", b"\"", b"\\", b"\x00", b"\x7f", b"18446744073709551616", b"5001,",
              b"CAPSHIM_METAL_DEVICE_NAME=", b"%20", b"%C3%A9", b"%"]


def test_vulkan_config_parser_campaign(vk_build, tmp_path):
    corpus = [data for data, _ in VULKAN_EDGE.values()]
    lines = campaign(vk_build.fuzz_driver, tmp_path, corpus, VULKAN_DICT, seed=SEED, executions=EXECUTIONS,
                     name="vulkan fuzz_config (config.c)")
    assert len(lines) == EXECUTIONS
    verdicts = {"ok" if ": ok (" in ln else "invalid" if ": invalid: " in ln else ln for ln in lines}
    assert verdicts == {"ok", "invalid"}  # both paths reached, nothing else printed


def test_metal_config_parser_campaign(metal_arts, tmp_path):
    corpus = [data for data, _, _ in METAL_CASES.values()]
    lines = campaign(metal_arts["fuzz"], tmp_path, corpus, METAL_DICT, seed=SEED, executions=EXECUTIONS,
                     name="metal fuzz_config (metal_config.c)")
    heads = [ln for ln in lines if ln.startswith("== ")]
    assert len(heads) == EXECUTIONS
    configs = [ln for ln in lines if ln.startswith("config: ")]
    assert any(c.startswith("config: accepted") for c in configs)
    assert any(c.startswith("config: rejected") for c in configs)
