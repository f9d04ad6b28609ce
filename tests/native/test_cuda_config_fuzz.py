"""The configuration parser with the CUDA keyspec, in isolation, under AddressSanitizer and UBSan.

The fuzz driver (native/common/fuzz_config.c with cuda/fuzz_keys.h, built with -fsanitize=address,undefined by
``capshim build``) parses each file it is given and aborts when a result breaks the parser's
contract (a 32-bit key above 32 bits included). Here it runs over edge cases and a brief seeded
mutation campaign (tests/fuzzing.py).
"""

from __future__ import annotations

import subprocess

import pytest

from capshim.backends import cuda
from tests import fuzzing

pytestmark = pytest.mark.slow  # the compiled fuzz driver (tests/test_tiers.py)

VALID = (b"# capshim profile t4-class\ndirection=lower\nprofile=t4-class\ncomputeCapability=75\n"
         b"sharedMemPerBlockOptin=65536\ntotalGlobalMem=17179869184\ndeviceName=Tesla%20T4\n")

EDGE = {
    "valid": (VALID, "ok (3 values) computeCapability=75 sharedMemPerBlockOptin=65536 totalGlobalMem=17179869184 "
                     "deviceName=Tesla T4"),
    "u64_size": (b"direction=lower\ntotalGlobalMem=18446744073709551615\n", "ok (1 values)"),
    "u64_overflow": (b"direction=lower\ntotalGlobalMem=18446744073709551616\n", "not a whole number"),
    "u32_key_too_big": (b"direction=lower\nmultiProcessorCount=4294967296\n", "does not fit in 32 bits"),
    "vulkan_key": (b"direction=lower\nmaxComputeSharedMemorySize=1\n", "unknown key"),
    "name_is_not_a_key": (b"direction=lower\nname=1\n", "unknown key 'name'"),
    "twice": (b"direction=lower\ncomputeCapability=75\ncomputeCapability=80\n", "given twice"),
    # devices= (issue 32): an index or uuid: and 32 lowercase hex digits, at most 8, none twice
    "devices": (b"direction=lower\ndevices=1,uuid:ca950000000040008000000000000001\n",
                "ok (0 values) devices=1,uuid:ca950000000040008000000000000001"),
    "devices_leading_zero": (b"direction=lower\ndevices=01\n", "'01' is not a device index 0..63"),
    "devices_too_big": (b"direction=lower\ndevices=64\n", "'64' is not a device index"),
    "devices_upper_hex": (b"direction=lower\ndevices=uuid:CA950000000040008000000000000001\n", "is not a device"),
    "devices_short_uuid": (b"direction=lower\ndevices=uuid:ca95\n", "is not a device"),
    "devices_empty": (b"direction=lower\ndevices=\n", "'' is not a device"),
    "devices_empty_item": (b"direction=lower\ndevices=0,,1\n", "'' is not a device"),
    "devices_dup": (b"direction=lower\ndevices=1,1\n", "'1' given twice"),
    "devices_nine": (b"direction=lower\ndevices=0,1,2,3,4,5,6,7,8\n", "more than 8 devices"),
    "devices_key_twice": (b"direction=lower\ndevices=0\ndevices=1\n", "key 'devices' given twice"),
}


@pytest.fixture(scope="module")
def driver():
    return cuda.build().fuzz_driver


@pytest.mark.parametrize("case", sorted(EDGE))
def test_edge_cases(driver, tmp_path, case):
    data, words = EDGE[case]
    f = tmp_path / f"{case}.cfg"
    f.write_bytes(data)
    out = subprocess.run([str(driver), "--values", str(f)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert words in out.stdout, out.stdout


def test_a_brief_seeded_campaign(driver, tmp_path):
    corpus = [VALID, b"direction=lower\n", b"direction=lower\nregsPerBlock=0x8000\n"]
    words = [b"computeCapability=", b"totalGlobalMem=", b"deviceName=%", b"direction=raise\n", b"\n", b"=",
             b"18446744073709551615", b"extension.VK_A=1\n", b"profile=", b"0x", b"devices=", b"uuid:",
             b"ca950000000040008000000000000001", b",", b":", b"63"]
    lines = fuzzing.campaign(driver, tmp_path, corpus, words, seed=22, executions=1500, name="cuda-config")
    assert len(lines) >= 1500
