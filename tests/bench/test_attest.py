"""Path attestation from llama.cpp's own capability lines."""

from __future__ import annotations

from capshim.bench.attest import parse_path, same_path
from capshim.summary import display_value
from tests._report_paths import FIXTURES

CUA = FIXTURES / "cua"


def test_seed_stock_guest_is_apple5_without_simdgroup_mm():
    p = parse_path((CUA / "tiny-stock-minimal.stderr").read_text())["metal"]
    assert p["gpu_name"] == "MTL0 (Apple Paravirtual device)"
    assert (p["gpu_family"], p["gpu_family_code"]) == ("Apple5", 1005)
    assert p["gpu_families"] == "Apple5, Common3"
    assert p["simdgroup_reduction"] is False and p["simdgroup_mm"] is False
    assert p["has_bfloat"] is False and p["has_tensor"] is False
    assert p["recommended_max_working_set_mb"] == 11453.25


def test_seed_shimmed_guest_and_host():
    shim = parse_path((CUA / "tiny-safe-shim-10x-final.stderr").read_text())
    host = parse_path((CUA / "tiny-host-minimal.stderr").read_text())
    assert shim["metal"]["gpu_family"] == "Apple9" and shim["metal"]["simdgroup_mm"] is True
    assert shim["metal"]["has_bfloat"] is True
    assert host["metal"]["gpu_families"] == "Apple7, Common3, Metal4"
    assert host["metal"]["gpu_family_metal_code"] == 5002
    assert display_value(shim, "metal", "gpu_family") == "Apple9 (1009)"
    assert display_value(shim, "metal", "simdgroup_mm") == "yes"
    stock = parse_path((CUA / "tiny-stock-minimal.stderr").read_text())
    assert same_path(stock, shim) is False
    assert same_path(stock, stock) is True
    assert same_path(stock, {}) is None


def test_old_metal_spelling():
    text = ("ggml_metal_init: GPU name:   Apple M2\n"
            "ggml_metal_init: GPU family: MTLGPUFamilyApple8  (1008)\n"
            "ggml_metal_init: simdgroup reduction support   = true\n"
            "ggml_metal_init: simdgroup matrix mul. support = true\n"
            "ggml_metal_init: hasUnifiedMemory              = true\n"
            "ggml_metal_init: recommendedMaxWorkingSetSize  = 11453.25 MB\n")
    p = parse_path(text)["metal"]
    assert p["simdgroup_reduction"] is True and p["simdgroup_mm"] is True
    assert p["has_unified_memory"] is True and p["gpu_family_code"] == 1008


def test_second_device_init_replaces_families():
    host = (CUA / "tiny-host-minimal.stderr").read_text()
    stock = (CUA / "tiny-stock-minimal.stderr").read_text()
    p = parse_path(host + stock)["metal"]
    assert p["gpu_families"] == "Apple5, Common3" and "gpu_family_metal" not in p


def test_vulkan_current_format_lavapipe():
    line = ("ggml_vulkan: Found 1 Vulkan devices:\n"
            "ggml_vulkan: 0 = llvmpipe (LLVM 15.0.6, 256 bits) (llvmpipe) | uma: 0 | fp16: 1 | bf16: 0 | "
            "warp size: 8 | shared memory: 32768 | int dot: 0 | matrix cores: none\n")
    v = parse_path(line)["vulkan"]
    assert v == {"device": 0, "device_name": "llvmpipe (LLVM 15.0.6, 256 bits)", "driver": "llvmpipe",
                 "uma": False, "fp16": True, "fp16_dot2": False, "bf16": False, "warp_size": 8,
                 "shared_memory": 32768, "int_dot": False, "matrix_cores": "none"}


def test_vulkan_newest_and_oldest_formats_and_several_devices():
    text = ("ggml_vulkan: 0 = NVIDIA H200 (NVIDIA) | uma: 0 | fp16: dot2 | bf16: 1 | fp4: 0 | warp size: 32 | "
            "shared memory: 49152 | int dot: 1 | matrix cores: NV_coopmat2\n"
            "ggml_vulkan: 1 = AMD Radeon RX 6900 XT (MoltenVK) | uma: 0 | fp16: 1 | warp size: 64 | "
            "shared memory: 65536 | matrix cores: none\n")
    p = parse_path(text)
    assert p["vulkan"]["fp16_dot2"] is True and p["vulkan"]["matrix_cores"] == "NV_coopmat2"
    assert p["vulkan"]["fp4"] is False and p["vulkan"]["int_dot"] is True
    assert p["vulkan:1"]["driver"] == "MoltenVK" and "bf16" not in p["vulkan:1"]
    assert display_value(p, "vulkan", "fp16") == "yes (dot2)"
    old = parse_path("ggml_vulkan: Using Intel(R) Arc(tm) A770 Graphics (DG2) | uma: 0 | fp16: 1 | warp size: 32\n")
    assert old["vulkan"]["warp_size"] == 32 and old["vulkan"]["fp16"] is True


def test_nothing_recognised():
    assert parse_path("llama_model_loader: loaded meta data\nmain: done\n") == {}


def test_own_cpu_build_stderr_has_no_gpu_lines():
    assert parse_path((FIXTURES / "llama-bench" / "cpu-tiny.stderr").read_text()) == {}
