"""The CUDA part of the capability table, the CUDA profile rules and the built-in CUDA profiles.

The numbers in the table are checked against what NVIDIA ships and what was measured on the H200:
the cudaDeviceProp offsets against the ``offsetof`` list compiled there against CUDA 13.0's headers
(committed: evidence/h200-cuda-shim-checks/cudaDeviceProp-offsets-cuda13.txt), the attribute numbers
against the CUDA toolkit's own headers where one is installed (found next to ``nvcc`` on PATH; NVIDIA's
headers are never committed).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from capshim import profiles
from capshim.profiles import cudatable
from capshim.profiles.model import format_cc, parse_cc
from capshim.profiles.table import TableError, load, parse

from tests.conftest import REPO


def _toolkit_headers() -> Path | None:
    """The include folder of the CUDA toolkit whose ``nvcc`` is on PATH (``bin/nvcc`` -> ``include/``)."""
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent / "include" if nvcc else None


HEADERS = _toolkit_headers()
OFFSETS13 = REPO / "evidence" / "h200-cuda-shim-checks" / "cudaDeviceProp-offsets-cuda13.txt"
# cudaDevAttr name (driver_types.h) and CU_DEVICE_ATTRIBUTE_ name (cuda.h) of each table attribute.
ATTR_NAMES = {1: ("MaxThreadsPerBlock", "MAX_THREADS_PER_BLOCK"), 8: ("MaxSharedMemoryPerBlock", "MAX_SHARED_MEMORY_PER_BLOCK"),
              12: ("MaxRegistersPerBlock", "MAX_REGISTERS_PER_BLOCK"), 16: ("MultiProcessorCount", "MULTIPROCESSOR_COUNT"),
              38: ("L2CacheSize", "L2_CACHE_SIZE"), 39: ("MaxThreadsPerMultiProcessor", "MAX_THREADS_PER_MULTIPROCESSOR"),
              75: ("ComputeCapabilityMajor", "COMPUTE_CAPABILITY_MAJOR"),
              76: ("ComputeCapabilityMinor", "COMPUTE_CAPABILITY_MINOR"),
              81: ("MaxSharedMemoryPerMultiprocessor", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
              82: ("MaxRegistersPerMultiprocessor", "MAX_REGISTERS_PER_MULTIPROCESSOR"),
              97: ("MaxSharedMemoryPerBlockOptin", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")}


def test_the_cuda_keys_are_the_specs():
    keys = {k.key: k for k in load().keys["cuda"]}
    assert list(keys) == ["computeCapability", "multiProcessorCount", "sharedMemPerBlock", "sharedMemPerMultiprocessor",
                          "sharedMemPerBlockOptin", "regsPerBlock", "regsPerMultiprocessor", "maxThreadsPerBlock",
                          "maxThreadsPerMultiProcessor", "l2CacheSize", "totalGlobalMem", "deviceName"]
    cc = keys["computeCapability"]
    assert (cc.type, cc.kind, cc.cuda.attributes, cc.cuda.members) == ("cc", "version", (75, 76), ("major", "minor"))
    assert keys["deviceName"].type == "string" and keys["totalGlobalMem"].cuda.attributes == ()
    assert all(k.source.startswith("CUDA 13.0 driver_types.h") for k in keys.values())
    assert {a for k in keys.values() for a in k.cuda.attributes} == set(ATTR_NAMES)


@pytest.mark.skipif(HEADERS is None or not (HEADERS / "driver_types.h").is_file(),
                    reason="needs the CUDA toolkit's headers (driver_types.h, cuda.h next to nvcc on PATH)")
def test_attribute_numbers_match_both_headers():
    """cudaDeviceAttr and CUdevice_attribute give each table attribute the same number."""
    runtime = (HEADERS / "driver_types.h").read_text()
    driver = (HEADERS / "cuda.h").read_text()
    for number, (rt_name, drv_name) in ATTR_NAMES.items():
        assert re.search(rf"\bcudaDevAttr{rt_name}\s*=\s*{number}\s*,", runtime), rt_name
        assert re.search(rf"\bCU_DEVICE_ATTRIBUTE_{drv_name}\s*=\s*{number}\s*,", driver), drv_name


def test_cuda13_offsets_match_the_h200():
    """The table's CUDA 13 offsets are the ones compiled on the H200 (committed with their program)."""
    measured = {parts[0]: int(parts[1]) for parts in (line.split() for line in OFFSETS13.read_text().splitlines())
                if len(parts) >= 2}
    table = load()
    assert measured["sizeof"] == table.cuda_layouts["cuda13_size"]
    for k in table.keys["cuda"]:
        for member, off in zip(k.cuda.members, k.cuda.offsets13):
            assert measured[member] == off, member


def test_the_12_layout_differs_where_13_dropped_members():
    """CUDA 13 removed clockRate, deviceOverlap, ... (CUDA 12.6 driver_types.h): members after them moved."""
    keys = {k.key: k.cuda for k in load().keys["cuda"]}
    assert keys["computeCapability"].offsets12 == keys["computeCapability"].offsets13 == (360, 364)
    assert keys["multiProcessorCount"].offsets12 == (388,) and keys["multiProcessorCount"].offsets13 == (384,)
    assert keys["sharedMemPerBlockOptin"].offsets12 == (696,) and keys["sharedMemPerBlockOptin"].offsets13 == (672,)


def test_the_pre12_layout_places_every_member_as_12_does():
    """CUDA 11.8's cudaDeviceProp (what libcudart.so.12's plain cudaGetDeviceProperties fills) is
    CUDA 12's up to reservedSharedMemPerBlock: the same offsets, a shorter struct; every member
    the shim writes ends inside it."""
    table = load()
    for k in table.keys["cuda"]:
        assert k.cuda.offsets11 == k.cuda.offsets12, k.key
        width = 256 if k.type == "string" else 8 if k.cuda.ctype == "size_t" else 4
        assert all(off + width <= table.cuda_layouts["cuda11_size"] for off in k.cuda.offsets11), k.key


def test_the_c_table_names_every_member_and_the_generated_files_agree():
    text = cudatable.render_cuda_table_h(load())
    assert "X(computeCapability, 1, 76, CAPSHIM_CUDA_INT, 364, 364, 364) /* minor */" in text
    assert "X(totalGlobalMem, 0, -1, CAPSHIM_CUDA_SIZE, 288, 288, 288)" in text
    assert "#define CAPSHIM_CUDA_PROP11_SIZE 728" in text
    assert "X(totalGlobalMem, CAPSHIM_U64)" in text and "name" not in text.split("CAPSHIM_CUDA_KEYS")[1].split("#define")[0]
    src = Path(__file__).resolve().parents[2] / "src/capshim/native/cuda/cuda_table.h"
    assert src.read_text() == text


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace('offsets12 = [360, 364]', 'offsets12 = [360]'), "must pair up"),
    (lambda t: t.replace('type = "cc"', 'type = "float"'), "type one of"),
])
def test_cuda_table_mistakes_are_named(edit, words):
    text = (Path(__file__).resolve().parents[2] / "src/capshim/profiles/capabilities.toml").read_text()
    with pytest.raises(TableError, match=words):
        parse(edit(text))


@pytest.mark.parametrize("value, cc", [("7.5", 75), (75, 75), ("10.0", 100), ("9.0", 90), (999, 999)])
def test_compute_capability_spellings(value, cc):
    assert parse_cc(value) == cc
    assert format_cc(cc) == (value if isinstance(value, str) else f"{cc // 10}.{cc % 10}")


HEAD = 'name = "c"\napi = "cuda"\ndirection = "{direction}"\nversion = 1\ndescription = "test"\n'


@pytest.mark.parametrize("body, key, words", [
    ('[capabilities]\ncomputeCapability = "7.55"\n', "capabilities.computeCapability", "compute capability"),
    ("[capabilities]\ncomputeCapability = 9\n", "capabilities.computeCapability", "compute capability"),
    ('[capabilities]\ncomputeCapability = "sm_75"\n', "capabilities.computeCapability", "compute capability"),
    ("[capabilities]\ncomputeCapability = 7.5\n", "capabilities.computeCapability", "compute capability"),
    ("[capabilities]\nmaxComputeSharedMemorySize = 1\n", "capabilities.maxComputeSharedMemorySize", "api 'vulkan'"),
    ("[capabilities]\nsharedMemPerBlok = 1\n", "capabilities.sharedMemPerBlok", "sharedMemPerBlock"),
    ("[extensions]\nVK_KHR_x = false\n", "extensions", "unknown key"),
    ('[capabilities]\ndeviceName = ""\n', "capabilities.deviceName", "device name"),
    ("[capabilities]\ntotalGlobalMem = -1\n", "capabilities.totalGlobalMem", "0..18446744073709551615"),
    ('[capabilities]\ncomputeCapability = "7.10"\n', "capabilities.computeCapability", "compute capability"),
    ('[capabilities]\ncomputeCapability = "07.5"\n', "capabilities.computeCapability", "compute capability"),
    ('[capabilities]\ncomputeCapability = "7.5.1"\n', "capabilities.computeCapability", "compute capability"),
    ('[capabilities]\ncomputeCapability = " 7.5"\n', "capabilities.computeCapability", "compute capability"),
    ('[capabilities]\ncomputeCapability = "\u0667.\u0665"\n', "capabilities.computeCapability", "compute capability"),
    ("[capabilities]\ncomputeCapability = 0\n", "capabilities.computeCapability", "compute capability"),
    ("[capabilities]\ncomputeCapability = 1000\n", "capabilities.computeCapability", "compute capability"),
    ("[capabilities]\ncomputeCapability = -75\n", "capabilities.computeCapability", "compute capability"),
    ("[capabilities]\ncomputeCapability = 99999999999999999999999\n", "capabilities.computeCapability",
     "compute capability"),
    ("[capabilities]\nmultiprocessorCount = 4\n", "capabilities.multiprocessorCount", "multiProcessorCount"),
    ("[capabilities]\ncomputeCapabilty = 75\n", "capabilities.computeCapabilty", "computeCapability"),
    ('[capabilities]\ndeviceName = "a\\u0001b"\n', "capabilities.deviceName", "control characters"),
    ('[capabilities]\ndeviceName = "T4\\u0085"\n', "capabilities.deviceName", "control characters"),
    ('[capabilities]\ndeviceName = "' + "a" * 300 + '"\n', "capabilities.deviceName", "longer than 255"),
])
def test_bad_cuda_profiles_name_the_key(body, key, words):
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(HEAD.format(direction="lower") + body, "c.toml")
    assert exc.value.key == key and words in str(exc.value)


def test_raise_is_refused_for_cuda_by_name():
    with pytest.raises(profiles.ProfileError, match="CUDA profiles are lower-only"):
        profiles.parse(HEAD.format(direction="raise") + "[capabilities]\ncomputeCapability = 75\n", "c.toml")


def test_the_device_name_key_of_cuda_is_device_name_as_in_vulkan_and_metal():
    p = profiles.parse(HEAD.format(direction="lower") + '[capabilities]\ncomputeCapability = "8.6"\ndeviceName = "RTX 3090"\n',
                       "c.toml")
    assert p.device_name == "RTX 3090" and p.capabilities == {"computeCapability": 86}
    assert p.to_dict()["capabilities"] == {"computeCapability": "8.6", "deviceName": "RTX 3090"}
    assert profiles.parse(profiles.to_toml(p), "again.toml").capabilities == p.capabilities


@pytest.mark.parametrize("name, cc, sms, source", [("t4-class", 75, 40, "T4"), ("a100-class", 80, 108, "A100"),
                                                   ("pascal-class", 61, 20, "GTX 1080")])
def test_builtin_cuda_profiles_with_their_sources(name, cc, sms, source):
    p = profiles.load(name)
    assert (p.api, p.direction, p.capabilities["computeCapability"], p.capabilities["multiProcessorCount"]) == \
        ("cuda", "lower", cc, sms)
    assert "CUDA C++ Programming Guide" in p.text and source in p.text
    assert p.capabilities["sharedMemPerBlockOptin"] <= p.capabilities["sharedMemPerMultiprocessor"]
    assert p.capabilities["sharedMemPerBlock"] <= p.capabilities["sharedMemPerBlockOptin"]
    assert not p.device_name  # the real name stays: off by default


def test_no_effect_warnings_for_cuda_name_the_clamped_and_the_same():
    """A lower profile above the device (9.5 on 9.0) and a value the device already gives warn;
    nothing is refused (CUDA has no consistency rules)."""
    p = profiles.parse(HEAD.format(direction="lower") + '[capabilities]\ncomputeCapability = "9.5"\n'
                       "multiProcessorCount = 132\nl2CacheSize = 1024\n", "c.toml")
    device = {"device": {"name": "NVIDIA H200"}, "capabilities": {"computeCapability": 90, "multiProcessorCount": 132,
                                                                 "l2CacheSize": 62914560}}
    found = profiles.check_against_device(p, device)
    assert [f.severity for f in found] == ["warn", "warn"]
    assert found[0].message == ("computeCapability = 9.5: no effect: the device already answers 9.0; a lower "
                                "profile never raises")
    assert "multiProcessorCount = 132" in found[1].message and found[1].noop == "same"


def test_profile_check_describes_the_pair_as_major_minor():
    lines = profiles.describe(profiles.load("t4-class"))
    assert lines[0] == "computeCapability: at most 7.5, else the device's answer (version: more is stronger)"
    named = profiles.parse(HEAD.format(direction="lower") + '[capabilities]\ndeviceName = "Tesla T4"\n', "n.toml")
    assert profiles.describe(named)[0].startswith('deviceName: "Tesla T4" instead of the device\'s own name')


@pytest.mark.parametrize("body, words", [
    ("[capabilities]\nmultiProcessorCount = 0\n", "no CUDA device answers 0"),
    ("[capabilities]\nmaxThreadsPerBlock = 0\n", "no CUDA device answers 0"),
    ("[capabilities]\nsharedMemPerBlock = 0\n", "no CUDA device answers 0"),
])
def test_a_zero_count_or_size_is_refused(body, words):
    """Issue 22 hostile pass: `multiProcessorCount = 0` was taken and the shim answered 0 SMs, a
    device that does not exist (applications divide by it to size their grids)."""
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(HEAD.format(direction="lower") + body, "c.toml")
    assert words in str(exc.value) and exc.value.key.startswith("capabilities.")


def test_the_old_name_key_points_to_device_name():
    """`name` was the CUDA profile's device-name key until it became deviceName; the error said
    only "unknown capability", with no suggestion."""
    with pytest.raises(profiles.ProfileError, match="did you mean 'deviceName'"):
        profiles.parse(HEAD.format(direction="lower") + '[capabilities]\nname = "Tesla T4"\n', "c.toml")


def test_a_float_compute_capability_says_to_quote_it():
    """`computeCapability = 7.5` (a TOML float) was refused with 'expected ... like "7.5"', which
    reads like what the user wrote; now the message says to quote it."""
    with pytest.raises(profiles.ProfileError, match=r'write "7.5" in quotes'):
        profiles.parse(HEAD.format(direction="lower") + "[capabilities]\ncomputeCapability = 7.5\n", "c.toml")
