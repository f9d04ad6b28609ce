"""capshim.cuda_binary: the architectures a CUDA binary embeds, a static runtime, the status line.

The fixtures (tests/fixtures/fatbin.py) are built to the container format the module's docstring
gives; the integrator cross-checks real binaries against cuobjdump on the H200.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from capshim import cuda_binary as cb
from tests.fixtures import fatbin as fb


def _write(tmp_path, data: bytes, name: str = "a.out"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_entries_and_architectures_of_a_container():
    entries = cb.parse_fatbin(fb.sample())
    assert [(e.kind, e.arch) for e in entries] == [("elf", 75), ("elf", 80), ("elf", 86), ("elf", 90), ("ptx", 90)]
    assert entries[0].offset == 16 and entries[1].offset == 16 + 64 + 8


def test_extended_entry_headers_and_several_containers(tmp_path):
    # sm_100+ ELF entries have 112-byte headers, sm_120 PTX 80 (the format source); containers padded to 8
    two = fb.container(fb.entry(2, 100, header_size=112), fb.entry(1, 120, b"ptx", header_size=80))
    data = fb.sample((75,), ()) + bytes(8) + two
    p = _write(tmp_path, fb.elf({".nv_fatbin": data}))
    targets = cb.embedded_architectures(p)
    assert targets == cb.CodeTargets((75, 100), (120,))
    assert targets.text() == "sm_75, sm_100 (+PTX compute_120)"


def test_status_line_says_what_was_lowered_and_what_the_code_was_built_for(tmp_path):
    p = _write(tmp_path, fb.elf({".nv_fatbin": fb.sample()}))
    line = cb.status_line(90, 75, cb.embedded_architectures(p))
    assert line == "lowered 9.0 -> 7.5; code built for sm_75, sm_80, sm_86, sm_90 (+PTX compute_90)"
    assert cb.status_line(90, None, cb.CodeTargets((), ())) == "compute capability 9.0 kept; code built for no CUDA code"
    assert "unknown" in cb.status_line(90, 80, None)
    assert cb.CodeTargets((), (90,)).text() == "PTX compute_90 only"


def test_a_file_without_a_fatbin_has_no_cuda_code(tmp_path):
    p = _write(tmp_path, fb.elf({".text": b"\x90" * 16}))
    assert cb.embedded_architectures(p) == cb.CodeTargets((), ())
    assert cb.static_runtime(p) is False


@pytest.mark.parametrize("data, what", [
    (fb.sample()[:10], "truncated container header"),
    (fb.container(fb.entry(2, 75), magic=0x12345678), "magic 0x12345678"),
    (fb.container(fb.entry(2, 75), fat_size=1 << 62), "runs past the end"),
    (fb.container(fb.entry(2, 75), fat_size=(1 << 64) - 1), "runs past the end"),
    (fb.container(fb.entry(2, 75), header_size=0), "container header size 0"),
    (fb.container(fb.entry(2, 75, header_size=8) + bytes(64)), "entry header size 8"),
    (fb.container(fb.entry(2, 75)[:8] + (1 << 60).to_bytes(8, "little") + fb.entry(2, 75)[16:]), "runs past its container"),
    (fb.container(fb.entry(2, 0)), "architecture 0"),
    (fb.container(fb.entry(1, 70000)), "architecture 70000"),
], ids=["cut", "magic", "fat-huge", "fat-u64-max", "header-0", "entry-header-8", "payload-huge", "arch-0",
        "arch-70000"])
def test_bad_containers_are_named_errors(data, what):
    with pytest.raises(cb.FatbinError, match=what):
        cb.parse_fatbin(data)


def test_bad_input_is_none_never_a_traceback(tmp_path):
    assert cb.embedded_architectures(tmp_path / "missing") is None
    assert cb.static_runtime(tmp_path) is None  # a folder
    assert cb.embedded_architectures(_write(tmp_path, b"#!/bin/sh\necho hi\n")) is None
    assert cb.static_runtime(_write(tmp_path, b"\x7fELF" + bytes(10), "cut")) is None
    broken = fb.elf({".nv_fatbin": fb.container(fb.entry(2, 75), fat_size=1 << 40)})
    assert cb.embedded_architectures(_write(tmp_path, broken, "broken")) is None
    assert cb.read_fatbin(_write(tmp_path, fb.sample(), "x.fatbin"))[-1].kind == "ptx"


def test_static_runtime_rules(tmp_path):
    defined = fb.elf({".nv_fatbin": fb.sample()}, {"cudaGetDeviceProperties": True})
    assert cb.static_runtime(_write(tmp_path, defined, "static")) is True
    imported = fb.elf({".nv_fatbin": fb.sample()}, {"__cudaRegisterFatBinary": False})
    assert cb.static_runtime(_write(tmp_path, imported, "dynamic")) is False
    stripped = fb.elf({".nv_fatbin": fb.sample()})  # a fatbin, no import of the registration: linked in
    assert cb.static_runtime(_write(tmp_path, stripped, "stripped")) is True


def test_random_and_mutated_bytes_never_raise_anything_else(tmp_path):
    rng = random.Random(560)
    corpus = [fb.sample(), fb.container(fb.entry(2, 100, header_size=112)), fb.sample((61,), (52,))]
    t0, n = time.monotonic(), 0
    for i in range(3000):
        if i % 3 == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
        else:
            b = bytearray(rng.choice(corpus))
            for _ in range(rng.randint(1, 6)):
                pos = rng.randrange(len(b))
                b[pos] = rng.randrange(256)
            data = bytes(b[: rng.randrange(len(b) + 1)]) if rng.random() < 0.3 else bytes(b)
        try:
            out = cb.parse_fatbin(data)
            assert all(e.kind in ("ptx", "elf", "other") for e in out)
        except cb.FatbinError:
            pass
        n += 1
        if i % 100 == 0:  # through LIEF too: an ELF wrapping the mutated section, and raw bytes after the magic
            got = cb.embedded_architectures(_write(tmp_path, fb.elf({".nv_fatbin": data}), f"m{i}"))
            assert got is None or isinstance(got, cb.CodeTargets)
            junk = _write(tmp_path, b"\x7fELF" + data, f"j{i}")
            assert cb.embedded_architectures(junk) is None or isinstance(cb.embedded_architectures(junk), cb.CodeTargets)
            assert cb.static_runtime(junk) in (None, True, False)
    assert n == 3000 and time.monotonic() - t0 < 120


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to link against a stand-in libcudart")
def test_needed_libcudart_is_a_dynamic_runtime(tmp_path):
    (tmp_path / "rt.c").write_text("int cudaGetDeviceCount(int *n) { *n = 1; return 0; }\n")
    (tmp_path / "main.c").write_text("int cudaGetDeviceCount(int *);\n"
                                     "int main(void) { int n; return cudaGetDeviceCount(&n); }\n")
    (tmp_path / "static.c").write_text("int cudaGetDeviceProperties(void *p, int d) { (void)p; return d; }\n"
                                       "int main(void) { return cudaGetDeviceProperties(0, 0); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libcudart.so.13"), str(tmp_path / "rt.c")],
                   check=True)
    subprocess.run(["gcc", "-o", str(tmp_path / "dyn"), str(tmp_path / "main.c"), str(tmp_path / "libcudart.so.13")],
                   check=True)
    subprocess.run(["gcc", "-o", str(tmp_path / "static"), str(tmp_path / "static.c")], check=True)
    assert cb.static_runtime(tmp_path / "dyn") is False
    assert cb.static_runtime(tmp_path / "static") is True


def _nvcc() -> str | None:
    import glob

    found = shutil.which("nvcc") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/nvcc"), reverse=True)), None)
    return found


@pytest.mark.slow
@pytest.mark.skipif(_nvcc() is None, reason="needs NVIDIA's nvcc (the CUDA toolkit; no GPU needed) to build real fatbins")
def test_real_nvcc_fatbins_and_runtimes(tmp_path):
    """What NVIDIA's own toolchain writes: the architectures asked for, static and shared runtime, stripped,
    an -rdc object, a standalone .fatbin (checked here with nvcc 13.0)."""
    nvcc = _nvcc()
    src = tmp_path / "k.cu"
    src.write_text("__global__ void add(float *x) { x[threadIdx.x] += 1.0f; }\n"
                   "int main() { float *d; cudaMalloc(&d, 128); add<<<1, 32>>>(d); return cudaDeviceSynchronize(); }\n")

    def build(*args):
        subprocess.run([nvcc, *args, str(src)], check=True, cwd=tmp_path, capture_output=True, timeout=300)

    build("-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
          "-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-o", "static")
    build("-cudart", "shared", "-gencode", "arch=compute_86,code=sm_86", "-gencode", "arch=compute_90,code=compute_90",
          "-o", "dynamic")
    build("-c", "-rdc=true", "-gencode", "arch=compute_80,code=sm_80", "-o", "k.o")
    build("-fatbin", "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90,code=compute_90",
          "-o", "k.fatbin")
    stripped = tmp_path / "stripped"
    shutil.copy(tmp_path / "static", stripped)
    subprocess.run(["strip", str(stripped)], check=True)
    assert cb.embedded_architectures(tmp_path / "static") == cb.CodeTargets((75, 80, 90), (90,))
    assert cb.embedded_architectures(tmp_path / "dynamic") == cb.CodeTargets((86,), (90,))
    assert cb.embedded_architectures(stripped) == cb.CodeTargets((75, 80, 90), (90,))
    assert cb.embedded_architectures(tmp_path / "k.o") == cb.CodeTargets((80,), ())
    assert [(e.kind, e.arch) for e in cb.read_fatbin(tmp_path / "k.fatbin")] == [("elf", 75), ("ptx", 90)]
    assert [cb.static_runtime(tmp_path / n) for n in ("static", "dynamic", "stripped", "k.o")] == [True, False, True, False]
    toolkit = Path(nvcc).resolve().parents[1]
    for rt in sorted(toolkit.glob("lib*/libcudart.so.*")):  # the runtime itself is the dynamic one
        assert cb.static_runtime(rt) is False, rt
