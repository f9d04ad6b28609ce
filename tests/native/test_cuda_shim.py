"""The CUDA shim over the stand-in runtime and driver (no GPU here, none in CI).

Every entry point, through every path an application uses to reach it: the exported names
(LD_PRELOAD), dlopen + dlsym, cuGetProcAddress and _v2, and cudaGetDriverEntryPoint (ByVersion,
_ptsz). Each case is its own process (tests/native/cuda_harness.py); the stand-ins answer like
an H200 (9.0, 132 SMs, 228 KB of shared memory per SM).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from capshim import profiles
from capshim.backends import cuda
from tests.conftest import run_capshim
from capshim.native import build as nb
from tests.native.cuda_harness import HERE, H200, PATHS, T4, Harness, attrs, compile_driver, libasan

T4_CFG = cuda.render_config(profiles.load("t4-class"))


@pytest.fixture(scope="module")
def cuda_build():
    return cuda.build()


@pytest.fixture(scope="module")
def driver(cuda_build, tmp_path_factory):
    return compile_driver(cuda_build, tmp_path_factory.mktemp("cuda-driver"))


@pytest.fixture
def h(cuda_build, driver, tmp_path):
    return Harness(cuda_build, driver, tmp_path)


def _props(line: dict, layout: str) -> dict:
    rc, values = line[layout]
    assert rc == 0
    return values


@pytest.mark.parametrize("path", PATHS)
def test_stock_without_the_shim(h, path):
    r = h.run([path], shim=False)
    assert r.rc == 0 and r.events == []
    line = r.path(path)
    assert attrs(line) == H200
    assert line["name"] == [0, "NVIDIA H200"] and line["cc"] == [0, 9, 0]
    assert line["devprop"] == [0, 1024, 49152, 65536]


@pytest.mark.parametrize("path", PATHS)
def test_every_path_lowers_every_driver_entry_point(h, path):
    """cuDeviceGetAttribute, cuDeviceComputeCapability, cuDeviceGetName and cuDeviceGetProperties,
    whichever way the function pointer was obtained; attribute 200 (no key) passes through."""
    r = h.run([path], T4_CFG + "deviceName=Tesla%20T4\n")
    assert r.rc == 0, r.stderr
    line = r.path(path)
    assert line.get("getter", [0, 4]) == [0, 4]
    assert attrs(line) == T4
    assert line["cc"] == [0, 7, 5]
    assert line["name"] == [0, "Tesla T4"]
    assert line["devprop"] == [0, 1024, 49152, 65536]  # t4-class keeps these three (its own values are equal)
    assert [e["first"] for e in r.of("hooks")] and r.of("hooks")[0]["installed"][0] == "cudaGetDeviceProperties"
    (called,) = r.of("called")
    assert "cuDeviceGetAttribute" in called["entry_points"]
    if path.startswith(("procaddr", "entry", "dlsym")):
        assert "cuDeviceGetAttribute" in called["substituted"]


@pytest.mark.parametrize("path", ["dlsym", "procaddr", "entry"])
def test_substitution_can_be_turned_off_for_a_diagnosis(h, path):
    """CAPSHIM_CUDA_SUBSTITUTE=0: pointers from dlsym and the getters stay the real ones (stock);
    the exported names still lower."""
    r = h.run([path], T4_CFG, env={"CAPSHIM_CUDA_SUBSTITUTE": "0"})
    assert attrs(r.path(path)) == H200
    assert attrs(h.run(["direct"], T4_CFG, env={"CAPSHIM_CUDA_SUBSTITUTE": "0"}).path("direct")) == T4


def test_eight_threads_at_once_see_one_lowered_answer(h):
    """Runtime, driver and properties asked from 8 threads at once (the first calls race the
    shim's first hooks event, its scrub and its change log): every answer is 7.5."""
    r = h.run(["threads"], T4_CFG)
    assert r.rc == 0, r.stderr
    assert r.path("threads") == {"path": "threads", "cc": [75], "answers": 8 * 200 * 3}
    assert len(r.of("hooks")) == 1
    assert len([e for e in r.of("changed") if e["key"] == "computeCapability"]) == 3  # once per query


def test_devprop_members_lower(h):
    r = h.run(["direct"], "direction=lower\nsharedMemPerBlock=16384\nregsPerBlock=32768\nmaxThreadsPerBlock=512\n")
    assert r.path("direct")["devprop"] == [0, 512, 16384, 32768]
    assert {(e["query"], e["key"]) for e in r.of("changed") if e["query"] == "cuDeviceGetProperties"} == {
        ("cuDeviceGetProperties", "sharedMemPerBlock"), ("cuDeviceGetProperties", "regsPerBlock"),
        ("cuDeviceGetProperties", "maxThreadsPerBlock")}


@pytest.mark.parametrize("path", ["direct", "dlsym"])
def test_runtime_entry_points_lower(h, path):
    """cudaDeviceGetAttribute and cudaGetDeviceProperties (CUDA 13 layout, every key, the name)."""
    r = h.run([path], T4_CFG + "deviceName=Tesla%20T4\n")
    assert attrs(r.path(f"{path}-runtime")) == T4
    p = _props(r.path(path), "props")
    assert p == {"computeCapability": 7, "computeCapability.minor": 5, "multiProcessorCount": 40,
                 "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 65536,
                 "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "maxThreadsPerBlock": 1024,
                 "maxThreadsPerMultiProcessor": 1024, "l2CacheSize": 4194304, "totalGlobalMem": 17179869184,
                 "name": "Tesla T4"}
    changed = {(e["key"], e["stock"], e["reported"]) for e in r.of("changed") if e["query"] == "cudaGetDeviceProperties"}
    assert ("computeCapability", 90, 75) in changed and ("totalGlobalMem", 150108651520, 17179869184) in changed
    assert ("deviceName", "NVIDIA H200", "Tesla T4") in changed


def test_v2_on_a_13_runtime_is_checked_and_left_alone(h):
    """libcudart.so.13 has no _v2 (the stand-in's fills the 12 layout): the self-check sees
    multiProcessorCount where the 13 layout has deviceOverlap, writes nothing, says so."""
    stock = h.run(["direct"], shim=False).path("direct")["props_v2"]
    r = h.run(["direct"], T4_CFG)
    assert r.path("direct")["props_v2"] == stock
    (bad,) = [e for e in r.of("layout_mismatch") if e["query"] == "cudaGetDeviceProperties_v2"]
    assert bad["layout"] == 13 and "attribute 16 is 132" in bad["reason"]


def test_a_cuda12_runtime_lowers_v2_and_the_plain_pre12_layout(h):
    """libcudart.so.12: _v2 fills CUDA 12's layout, the plain name the pre-12 one (CUDA 11.8's,
    728 bytes): both lowered, each at its own offsets."""
    env = {"CAPSHIM_STANDIN_RUNTIME_VERSION": "12080"}
    r = h.run(["direct"], T4_CFG, env=env)
    line = r.path("direct")
    for layout in ("props", "props_v2"):
        assert _props(line, layout)["computeCapability"] == 7 and _props(line, layout)["multiProcessorCount"] == 40
        assert _props(line, layout)["sharedMemPerBlockOptin"] == 65536
    # (libcudart.so.13 has no _v2: the stand-in's _v2 fills the 12 layout a 13 runtime never would)
    assert [e for e in r.of("layout_mismatch") if e["query"] == "cudaGetDeviceProperties"] == []


def test_a_runtime_before_11_is_left_untouched_and_reported(h):
    env = {"CAPSHIM_STANDIN_RUNTIME_VERSION": "10020"}
    stock = h.run(["direct"], env=env, shim=False).path("direct")
    r = h.run(["direct"], T4_CFG, env=env)
    assert r.path("direct")["props"] == stock["props"]
    (bad,) = [e for e in r.of("layout_mismatch") if e["query"] == "cudaGetDeviceProperties"]
    assert bad["runtime_version"] == 10020 and bad["layout"] == 0 and "before CUDA 11.0" in bad["reason"]


def test_a_skewed_layout_is_left_untouched_and_reported(h):
    env = {"CAPSHIM_STANDIN_SKEW": "1"}
    stock = h.run(["direct"], env=env, shim=False).path("direct")
    r = h.run(["direct"], T4_CFG, env=env)
    assert r.path("direct")["props"] == stock["props"]
    assert any(e["query"] == "cudaGetDeviceProperties" and e["layout"] == 13 for e in r.of("layout_mismatch"))
    assert not [e for e in r.of("changed") if e["query"] == "cudaGetDeviceProperties"]


@pytest.mark.parametrize("path", PATHS)
def test_a_failing_real_call_is_not_touched(h, path):
    env = {"CAPSHIM_STANDIN_FAIL": "1"}
    stock = h.run([path], env=env, shim=False)
    shimmed = h.run([path], T4_CFG, env=env)
    assert shimmed.lines == stock.lines
    assert shimmed.path(path)["attr75"] == [999, -7]
    assert shimmed.of("changed") == []


@pytest.mark.parametrize("path, args", [("procaddr", ["1000"]), ("procaddr_v2", ["1000"]),
                                        ("procaddr", ["12000", "8"]), ("procaddr_v2", ["12000", "8"]),
                                        ("entry_version", ["1000"]), ("entry_version_ptsz", ["12000", "8"]),
                                        ("entry", ["12000", "8"]), ("procaddr_self", ["1000"])])
def test_getters_pass_version_and_flags_and_substitute_only_on_success(h, path, args):
    """An old version or an unknown flag bit fails in the real getter: the shim returns that
    failure as it is and hands out nothing."""
    stock = h.run([path, *args], shim=False)
    shimmed = h.run([path, *args], T4_CFG)
    assert shimmed.lines == stock.lines
    assert shimmed.lines[0]["getter"] == [500, 0]


def test_procaddr_legacy_version_hands_out_the_legacy_abi(h):
    """cuGetProcAddress("cuGetProcAddress") below 12000 is the 4-argument one; the driver line
    still lowers through it (the shim picked the matching wrapper)."""
    r = h.run(["procaddr", "11030"], T4_CFG)
    assert attrs(r.path("procaddr")) == T4


@pytest.mark.parametrize("cfg, expect", [
    ("direction=lower\ncomputeCapability=95\nmultiProcessorCount=200\n", {}),  # above the device: no change
    ("direction=lower\ncomputeCapability=85\n", {75: 8, 76: 5}),
    ("direction=lower\ncomputeCapability=100\n", {}),  # 10.0 is above 9.0
    ("direction=lower\ncomputeCapability=89\n", {75: 8, 76: 9}),
])
def test_lower_only_and_the_pair(h, cfg, expect):
    r = h.run(["direct"], cfg)
    assert attrs(r.path("direct")) == {**H200, **expect}


@pytest.mark.parametrize("cfg, words", [
    ("direction=raise\ncomputeCapability=95\n", "lower-only"),
    ("direction=lower\nextension.VK_KHR_x=0\n", "CUDA has no extensions"),
    ("direction=lower\ncomputeCapability=9\n", "10..999"),
    ("direction=lower\nshaderFloat16=0\n", "unknown key 'shaderFloat16'"),
    ("direction=lower\ncomputeCapability=75x\n", "not a whole number"),
    ("computeCapability=75\n", "key 'direction' is missing"),
    ("direction=lower\nregsPerBlock=4294967296\n", "does not fit in 32 bits"),
    ("direction=lower\nmultiProcessorCount=0\n", "key 'multiProcessorCount': 0: no CUDA device answers 0"),
    ("direction=lower\ncomputeCapability=75\nsharedMemPerBlock=0\n", "key 'sharedMemPerBlock': 0"),
])
def test_a_bad_configuration_leaves_everything_stock(h, cfg, words):
    r = h.run(["direct"], cfg)
    assert attrs(r.path("direct")) == H200 and r.path("direct")["cc"] == [0, 9, 0]
    (c,) = r.of("config")
    assert c["accepted"] is False and words in c["reason"]
    assert r.of("hooks") == [] and r.of("changed") == []


def test_a_u64_size_above_32_bits_is_taken(h):
    r = h.run(["direct"], "direction=lower\ntotalGlobalMem=68719476736\n")
    assert _props(r.path("direct"), "props")["totalGlobalMem"] == 68719476736


def test_a_fifo_or_missing_configuration_is_refused_without_blocking(h, tmp_path):
    fifo = tmp_path / "cfg.fifo"
    os.mkfifo(fifo)
    for path, words in ((fifo, "not a regular file"), (tmp_path / "none.cfg", "cannot open")):
        r = h.run(["direct"], path)
        assert attrs(r.path("direct")) == H200
        assert words in r.of("config")[0]["reason"]


def test_a_users_rtld_next_interposer_after_the_shim_gets_the_next_definition(h, tmp_path):
    """A user's own interposer after the shim in LD_PRELOAD (capshim run's order) that finds the
    next definition with dlsym(RTLD_NEXT): it reached the shim's dlsym, which asked glibc from the
    shim's place, so the interposer got its own definition back and called itself until the
    stack ran out (SIGSEGV). Now it gets the next one: libc's sysconf, the runtime's
    cudaDeviceGetAttribute (lowered by the shim in front of it)."""
    tracer = tmp_path / "libtracer.so"
    nb.run_compiler(["gcc", "-std=gnu11", "-O1", "-g", *nb.WARNINGS, "-shared", "-fPIC",
                     str(HERE / "rtld_next_tracer.c"), "-o", str(tracer), "-ldl"])
    r = h.run(["direct"], T4_CFG, env={"LD_PRELOAD": f"{h.build.library}:{tracer}"})
    assert r.rc == 0, r.stderr
    assert attrs(r.path("direct-runtime")) == T4
    m = re.search(r"tracer: (\d+) calls, sysconf (-?\d+)", r.stderr)
    assert m and int(m[1]) >= 12 and int(m[2]) == os.sysconf("SC_PAGESIZE"), r.stderr


def test_a_name_asked_into_a_short_buffer_does_not_record_a_truncated_stock_name(h):
    """cuDeviceGetName into 1 and 4 bytes first: the device's name did not fit, yet the one changed
    event per query recorded it as the stock name ("" and "NVI"), and the full name never showed."""
    r = h.run(["shortname"], T4_CFG + "deviceName=Tesla%20T4\n")
    assert r.path("shortname")["names"] == [[0, ""], [0, "Tes"], [0, "Tesla T4"]]
    assert [(e["stock"], e["reported"]) for e in r.of("changed") if e["key"] == "deviceName"] == [
        ("NVIDIA H200", "Tesla T4")]


def test_null_pointers_bad_devices_and_unknown_names_pass_through(h):
    """Every entry point with NULL outputs, devices -1, 5 and 99, attribute -1, lengths 0 and -5,
    getters asked NULL, an unknown name, "dlsym", version -1 and 0xffffffff, every flag bit: the
    real function's error comes back unchanged, nothing is written, the host does not crash."""
    stock = h.run(["nulls"], shim=False)
    shimmed = h.run(["nulls"], T4_CFG)
    assert stock.rc == shimmed.rc == 0, shimmed.stderr
    assert shimmed.lines == stock.lines and all(rc != 0 for rc in stock.path("nulls")["rc"])
    assert shimmed.of("changed") == []


@pytest.mark.parametrize("name, make, words", [
    ("dup.cfg", lambda p: p.write_text(T4_CFG + "computeCapability=80\n"), "given twice"),
    ("crlf.cfg", lambda p: p.write_bytes(T4_CFG.replace("\n", "\r\n").encode()), "byte 0x0d"),
    ("nul.cfg", lambda p: p.write_bytes(b"direction=lower\ncomputeCapability=75\0\n"), "byte 0x00"),
    ("big.cfg", lambda p: p.write_text(T4_CFG + ("#" * 799 + "\n") * 82), "larger than 65536 bytes"),
    ("ext.cfg", lambda p: p.write_text("direction=lower\nextension.VK_KHR_x=0\n"), "no extensions"),
    ("dir", lambda p: p.mkdir(), "not a regular file (a directory)"),
    ("name.cfg", lambda p: p.write_text("direction=lower\ndeviceName=" + "a" * 300 + "\n"), "longer than 255"),
    ("pct.cfg", lambda p: p.write_text("direction=lower\ndeviceName=100%\n"), "not followed by two hex digits"),
    ("ctl.cfg", lambda p: p.write_text("direction=lower\ndeviceName=a%01b\n"), "control characters"),
])
def test_hand_written_configurations_are_refused_by_name(h, tmp_path, name, make, words):
    path = tmp_path / name
    make(path)
    r = h.run(["direct"], path)
    assert r.rc == 0 and attrs(r.path("direct")) == H200
    (c,) = r.of("config")
    assert c["accepted"] is False and words in c["reason"], c


def test_percent_signs_in_a_device_name_are_text(h):
    r = h.run(["direct"], "direction=lower\ndeviceName=100%25%20%25s%25n\n")
    assert r.path("direct")["name"] == [0, "100% %s%n"]


@pytest.mark.parametrize("kind", ["fifo", "dir"])
def test_a_status_file_that_is_a_fifo_or_a_folder_does_not_block(h, tmp_path, kind):
    status = tmp_path / "status"
    os.mkfifo(status) if kind == "fifo" else status.mkdir()
    r = h.run(["direct"], T4_CFG, env={"CAPSHIM_STATUS_FILE": str(status)})
    assert r.rc == 0 and attrs(r.path("direct")) == T4


def test_the_shim_twice_in_ld_preload_lowers_once(h, tmp_path):
    """The same shim twice, and a second copy of it under another path: answers lowered, no crash."""
    copy = tmp_path / "libcapshim_cuda_copy.so"
    copy.write_bytes(h.build.library.read_bytes())
    for preload in (f"{h.build.library}:{h.build.library}", f"{h.build.library}:{copy}"):
        r = h.run(["dlsym"], T4_CFG, env={"LD_PRELOAD": preload})
        assert r.rc == 0, r.stderr
        assert attrs(r.path("dlsym")) == T4 and attrs(r.path("dlsym-runtime")) == T4


def test_a_child_of_the_target_is_skipped(h):
    r = h.run(["direct"], T4_CFG, env={"CAPSHIM_TARGET_PID": "1"})
    assert attrs(r.path("direct")) == H200
    (s,) = r.of("skipped")
    assert "--inherit" in s["reason"]


def _run_spawn(driver, tmp_path, *extra, argv=("spawn",)):
    status = tmp_path / f"run{len(list(tmp_path.glob('run*.jsonl')))}.jsonl"
    p = run_capshim("run", *extra, "--profile", "t4-class", "--status-file", str(status), "--",
                    *(argv if argv[0] == "sh" else (str(driver), *argv)),
                    env={"LD_LIBRARY_PATH": str(cuda.build().standin)})
    events = [json.loads(line) for line in status.read_text().splitlines()]
    return p, [json.loads(line) for line in p.stdout.splitlines()], events


def test_children_stay_stock_without_inherit(driver, tmp_path):
    """capshim run: the target lowers, scrubs LD_PRELOAD at its first CUDA call, its child is stock."""
    p, lines, events = _run_spawn(driver, tmp_path)
    assert p.returncode == 0, p.stderr
    target, _rt, child, _crt = lines
    assert attrs(target)[75] == 7 and attrs(child)[75] == 9
    scrubbed = [e for e in events if e["event"] == "env_scrubbed"]
    assert scrubbed and scrubbed[0]["variables"] == ["LD_PRELOAD", "CAPSHIM_CUDA_CONFIG"]


def test_children_keep_the_shim_with_inherit(driver, tmp_path):
    p, lines, events = _run_spawn(driver, tmp_path, "--inherit")
    assert p.returncode == 0, p.stderr
    target, _rt, child, _crt = lines
    assert attrs(target)[75] == 7 and attrs(child)[75] == 7
    assert [e for e in events if e["event"] == "env_inherited"]


def test_a_forked_child_of_the_target_stays_stock(driver, tmp_path):
    p, lines, _events = _run_spawn(driver, tmp_path, argv=("fork",))
    assert p.returncode == 0, p.stderr
    assert attrs(next(x for x in lines if x["path"] == "fork"))[75] == 7
    assert attrs(next(x for x in lines if x["path"] == "fork-child"))[75] == 9
    p, lines, _events = _run_spawn(driver, tmp_path, "--inherit", argv=("fork",))
    assert attrs(next(x for x in lines if x["path"] == "fork-child"))[75] == 7


def test_a_wrapper_that_execs_in_the_same_pid_hands_the_shim_on(driver, tmp_path):
    """sh (the target: it got the pid) reaches no CUDA entry point and keeps LD_PRELOAD; the program
    it execs in the same pid lowers and scrubs."""
    p, lines, events = _run_spawn(driver, tmp_path, argv=("sh", "-c", f"exec '{driver}' direct"))
    assert p.returncode == 0, p.stderr
    assert attrs(lines[0])[75] == 7
    scrubbed = [e for e in events if e["event"] == "env_scrubbed"]
    assert len(scrubbed) == 1 and [e for e in events if e["event"] == "hooks"][0]["pid"] == scrubbed[0]["pid"]


@pytest.mark.parametrize("inherit, expect", [(True, [7, 7]), (False, [9, 9])])
def test_a_grandchild_follows_inherit(driver, tmp_path, inherit, expect):
    """sh (the target) runs a child that runs a grandchild: with --inherit both lower; without it
    both are stock (the child is not the target; it scrubs the shim for the grandchild too)."""
    extra = ("--inherit",) if inherit else ()
    p, lines, events = _run_spawn(driver, tmp_path, *extra, argv=("sh", "-c", f"'{driver}' spawn"))
    assert p.returncode == 0, p.stderr
    child, _crt, grandchild, _gcrt = lines
    assert [attrs(child)[75], attrs(grandchild)[75]] == expect


def test_run_with_no_cuda_call_is_inert_and_strict_says_so(tmp_path):
    env = {"LD_LIBRARY_PATH": str(cuda.build().standin)}
    p = run_capshim("run", "--profile", "t4-class", "--", "true", env=env)
    assert p.returncode == 0 and "cuda stayed inert: loaded, but no CUDA entry point was reached" in p.stderr
    assert run_capshim("run", "--strict", "--profile", "t4-class", "--", "true", env=env).returncode == 3


@pytest.mark.parametrize("static", [True, False])
def test_a_program_that_defines_the_runtime_itself_is_inert_never_a_result(tmp_path, static):
    """A statically linked program (LD_PRELOAD never loads into it) and a dynamic one that defines
    cudaGetDeviceProperties and cudaDeviceGetAttribute itself (as a static cudart does): they answer
    9.0, and the run says inert (--strict: exit 3), never a lowered result."""
    src = tmp_path / "selfdef.c"
    src.write_text("#include <stdio.h>\n#include <string.h>\n"
                   "int cudaGetDeviceProperties(void *p, int d) { (void)d; memset(p, 0, 1008); ((int *)p)[90] = 9; return 0; }\n"
                   "int cudaDeviceGetAttribute(int *v, int a, int d) { (void)d; *v = a == 75 ? 9 : 0; return 0; }\n"
                   "int main(void) { static unsigned char b[1008]; int v; cudaGetDeviceProperties(b, 0);\n"
                   "  cudaDeviceGetAttribute(&v, 75, 0); printf(\"%d %d\\n\", ((int *)b)[90], v); return 0; }\n")
    prog = tmp_path / "selfdef"
    nb.run_compiler(["gcc", "-O1", *(["-static"] if static else ["-rdynamic"]), str(src), "-o", str(prog)])
    env = {"LD_LIBRARY_PATH": str(cuda.build().standin)}
    p = run_capshim("run", "--profile", "t4-class", "--", str(prog), env=env)
    assert p.returncode == 0 and p.stdout.strip() == "9 9"
    assert "cuda stayed inert" in p.stderr and "statically linked" in p.stderr
    assert run_capshim("run", "--strict", "--profile", "t4-class", "--", str(prog), env=env).returncode == 3


def test_run_python_ctypes_sees_7_5(tmp_path):
    """The vertical slice: `capshim run --profile t4-class -- python3 -c ...` (ctypes: dlopen + dlsym)."""
    code = ("import ctypes; rt = ctypes.CDLL('libcudart.so.13'); a, b = ctypes.c_int(), ctypes.c_int(); "
            "rt.cudaDeviceGetAttribute(ctypes.byref(a), 75, 0); rt.cudaDeviceGetAttribute(ctypes.byref(b), 76, 0); "
            "print((a.value, b.value))")
    p = run_capshim("run", "--profile", "t4-class", "--", "python3", "-c", code,
                    env={"LD_LIBRARY_PATH": str(cuda.build().standin)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "(7, 5)"
    assert "stayed" not in p.stderr


def test_probe_compare_prints_the_lowered_table():
    env = cuda.standin_env(cuda.build())
    p = run_capshim("probe", "--api", "cuda", "--compare", "--profile", "t4-class", env=env)
    assert p.returncode == 0, p.stderr
    assert "NVIDIA H200 (capshim stand-in) (CUDA driver 13.0)" in p.stdout
    row = next(line for line in p.stdout.splitlines() if "computeCapability" in line)
    assert "9.0" in row and "7.5" in row  # the profiles' notation (issue 28), not 90 and 75
    j = json.loads(run_capshim("probe", "--api", "cuda", "--profile", "t4-class", "--json", env=env).stdout)
    assert j["capabilities"]["computeCapability"] == 75 and j["shim"]["cuda"]["state"] == "active"
    assert j["driver"]["cuDeviceComputeCapability"] == 75 and j["attributes"]["multiProcessorCount"] == 40


@pytest.mark.slow
def test_asan_build_through_every_path(tmp_path):
    """An AddressSanitizer + UBSan build of the shim, the stand-ins and the driver, through the same paths."""
    b = cuda.build(sanitize=True)
    asan = Harness(b, compile_driver(b, tmp_path, sanitize=True), tmp_path, preload_first=[libasan()])
    for path in PATHS:
        r = asan.run([path], T4_CFG + "deviceName=Tesla%20T4\n", env={"ASAN_OPTIONS": "detect_leaks=1"})
        assert r.rc == 0, r.stderr
        assert attrs(r.path(path)) == T4
    for env in ({"CAPSHIM_STANDIN_SKEW": "1"}, {"CAPSHIM_STANDIN_FAIL": "1"},
                {"CAPSHIM_STANDIN_RUNTIME_VERSION": "12080"}):
        assert asan.run(["direct"], T4_CFG, env=env).rc == 0
    assert asan.run(["threads"], T4_CFG).path("threads")["cc"] == [75]


def test_a_struct_the_runtime_filled_already_lowered_is_not_a_layout_mismatch(h):
    """The real libcudart.so.13 (H200, CUDA 13.0) fills cudaDeviceProp from attributes it read through the
    driver entry point the shim handed out, so the struct arrives lowered: the layout check must take it
    (it reported layout_mismatch on the H200 before), and the answers stay lowered."""
    r = h.run(["direct"], T4_CFG, env={"CAPSHIM_STANDIN_CACHE": "1"})
    p = _props(r.path("direct"), "props")
    assert (p["computeCapability"], p["computeCapability.minor"], p["multiProcessorCount"]) == (7, 5, 40)
    # (libcudart.so.13 has no _v2: the stand-in's _v2 fills the 12 layout a 13 runtime never would)
    assert [e for e in r.of("layout_mismatch") if e["query"] == "cudaGetDeviceProperties"] == []



def test_a_stray_template_variable_does_not_disable_run_or_probe(driver, tmp_path):
    """CAPSHIM_TEMPLATE_FD in the user's environment (the bench's, for its process templates):
    `capshim run` and `capshim probe` drop it, so the shim lowers as asked (review finding 3)."""
    status = tmp_path / "s.jsonl"
    p = run_capshim("run", "--profile", "t4-class", "--status-file", str(status), "--", str(driver), "direct",
                    env={"LD_LIBRARY_PATH": str(cuda.build().standin), "CAPSHIM_TEMPLATE_FD": "7"})
    assert p.returncode == 0, p.stderr
    assert attrs([json.loads(x) for x in p.stdout.splitlines()][0])[75] == 7
    assert "never loaded" not in p.stderr and "stayed" not in p.stderr
    env = {**cuda.standin_env(cuda.build()), "CAPSHIM_TEMPLATE_FD": "7"}
    p = run_capshim("probe", "--api", "cuda", "--profile", "t4-class", "--json", env=env)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["capabilities"]["computeCapability"] == 75 and data["shim"]["cuda"]["state"] == "active"


def test_a_shim_loaded_in_template_mode_says_it_loaded(h):
    """A process loaded with CAPSHIM_TEMPLATE_FD stays stock (it is a template: its forked children
    decide), yet writes its `loaded` event; the report says why, never "never loaded"."""
    from capshim import status as st

    r = h.run(["direct"], T4_CFG, env={"CAPSHIM_TEMPLATE_FD": "7"})
    assert r.rc == 0 and attrs(r.path("direct"))[75] == 9
    (loaded,) = r.of("loaded")
    assert loaded["template"] is True
    state = st.classify_events(r.events)
    assert state.state == "inert" and "process template" in state.reason and "never loaded" not in state.reason
