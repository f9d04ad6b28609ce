"""The CUDA shim's NVML door over the stand-in libnvidia-ml.so.1 (no GPU here, none in CI).

NVML must answer what the runtime answers under a profile: the compute capability, the name
(when the profile sets deviceName), the multiprocessor count and memory size of
nvmlDeviceGetAttributes(_v2), and the architecture. Four doors: a C program linking NVML, a C
program that dlopens it RTLD_LOCAL and dlsyms on the handle, Python ctypes in pynvml's way, and
pynvml itself. Each case is its own process; the stand-in answers like an H200 (9.0, 132 SMs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capshim import profiles
from capshim.backends import cuda
from capshim.native import build as nb
from tests.conftest import run_capshim
from tests.native.cuda_harness import HERE, libasan

PROFILES = ["t4-class", "a100-class", "pascal-class"]
#: The stand-in H200 through NVML (native/cuda/standin_nvml.c).
STOCK = {"cc": [9, 0], "name": "NVIDIA H200", "sms": 132, "mib": 143771, "arch": 9}
#: nvmlDeviceArchitecture_t of each profile's capability (nvml.h NVML_DEVICE_ARCH_*: Pascal 4,
#: Turing 6, Ampere 7) after the CUDA C++ Programming Guide's capability per architecture.
ARCH = {"t4-class": 6, "a100-class": 7, "pascal-class": 4}
C_DOORS = ["linked", "dlopen"]
PY_DOORS = ["ctypes", "pynvml"]
DOORS = C_DOORS + PY_DOORS


def have_pynvml() -> bool:
    return subprocess.run([sys.executable, "-c", "import pynvml"], capture_output=True).returncode == 0


def lowered(name: str) -> dict:
    """What NVML should answer under built-in profile ``name`` over the stand-in H200."""
    caps = profiles.load(name).capabilities
    cc = min(90, caps["computeCapability"])
    return {"cc": [cc // 10, cc % 10], "name": "NVIDIA H200", "sms": min(132, caps["multiProcessorCount"]),
            "mib": min(143771, caps["totalGlobalMem"] >> 20), "arch": ARCH[name]}


def compile_doors(b: cuda.CudaBuild, dest: Path, sanitize: bool = False) -> dict[str, Path]:
    """nvml_paths.c twice: linked against the stand-in NVML, and dlopen'ing it."""
    san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"] if sanitize else []
    out = {}
    for door in C_DOORS:
        exe = dest / f"nvml_{door}"
        link = ["-DNVML_LINKED", f"-L{b.standin}", "-l:libnvidia-ml.so.1"] if door == "linked" else []
        nb.run_compiler(["gcc", "-std=gnu11", "-O1", "-g", *nb.WARNINGS, *san, str(HERE / "nvml_paths.c"),
                         "-o", str(exe), *link, f"-Wl,-rpath,{b.standin}", "-ldl"])
        out[door] = exe
    return out


class Doors:
    """Runs one door in a fresh process, with the shim (a configuration text) or stock."""

    def __init__(self, b: cuda.CudaBuild, exes: dict[str, Path], tmp: Path, preload_first: list[str] | None = None):
        self.b, self.exes, self.tmp, self.first, self.n = b, exes, tmp, preload_first or [], 0

    def run(self, door: str, config: str | None, env: dict | None = None) -> tuple[dict, list[dict], str]:
        self.n += 1
        status = self.tmp / f"status-{self.n}.jsonl"
        full = {k: v for k, v in os.environ.items() if not k.startswith("CAPSHIM_") and k != "LD_PRELOAD"}
        full.update({"CAPSHIM_STATUS_FILE": str(status), "CAPSHIM_QUIET": "1", "LD_LIBRARY_PATH": str(self.b.standin)})
        if config is not None:
            cfg = self.tmp / f"cfg-{self.n}.cfg"
            cfg.write_text(config)
            full.update({"LD_PRELOAD": ":".join([*self.first, str(self.b.library)]), cuda.CONFIG_VAR: str(cfg)})
        full.update(env or {})
        argv = [str(self.exes[door])] if door in C_DOORS else [sys.executable, str(HERE / "nvml_ctypes.py"), door]
        p = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "ERROR: AddressSanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
        events = [json.loads(x) for x in status.read_text().splitlines()] if status.exists() else []
        return json.loads(p.stdout.strip().splitlines()[-1]), events, p.stderr


def answers(line: dict) -> dict:
    """The door's answers in one shape: {"cc", "name", "sms", "mib", "arch"} (asserting success)."""
    if line["door"] in C_DOORS:
        assert [line["init"], line["handle"], line["cc"][0], line["name"][0], line["attrs"][0],
                line["attrs_v2"][0], line["arch"][0]] == [0] * 7, line
        assert line["attrs"][1:] == line["attrs_v2"][1:]
        return {"cc": line["cc"][1:], "name": line["name"][1], "sms": line["attrs_v2"][1],
                "mib": line["attrs_v2"][2], "arch": line["arch"][1]}
    assert line["sms"] == line["sms_v1"]
    return {k: line[k] for k in ("cc", "name", "sms", "mib", "arch")}


@pytest.fixture(scope="module")
def doors(tmp_path_factory):
    b = cuda.build()
    tmp = tmp_path_factory.mktemp("nvml")
    return Doors(b, compile_doors(b, tmp), tmp)


def _skip_pynvml(door: str) -> None:
    if door == "pynvml" and not have_pynvml():
        pytest.skip("pynvml (nvidia-ml-py) is not installed in this Python: the pynvml door is untested here; "
                    "the ctypes door does what it does")


@pytest.mark.parametrize("door", DOORS)
def test_stock_without_the_shim(doors, door):
    _skip_pynvml(door)
    line, events, _ = doors.run(door, None)
    assert answers(line) == STOCK and events == []
    if door in C_DOORS:
        assert line["unknown_handle"] == [2, -1, -1] and line["small_name"] == 7
        assert line["attrs_v2"][3] == 7  # a member the shim never touches


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("door", DOORS)
def test_every_builtin_profile_lowers_every_door(doors, door, profile):
    """Capability, multiprocessor count, memory size and architecture agree with the runtime's
    lowering (min(device, profile)); the status says which NVML queries changed what."""
    _skip_pynvml(door)
    line, events, _ = doors.run(door, cuda.render_config(profiles.load(profile)))
    want = lowered(profile)
    assert answers(line) == want
    hooks = [e for e in events if e["event"] == "hooks"]
    assert len(hooks) == 1 and hooks[0]["door"] == "nvml" and "nvmlDeviceGetCudaComputeCapability" in hooks[0]["installed"]
    changed = {(e["query"], e["key"], e["stock"], e["reported"]) for e in events if e["event"] == "changed"}
    cc = want["cc"][0] * 10 + want["cc"][1]
    assert ("nvmlDeviceGetCudaComputeCapability", "computeCapability", 90, cc) in changed
    assert ("nvmlDeviceGetAttributes_v2", "multiProcessorCount", 132, want["sms"]) in changed
    assert ("nvmlDeviceGetAttributes_v2", "totalGlobalMem", 143771 << 20, want["mib"] << 20) in changed
    (called,) = [e for e in events if e["event"] == "called"]
    assert {"nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetName", "nvmlDeviceGetAttributes_v2",
            "nvmlDeviceGetArchitecture"} <= set(called["entry_points"])
    # the linked door binds to the exports; every other door got the wrappers from dlsym
    assert bool(called["substituted"]) == (door != "linked")
    if door in C_DOORS:
        assert line["attrs_v2"][3] == 7  # members without a key pass through


@pytest.mark.parametrize("door", DOORS)
def test_the_name_is_lowered_when_the_profile_sets_it(doors, door):
    _skip_pynvml(door)
    line, events, _ = doors.run(door, "direction=lower\ndeviceName=Tesla%20T4\n")
    assert answers(line) == {**STOCK, "name": "Tesla T4"}
    assert ("nvmlDeviceGetName", "deviceName", "NVIDIA H200", "Tesla T4") in {
        (e["query"], e["key"], e["stock"], e["reported"]) for e in events if e["event"] == "changed"}


@pytest.mark.parametrize("door", C_DOORS)
def test_unknown_handles_and_errors_pass_through(doors, door):
    """A handle NVML never gave out and a name buffer too small: the real answer, untouched."""
    line, _, _ = doors.run(door, cuda.render_config(profiles.load("t4-class")) + "deviceName=Tesla%20T4\n")
    assert line["unknown_handle"] == [2, -1, -1]
    assert line["small_name"] == 7


@pytest.mark.parametrize("door", C_DOORS)
def test_a_profile_name_longer_than_the_buffer_is_insufficient_size_and_writes_nothing(doors, door):
    """A buffer the stock name fits, a profile name that does not: NVML's own answer for a short
    buffer (nvml.h: NVML_ERROR_INSUFFICIENT_SIZE, 7), the buffer untouched; never a truncated
    name with success."""
    stock, _, _ = doors.run(door, None)
    assert stock["fit_name"] == [0, 0, "NVIDIA H200"]
    line, _, _ = doors.run(door, "direction=lower\ndeviceName=NVIDIA%20GeForce%20RTX%202080%20SUPER\n")
    assert line["fit_name"] == [7, 1, ""]
    assert line["name"] == [0, "NVIDIA GeForce RTX 2080 SUPER"]  # a buffer it fits still gets it
    short, _, _ = doors.run(door, "direction=lower\ndeviceName=Tesla%20T4\n")
    assert short["fit_name"] == [0, 0, "Tesla T4"]


def test_substitution_off_leaves_the_dlopen_door_stock_and_the_linked_door_lowered(doors):
    cfg = cuda.render_config(profiles.load("t4-class"))
    off = {"CAPSHIM_CUDA_SUBSTITUTE": "0"}
    assert answers(doors.run("dlopen", cfg, off)[0]) == STOCK
    assert answers(doors.run("linked", cfg, off)[0])["cc"] == [7, 5]


@pytest.mark.parametrize("door", ["linked", "ctypes"])
def test_a_broken_configuration_answers_stock(doors, door):
    line, events, _ = doors.run(door, "direction=lower\ncomputeCapability=75x\n")
    assert answers(line) == STOCK
    assert [e["accepted"] for e in events if e["event"] == "config"] == [False]


def test_without_nvml_in_the_process_dlsym_finds_nothing_as_it_would_stock(tmp_path):
    """The shim exports NVML names; a program asking the global scope for one while no NVML is
    loaded still gets NULL (ctypes: AttributeError), as without the shim."""
    b = cuda.build()
    cfg = tmp_path / "t4.cfg"
    cfg.write_text(cuda.render_config(profiles.load("t4-class")))
    code = ("import ctypes\ntry:\n    ctypes.CDLL(None).nvmlDeviceGetName\n    print('found')\n"
            "except AttributeError as e:\n    print('missing', 'nvmlDeviceGetName' in str(e))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAPSHIM_", "LD_"))}
    env.update({"LD_PRELOAD": str(b.library), cuda.CONFIG_VAR: str(cfg), "CAPSHIM_QUIET": "1"})
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "missing True", p.stderr


def test_an_nvml_without_the_function_answers_function_not_found_and_says_so(tmp_path):
    """A libnvidia-ml.so.1 that lacks the queries (an old or partial one): the linked program
    starts (the shim's exports satisfy it), each query answers NVML_ERROR_FUNCTION_NOT_FOUND (13)
    and nvml_lookup_failed names it; nothing crashes."""
    b = cuda.build()
    thin = tmp_path / "thin"
    thin.mkdir()
    src = tmp_path / "thin.c"
    src.write_text("int nvmlInit_v2(void) { return 0; }\n"
                   "int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { static int x; (void)i; *d = &x; return 0; }\n")
    nb.run_compiler(["gcc", "-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1", str(src), "-o",
                     str(thin / "libnvidia-ml.so.1")])
    exe = compile_doors(b, tmp_path)["linked"]
    status, cfg = tmp_path / "s.jsonl", tmp_path / "t4.cfg"
    cfg.write_text(cuda.render_config(profiles.load("t4-class")))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAPSHIM_", "LD_"))}
    env.update({"LD_PRELOAD": str(b.library), cuda.CONFIG_VAR: str(cfg), "CAPSHIM_QUIET": "1",
                "CAPSHIM_STATUS_FILE": str(status), "LD_LIBRARY_PATH": str(thin)})
    p = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    line = json.loads(p.stdout)
    assert line["cc"] == [13, -1, -1] and line["attrs_v2"][0] == 13 and line["arch"][0] == 13
    failed = {e["query"] for e in map(json.loads, status.read_text().splitlines()) if e["event"] == "nvml_lookup_failed"}
    assert failed == {"nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetName", "nvmlDeviceGetAttributes",
                      "nvmlDeviceGetAttributes_v2", "nvmlDeviceGetArchitecture"}


@pytest.mark.slow
def test_asan_build_through_the_c_doors(tmp_path):
    """AddressSanitizer + UBSan builds of the shim, the stand-in and both C programs."""
    b = cuda.build(sanitize=True)
    asan = Doors(b, compile_doors(b, tmp_path, sanitize=True), tmp_path, preload_first=[libasan()])
    for door in C_DOORS:
        for profile in PROFILES:
            line, _, _ = asan.run(door, cuda.render_config(profiles.load(profile)) + "deviceName=Tesla%20T4\n",
                                  env={"ASAN_OPTIONS": "detect_leaks=1"})
            assert answers(line) == {**lowered(profile), "name": "Tesla T4"}
        line, _, _ = asan.run(door, "direction=lower\ndeviceName=NVIDIA%20GeForce%20RTX%202080%20SUPER\n",
                              env={"ASAN_OPTIONS": "detect_leaks=1"})
        assert line["fit_name"] == [7, 1, ""]  # the longer profile name: not written


@pytest.mark.parametrize("door", PY_DOORS)
def test_capshim_run_t4_class_python_sees_7_5_through_nvml(tmp_path, door):
    """`capshim run --profile t4-class -- python nvml_ctypes.py DOOR`: the runtime's 7.5 through NVML,
    and the run reports the shim active."""
    _skip_pynvml(door)
    p = run_capshim("run", "--profile", "t4-class", "--", sys.executable, str(HERE / "nvml_ctypes.py"), door,
                    env={"LD_LIBRARY_PATH": str(cuda.build().standin)})
    assert p.returncode == 0, p.stderr
    line = json.loads(p.stdout.strip().splitlines()[-1])
    assert answers(line) == lowered("t4-class")
    assert "stayed" not in p.stderr
    assert p.stderr.count("capshim-cuda: active in ") == 1 and "through NVML" in p.stderr


def test_run_names_a_program_the_shim_cannot_reach_once_before_it_starts(tmp_path):
    """A statically linked program: `run` says once, before it starts, that its NVML and CUDA answers
    stay the device's; a dynamic one gets no such sentence."""
    src = tmp_path / "p.c"
    src.write_text("#include <stdio.h>\nint main(void) { puts(\"ran\"); return 0; }\n")
    static, dynamic = tmp_path / "static", tmp_path / "dynamic"
    nb.run_compiler(["gcc", "-static", str(src), "-o", str(static)])
    nb.run_compiler(["gcc", str(src), "-o", str(dynamic)])
    t4 = profiles.load("t4-class")
    (note,) = cuda.nvml_notes(t4, [str(static)])
    assert "statically linked" in note and "NVML" in note and str(static) in note
    assert cuda.nvml_notes(t4, [str(dynamic)]) == [] and cuda.nvml_notes(None, [str(static)]) == []
    p = run_capshim("run", "--profile", "t4-class", "--", str(static), env={"LD_LIBRARY_PATH": str(cuda.build().standin)})
    assert p.stdout.strip() == "ran"
    assert p.stderr.count("NVML answers stay the device's") == 1
    assert p.stderr.index("NVML answers stay") < p.stderr.index("cuda stayed inert")


def test_a_set_user_id_program_of_another_user_is_named(tmp_path, monkeypatch):
    """Secure execution (ld.so(8)): set-user-ID to another user ignores LD_PRELOAD. The file is
    this user's; the test makes capshim believe it runs as someone else."""
    src = tmp_path / "p.c"
    src.write_text("int main(void) { return 0; }\n")
    prog, script = tmp_path / "suid", tmp_path / "suid.sh"
    nb.run_compiler(["gcc", str(src), "-o", str(prog)])
    script.write_text("#!/bin/sh\n")  # the kernel ignores set-user-ID on a script: nothing to say
    for f in (prog, script):
        f.chmod(0o4755)
    t4 = profiles.load("t4-class")
    assert cuda.nvml_notes(t4, [str(prog)]) == []  # our own uid: no secure execution
    monkeypatch.setattr(cuda.os, "getuid", lambda: prog.stat().st_uid + 1)
    (note,) = cuda.nvml_notes(t4, [str(prog)])
    assert "set-user-ID" in note and "LD_PRELOAD" in note
    assert cuda.nvml_notes(t4, [str(script)]) == []


def test_run_nvidia_smi_says_which_nvml_answers_are_lowered(tmp_path):
    """A program named nvidia-smi (here a script standing in for it): the run names, once, what
    NVML lowers and what stays the device's."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho compute_cap\n")
    fake.chmod(0o755)
    (note,) = cuda.nvml_notes(profiles.load("t4-class"), [str(fake)])
    assert "compute_cap" in note and "memory" in note


def test_probe_reports_nvml_next_to_the_runtime():
    """`capshim probe --api cuda`: NVML's answers beside the runtime's, stock and lowered, and
    --compare shows the NVML rows that changed."""
    env = cuda.standin_env(cuda.build())
    stock = json.loads(run_capshim("probe", "--api", "cuda", "--json", env=env).stdout)
    assert stock["nvml"]["answers"] == {"computeCapability": 90, "deviceName": "NVIDIA H200",
                                        "multiProcessorCount": 132, "memorySizeMB": 143771, "architecture": 9}
    low = json.loads(run_capshim("probe", "--api", "cuda", "--profile", "t4-class", "--json", env=env).stdout)
    assert low["nvml"]["answers"]["computeCapability"] == low["capabilities"]["computeCapability"] == 75
    assert low["nvml"]["answers"]["multiProcessorCount"] == low["capabilities"]["multiProcessorCount"] == 40
    assert low["nvml"]["refused"] == {}
    p = run_capshim("probe", "--api", "cuda", "--compare", "--profile", "t4-class", env=env)
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines() if "NVML computeCapability" in line)
    assert "9.0" in row and "7.5" in row  # the profiles' notation, as the runtime rows


def test_a_second_nvml_library_is_left_stock_and_said(tmp_path):
    """Two different libnvidia-ml files in one process (ctypes, RTLD_LOCAL each): the first one's
    functions are wrapped and lowered, the second's are handed out as they are (stock), and
    nvml_second_library names both; neither crashes nor borrows the other's functions."""
    b = cuda.build()
    second = tmp_path / "other" / "libnvidia-ml.so.1"
    second.parent.mkdir()
    second.write_bytes((b.standin / "libnvidia-ml.so.1").read_bytes())
    code = ("import ctypes, json, sys\n"
            "def cc(path):\n"
            "    lib = ctypes.CDLL(path); lib.nvmlInit_v2(); d = ctypes.c_void_p()\n"
            "    assert lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(d)) == 0\n"
            "    a, b = ctypes.c_int(), ctypes.c_int()\n"
            "    rc = lib.nvmlDeviceGetCudaComputeCapability(d, ctypes.byref(a), ctypes.byref(b))\n"
            "    return [rc, a.value, b.value]\n"
            "print(json.dumps([cc(sys.argv[1]), cc(sys.argv[2])]))\n")
    status, cfg = tmp_path / "s.jsonl", tmp_path / "t4.cfg"
    cfg.write_text(cuda.render_config(profiles.load("t4-class")))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAPSHIM_", "LD_"))}
    env.update({"LD_PRELOAD": str(b.library), cuda.CONFIG_VAR: str(cfg), "CAPSHIM_QUIET": "1",
                "CAPSHIM_STATUS_FILE": str(status)})
    p = subprocess.run([sys.executable, "-c", code, str(b.standin / "libnvidia-ml.so.1"), str(second)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [[0, 7, 5], [0, 9, 0]]
    (event,) = [e for e in map(json.loads, status.read_text().splitlines()) if e["event"] == "nvml_second_library"]
    assert event["library"] == str(second) and event["first"] == str(b.standin / "libnvidia-ml.so.1")


def test_a_refused_attributes_query_passes_through_and_the_probe_says_so(doors):
    """An NVML that answers nvmlDeviceGetAttributes for MIG handles only (NVIDIA's documented
    behaviour; the stand-in with CAPSHIM_STANDIN_NVML_MIG_ONLY=1): the refusal (3,
    NVML_ERROR_NOT_SUPPORTED) reaches the caller untouched, the other queries still lower, and
    the probe lists the refusal."""
    mig = {"CAPSHIM_STANDIN_NVML_MIG_ONLY": "1"}
    line, events, _ = doors.run("dlopen", cuda.render_config(profiles.load("t4-class")), mig)
    assert line["attrs"] == [3, 0, 0, 0] and line["attrs_v2"] == [3, 0, 0, 0]
    assert line["cc"] == [0, 7, 5] and line["arch"] == [0, 6]
    assert not [e for e in events if e["event"] == "changed" and e["query"].startswith("nvmlDeviceGetAttributes")]
    env = {**cuda.standin_env(cuda.build()), **mig}
    low = json.loads(run_capshim("probe", "--api", "cuda", "--profile", "t4-class", "--json", env=env).stdout)
    assert low["nvml"]["refused"] == {"nvmlDeviceGetAttributes_v2": 3}
    assert low["nvml"]["answers"] == {"computeCapability": 75, "deviceName": "NVIDIA H200", "architecture": 6}
