"""The torch-sdpa workload: the worker, its path attestation, and the bench's CUDA arms.

CI has no GPU and no PyTorch: the worker runs on the stand-in torch of tests/fixtures/torch_standin
(the capability from a CUDA runtime through ctypes, else from a variable; PyTorch's SDPA rule), and
the CUDA backend is the test stand-in of tests/bench/cuda_fake.py until the cudacore branch lands.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from capshim import summary
from capshim.bench import attest, plan as plan_mod, runner
from capshim.bench.request import BenchRequest
from capshim.bench.workloads import torch_sdpa, torch_sdpa_worker
from capshim.errors import CapshimError, UsageError
from capshim.export.table import table
from tests.bench import cuda_fake

SMALL = "1x2x64x16"


def _worker(capability: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cuda_fake.SRC), str(cuda_fake.STANDIN)]),
            "CAPSHIM_STANDIN_CAPABILITY": capability, **(env or {})}
    if "CAPSHIM_CUDA_RUNTIME" not in (env or {}):
        full.pop("CAPSHIM_CUDA_RUNTIME", None)
    return subprocess.run([sys.executable, "-m", torch_sdpa.WORKER_MODULE, "--shape", SMALL, "--repetitions", "2",
                           *args], env=full, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("cap, backend", [("9.0", "cudnn"), ("8.6", "flash"), ("8.0", "flash"),
                                          ("7.5", "mem-efficient"), ("6.0", "mem-efficient"), ("3.7", "math")])
def test_the_worker_reports_the_capability_and_the_backend_pytorch_picks(cap, backend):
    res = _worker(cap)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["capability"] == [int(cap[0]), int(cap[2])] and out["sdpa_backend"] == backend
    assert len(out["samples_ms"]) == len(out["tflops"]) == 2 and all(v > 0 for v in out["tflops"])
    assert out["flops_per_call"] == 4 * 1 * 2 * 64 * 64 * 16 and len(out["output"]) == 512
    path = attest.parse_path(res.stderr)["cuda"]
    assert path["capability"] == cap and path["sdpa_backend"] == backend and path["device_name"] == "NVIDIA H200"
    assert attest.device_state(res.stderr, [], "NVIDIA H200") == ("attested", None)


def test_the_block_adds_its_matrix_products():
    res = _worker("8.0", "--block")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    e = 2 * 16
    assert out["block"] and out["flops_per_call"] == 4 * 2 * 64 * 64 * 16 + 2 * 64 * e * 12 * e


@pytest.mark.parametrize("args, rc, words", [
    (("--shape", "8x32x4096"), 2, "expected BxHxSxD"),
    (("--shape", "0x1x1x1"), 2, "at least 1"),
    (("--shape", "9999999x9999999x9999999x9999999"), 2, "elements per tensor"),
    (("--repetitions", "0"), 2, "--repetitions >= 1"),
    (("--device", "3"), 2, "sees 1 CUDA device"),
])
def test_bad_worker_usage_is_one_line(args, rc, words):
    res = _worker("9.0", *args)
    assert res.returncode == rc and words in res.stderr and "Traceback" not in res.stderr


def test_no_device_is_exit_1():
    res = _worker("9.0", env={"CAPSHIM_STANDIN_NO_DEVICE": "1"})
    assert res.returncode == 1 and "no CUDA device" in res.stderr


def test_one_table_names_the_backend_from_kernel_names():
    cudnn = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"
    assert attest.sdpa_backend(["Memset (Device)", cudnn]) == "cudnn"  # flash_fprop inside: cuDNN first
    assert attest.sdpa_backend(["void pytorch_flash::flash_fwd_kernel<...>(pytorch_flash::Flash_fwd_params)"]) == "flash"
    assert attest.sdpa_backend(["fmha_cutlassF_f16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::...)"]) \
        == "mem-efficient"
    assert attest.sdpa_backend(["ampere_fp16_s16816gemm_fp16_128x128", "softmax_warp_forward"]) == "math"
    assert attest.sdpa_backend([]) == "unknown"
    assert all(len(row) == 3 and row[2] for row in attest.SDPA_KERNELS)  # every pattern has its source


def test_unreached_compares_the_reported_capability_with_the_profile():
    path = {"cuda": {"capability": "9.0", "sdpa_backend": "cudnn"}}
    assert attest.unreached(path, {"computeCapability": 75}) == \
        "the application reported capability 9.0; the profile answers 7.5 (computeCapability)"
    assert attest.unreached({"cuda": {"capability": "7.5"}}, {"computeCapability": 75}) is None
    assert attest.unreached(path, {"multiProcessorCount": 40}) is None  # the path says nothing about it
    assert "no computeCapability" in attest.unreached({"cuda": {"capability": "nine"}}, {"computeCapability": 75})
    assert attest.unreached({}, {"computeCapability": 75}) is None


def _bench(tmp_path, *arms, aa=True, **kw):
    req = BenchRequest(arms=arms, aa=aa, workload="torch-sdpa", shape=SMALL, repetitions=2, process_reps=3,
                       warmup=0, out=str(tmp_path / "b"), **kw)
    p = plan_mod.make_plan(req, platform="linux")
    return p, runner.run(p, req)


def test_native_lowered_and_aa_arms_take_their_backends(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch)
    t4 = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    p, res = _bench(tmp_path, "native", f"t4=profile:{t4}")
    assert [a.name for a in p.arms] == ["native", "t4", "aa"] and p.device == {"name": "NVIDIA H200"}
    aa = next(a for a in p.arms if a.name == "aa").profile
    assert aa.api == "cuda" and aa.direction == "lower" and aa.capabilities["computeCapability"] == 90
    arms = res.summary["arms"]
    assert {n: a["state"] for n, a in arms.items()} == {"native": "native", "t4": "active", "aa": "active"}
    assert {n: a["path"]["cuda"]["sdpa_backend"] for n, a in arms.items()} == \
        {"native": "cudnn", "t4": "mem-efficient", "aa": "cudnn"}
    assert arms["t4"]["path"]["cuda"]["capability"] == "7.5"
    assert arms["t4"]["output_check"] == "same output as native"  # fp16 backends differ within 1e-2
    t = table([res.summary])
    cols = t["columns"]
    assert {"CUDA device", "capability", "SDPA"} <= set(cols)
    by_arm = {r["arm"]: dict(zip(cols, r["cells"])) for r in t["rows"]}
    assert (by_arm["t4"]["capability"], by_arm["t4"]["SDPA"]) == ("7.5", "mem-efficient")
    assert (by_arm["native"]["capability"], by_arm["native"]["SDPA"]) == ("9.0", "cudnn")
    assert res.summary["tests"] == ["sdpa-1x2x64x16"] and res.summary["metrics"]["sdpa-1x2x64x16"]["unit"] == "TFLOP/s"


def test_a_shim_that_does_not_reach_the_application_is_inert(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch, reach=False)
    t4 = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    _, res = _bench(tmp_path, "native", f"t4=profile:{t4}", aa=False)
    t4_arm = res.summary["arms"]["t4"]
    assert t4_arm["state"] == "inert" and res.non_shim_arms == ["t4"]
    assert t4_arm["reach_check"] == "the application reported capability 9.0; the profile answers 7.5 " \
                                    "(computeCapability)"
    assert any("did not reach" in f for f in t4_arm["flags"])
    assert summary.explain_arm("t4", t4_arm).startswith("arm t4: the shim did not reach the application")


def test_an_arm_whose_output_differs_beyond_the_tolerance_is_wrong_output(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch)
    t4 = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    monkeypatch.setattr(cuda_fake.FakeCudaBackend, "launch_env", _wrong(cuda_fake.FakeCudaBackend.launch_env))
    _, res = _bench(tmp_path, "native", f"t4=profile:{t4}", aa=False)
    t4_arm = res.summary["arms"]["t4"]
    assert t4_arm["state"] == "wrong-output"
    assert "largest absolute difference 0.5" in t4_arm["output_check"] and "tolerance 0.01" in t4_arm["output_check"]


def _wrong(launch_env):
    def wrapped(self, profile, *a, **kw):
        env = launch_env(self, profile, *a, **kw)
        return {**env, "CAPSHIM_STANDIN_WRONG": "1"} if profile is not None else env
    return wrapped


def test_plan_refusals(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch)
    for req, words in [
        (BenchRequest(workload="torch-sdpa", shape="8x32"), "--shape '8x32': expected BxHxSxD"),
        (BenchRequest(workload="ncnn", shape=SMALL), "--shape is for --workload torch-sdpa"),
        (BenchRequest(block=True), "--block is for --workload torch-sdpa"),
        (BenchRequest(workload="torch-sdpa", command=("true",)), "runs its own attention problem"),
        (BenchRequest(workload="torch-sdpa", model="tiny"), "takes --shape"),
        (BenchRequest(workload="pytorch"), "expected one of ncnn, torch-sdpa"),
        (BenchRequest(workload="torch-sdpa", arms=("t4=simulate:" + str(cuda_fake.profile_file(tmp_path, "t", 75)),)),
         "can simulate"),
    ]:
        with pytest.raises(UsageError, match=words.replace("(", r"\(").replace("[", r"\[")):
            plan_mod.make_plan(req, platform="linux")


def test_without_torch_the_workload_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(torch_sdpa.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CapshimError, match="needs PyTorch with CUDA"):
        torch_sdpa.bench_workload(SMALL)


@pytest.mark.parametrize("shape, words", [
    ("", "expected BxHxSxD"),  # an empty --shape (an unset shell variable) ran the 8x32x4096x128 default
    ("\uff18x32x4096x128", "expected BxHxSxD"),  # a full-width 8 (a Unicode digit) was taken as 8
    ("1x1x1x1000000000", "more than 9999999"),  # four positive integers: the format was not what was wrong
    ("9999999999999999999999x1x1x1", "more than 9999999"),
    ("0", "expected BxHxSxD"), ("-1", "expected BxHxSxD"), ("1000000000", "expected BxHxSxD"),
    ("8x32", "expected BxHxSxD"), ("axbxcxd", "expected BxHxSxD"), ("8x32x4096x128x1", "expected BxHxSxD"),
    ("-8x32x4096x128", "expected BxHxSxD"), ("8x32x4096x1e3", "expected BxHxSxD"), ("0x32x4096x128", "at least 1"),
])
def test_shape_refusals_say_what_is_wrong_before_the_device_is_probed(shape, words, monkeypatch):
    """Issue 22 hostile pass: a bad --shape is exit 2 naming the problem, before the stock probe
    (on a machine without a driver the probe's error hid it)."""
    monkeypatch.setenv("CAPSHIM_CUDA_RUNTIME", "/nonexistent/libcudart.so.13")
    with pytest.raises(UsageError, match=re.escape(f"--shape {shape!r}: ") + ".*" + re.escape(words)):
        plan_mod.make_plan(BenchRequest(workload="torch-sdpa", shape=shape), platform="linux")


def test_parse_shape_and_flops():
    assert torch_sdpa_worker.parse_shape(" 8x32x4096x128 ") == (8, 32, 4096, 128)
    assert torch_sdpa_worker.flops_per_call((8, 32, 4096, 128), False) == 4 * 8 * 32 * 4096 ** 2 * 128


def test_arm_short_forms(tmp_path, monkeypatch):
    from capshim.bench import arms

    cuda_fake.install(monkeypatch)
    t4 = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    assert not arms.parse("native").shimmed and arms.parse("native").name == "native"
    a = arms.parse(str(t4))
    assert a.name == "t4-class" and a.profile.api == "cuda"
    assert arms.parse("vulkan-paravirt").profile.name == "vulkan-paravirt"
    with pytest.raises(UsageError, match="expected NAME=SPEC .* native, or a profile's name"):
        arms.parse("no-such-thing")


def test_path_lines_with_odd_text_stay_one_field_each():
    line = "torch-sdpa: device 1 = Weird | GPU | capability: 8.0 | sdpa: flash | kernel: k | torch: 2.11"
    got = attest.parse_cuda(line)["cuda:1"]
    assert got["device_name"] == "Weird" and got["capability"] == "8.0"  # a '|' in a name cuts it, never the fields
    assert torch_sdpa_worker._one_field("a|b\nc") == "a/b c"
    assert attest.parse_cuda("torch-sdpa: device x = A | capability: 9.0") == {}
    assert attest.parse_cuda(b"\xef\xbb\xbftorch-sdpa: device 0 = A | capability: 9.0\r\n")["cuda"]["capability"] == "9.0"


@pytest.mark.slow
def test_the_real_shim_lowers_what_pytorch_reports(tmp_path, monkeypatch):
    """The real backend and shim, the stand-in runtime and driver (built by capshim.backends.cuda), the
    stand-in torch reading the capability through cudaGetDeviceProperties as PyTorch does: the lowered
    arm reports 7.5 and takes mem-efficient."""
    from capshim.backends import cuda

    STANDIN_CUDA = str(cuda.build().standin)
    monkeypatch.syspath_prepend(str(cuda_fake.STANDIN))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(cuda_fake.SRC), str(cuda_fake.STANDIN)]))
    monkeypatch.setenv("CAPSHIM_CUDA_RUNTIME", os.path.join(STANDIN_CUDA, "libcudart.so.13"))
    monkeypatch.setenv("LD_LIBRARY_PATH", os.pathsep.join([STANDIN_CUDA, os.environ.get("LD_LIBRARY_PATH", "")]))
    t4 = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    _, res = _bench(tmp_path, "native", f"t4=profile:{t4}")
    arms = res.summary["arms"]
    assert {n: a["state"] for n, a in arms.items()} == {"native": "native", "t4": "active", "aa": "active"}
    assert arms["t4"]["path"]["cuda"]["capability"] == "7.5"
    assert arms["t4"]["path"]["cuda"]["sdpa_backend"] == "mem-efficient"
    assert arms["native"]["path"]["cuda"]["capability"] == arms["aa"]["path"]["cuda"]["capability"] != "7.5"
    # the stand-in answers the H200's name; capshim names it a stand-in wherever it names the device
    # (issue 28): the plan's device and title, the bundle's metadata and report.md, the store's device
    p = plan_mod.make_plan(BenchRequest(arms=("native",), workload="torch-sdpa", shape=SMALL), platform="linux")
    assert p.device["name"] == "NVIDIA H200" and p.device["standin"].startswith("capshim stand-in runtime ")
    assert p.title == "capshim bench — NVIDIA H200 (capshim stand-in)"
    meta = json.loads((res.bundle / "metadata.json").read_text())
    assert meta["title"] == p.title and meta["device"]["standin"]
    assert (res.bundle / "report.md").read_text().startswith("# capshim bench — NVIDIA H200 (capshim stand-in)")
    from capshim.db.ingest import read_bundle
    assert read_bundle(res.bundle).device == "NVIDIA H200 (capshim stand-in)"  # never grouped with a real H200


#: A minimal CUDA 13 runtime for the stand-in torch's ctypes path: cudaDeviceProp's name at 0, major and
#: minor at 360 and 364 (driver_types.h 13.0, sizeof 1008), the attributes 75/76, one device.
_TINY_CUDART = r"""
#include <string.h>
int cudaRuntimeGetVersion(int *v) { *v = 13000; return 0; }
int cudaGetDeviceCount(int *n) { *n = 1; return 0; }
int cudaGetDeviceProperties(void *p, int d) {
    if (d != 0) return 101;
    memset(p, 0, 1008); strcpy((char *)p, "Tiny GPU");
    *(int *)((char *)p + 360) = 8; *(int *)((char *)p + 364) = 6; return 0;
}
int cudaDeviceGetAttribute(int *v, int attr, int d) {
    if (d != 0) return 101;
    if (attr == 75) { *v = 8; return 0; }
    if (attr == 76) { *v = 6; return 0; }
    return 1;
}
"""


@pytest.mark.slow
def test_the_standin_torch_reads_the_runtime_as_pytorch_does(tmp_path):
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the tiny runtime")
    (tmp_path / "rt.c").write_text(_TINY_CUDART)
    lib = tmp_path / "libcudart.so.13"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "rt.c")], check=True)
    res = _worker("", env={"CAPSHIM_CUDA_RUNTIME": str(lib), "CAPSHIM_STANDIN_CAPABILITY": "3.0"})
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)  # the runtime's answer wins over the variable
    assert out["capability"] == [8, 6] and out["device_name"] == "Tiny GPU" and out["sdpa_backend"] == "flash"
    bad = _worker("9.0", env={"CAPSHIM_CUDA_RUNTIME": str(tmp_path / "missing.so")})
    assert bad.returncode == 1 and "PyTorch failed: CAPSHIM_CUDA_RUNTIME=" in bad.stderr and "cannot load it" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_command_line_runs_it_and_strict_catches_an_unreached_shim(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from capshim.cli.app import main

    cuda_fake.install(monkeypatch, reach=False)
    t4 = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    args = ["bench", "--workload", "torch-sdpa", "--shape", SMALL, "--block", "--arm", "native", "--arm", str(t4),
            "-r", "2", "--warmup", "0", "--process-reps", "2", "--json", "--out", str(tmp_path / "b")]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["tests"] == ["sdpa-1x2x64x16-block"] and summary["arms"]["t4-class"]["state"] == "inert"
    r = CliRunner().invoke(main, args[:-1] + [str(tmp_path / "c"), "--strict"])
    assert r.exit_code == 3, r.output


def test_an_arm_without_the_preloaded_shim_keeps_the_users_ld_preload(monkeypatch):
    from capshim.bench.runs import Launcher

    monkeypatch.setenv("LD_PRELOAD", "/opt/mine/libtrace.so")
    assert Launcher.neutral("LD_PRELOAD") == "/opt/mine/libtrace.so"  # never emptied for the native arm
    monkeypatch.delenv("LD_PRELOAD")
    assert Launcher.neutral("LD_PRELOAD") == ""
