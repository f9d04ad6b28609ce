"""The CUDA shim never breaks a call (issue 27): whatever scope the runtime sits in.

Real processes over the stand-ins (no GPU): a plugin dlopen'ed RTLD_LOCAL with its own
libcudart (how Python imports an extension module), two runtimes in one process (CUDA 11.8's
728-byte cudaDeviceProp beside CUDA 13's 1008 bytes), dlsym on a second runtime's handle (what
ctypes does) and ctypes itself, dlmopen, a runtime loaded after the shim, fork after the first
call, and a wrapper reached with no runtime at all. Each case runs twice: the plain build, and
an AddressSanitizer + UBSan build of the shim, the stand-ins and the test programs, where every
struct is a heap buffer of exactly the size its runtime fills (a byte written past it is a
report, and the harness fails on any report).
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from capshim import profiles
from capshim import status as st
from capshim.backends import cuda
from capshim.native import build as nb
from tests.conftest import REPO, run_capshim
from tests.native.cuda_harness import HERE, Harness, libasan

T4_CFG = cuda.render_config(profiles.load("t4-class"))
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
LOWERED = {"rc": [0, 0, 0, 0], "attr": [7, 5], "props": [7, 5, 40]}
STOCK = {"rc": [0, 0, 0, 0], "attr": [9, 0], "props": [9, 0, 132]}


def _programs(b: cuda.CudaBuild, dest, sanitize: bool) -> dict:
    """scope_host, scope_host11 (linked to libcudart.so.11.0) and the 13 plugin, against b's stand-ins."""
    dest.mkdir(parents=True, exist_ok=True)
    cc = ["gcc", "-std=gnu11", "-O1", "-g", *nb.WARNINGS, *(SAN if sanitize else []), "-I", str(nb.source_dir("cuda")),
          "-I", str(HERE)]
    rpath = [f"-L{b.standin}", f"-Wl,-rpath,{b.standin}"]
    out = {"host": dest / "scope_host", "host11": dest / "scope_host11", "plugin13": dest / "libscope_plugin13.so"}
    nb.run_compiler([*cc, str(HERE / "scope_host.c"), "-o", str(out["host"]), "-ldl", "-lpthread"])
    nb.run_compiler([*cc, "-DRT_MAJOR=11", "-DLINKED", str(HERE / "scope_host.c"), "-o", str(out["host11"]), *rpath,
                     f"-l:{cuda.STANDIN_RUNTIME_11}", "-ldl", "-lpthread"])
    nb.run_compiler([*cc, "-shared", "-fPIC", "-DRT_MAJOR=13", str(HERE / "scope_plugin.c"), "-o",
                     str(out["plugin13"]), *rpath, f"-l:{cuda.STANDIN_RUNTIME}"])
    out.update({"tail13": dest / "tail_host13", "tail0": dest / "tail_host0", "tail11": dest / "libtail_plugin11.so"})
    nb.run_compiler([*cc, "-DLINKED13", str(HERE / "tail_host.c"), "-o", str(out["tail13"]), *rpath,
                     f"-l:{cuda.STANDIN_RUNTIME}", "-ldl"])
    nb.run_compiler([*cc, str(HERE / "tail_host.c"), "-o", str(out["tail0"]), "-ldl"])
    nb.run_compiler([*cc, "-shared", "-fPIC", str(HERE / "tail_plugin.c"), "-o", str(out["tail11"]), *rpath,
                     f"-l:{cuda.STANDIN_RUNTIME_11}"])
    nx = {"nx13": dest / "nx_host13", "nx0": dest / "nx_host0", "nxdep": dest / "libnx_dep.so",
          "nxplugin": dest / "libnx_plugin.so"}
    src = str(HERE / "rtld_next_local.c")
    nb.run_compiler([*cc, "-shared", "-fPIC", "-DNX_DEP", src, "-o", str(nx["nxdep"])])
    nb.run_compiler([*cc, "-shared", "-fPIC", "-DNX_PLUGIN", src, "-o", str(nx["nxplugin"]), *rpath,
                     f"-Wl,-rpath,{dest}", f"-L{dest}", "-l:libnx_dep.so", f"-l:{cuda.STANDIN_RUNTIME_11}", "-ldl"])
    nb.run_compiler([*cc, "-DLINKED13", src, "-o", str(nx["nx13"]), *rpath, f"-l:{cuda.STANDIN_RUNTIME}", "-ldl"])
    nb.run_compiler([*cc, src, "-o", str(nx["nx0"]), "-ldl"])
    out.update(nx)
    return {**out, "rt13": b.standin / cuda.STANDIN_RUNTIME, "rt11": b.standin / cuda.STANDIN_RUNTIME_11}


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    b = cuda.build()
    return b, _programs(b, tmp_path_factory.mktemp("scopes-plain"), sanitize=False)


@pytest.fixture(scope="module", params=["plain", "asan"])
def flavour(request, plain, tmp_path_factory):
    """(build, programs, preload_first, extra env) of one flavour; the asan one builds its own shim."""
    if request.param == "plain":
        return (*plain, [], {}, plain[1])
    b = cuda.build(sanitize=True)
    return (b, _programs(b, tmp_path_factory.mktemp("scopes-asan"), sanitize=True), [libasan()],
            {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}, plain[1])


class Case:
    """Runs one scope program with the shim (t4-class) and stock; answers by "who"."""

    def __init__(self, flavour, tmp_path, program="host"):
        self.build, self.progs, first, self.env, self.plain = flavour
        self.h = Harness(self.build, self.progs[program], tmp_path, preload_first=first)

    def run(self, args, shim=True, env=None):
        full = {"LD_LIBRARY_PATH": str(self.build.standin), **self.env, **(env or {})}
        if not shim and self.h.preload_first:  # python3 is not linked with the sanitizer runtime
            full["LD_PRELOAD"] = ":".join(self.h.preload_first)
        r = self.h.run([str(a) for a in args], T4_CFG if shim else None, env=full, shim=shim)
        assert r.rc == 0, (r.rc, r.lines, r.stderr[-3000:])
        return r


def who(r, name: str) -> dict:
    (hit,) = [line["answer"] for line in r.lines if line["who"] == name]
    return hit


def answers(r, name: str) -> dict:
    a = who(r, name)
    return {k: a[k] for k in ("rc", "attr", "props")}


def test_an_rtld_local_plugin_linked_to_the_runtime_is_answered_and_lowered(flavour, tmp_path):
    c = Case(flavour, tmp_path)
    stock = c.run(["local", c.progs["plugin13"]], shim=False)
    assert answers(stock, "plugin") == STOCK
    r = c.run(["local", c.progs["plugin13"]])
    for name in ("plugin", "plugin-again", "plugin-reloaded"):
        assert answers(r, name) == LOWERED and who(r, name)["rt"] == 13000
    assert r.of("unresolved") == []
    assert cuda.classify(st.StatusReport(r.events)).state == st.ACTIVE


def test_two_runtimes_in_one_process_each_fill_their_own_struct(flavour, tmp_path):
    """The program's CUDA 11.8 runtime (728 bytes, multiProcessorCount at byte 388) and a plugin's
    CUDA 13 runtime (1008 bytes, byte 384): each call reaches its caller's runtime, before and
    after the other was asked, and each is lowered in its own layout."""
    c = Case(flavour, tmp_path, program="host11")
    stock = c.run(["two", c.progs["plugin13"]], shim=False)
    assert [who(stock, n)["rt"] for n in ("main", "plugin", "main-again")] == [11080, 13000, 11080]
    assert all(answers(stock, n) == STOCK for n in ("main", "plugin", "main-again"))
    r = c.run(["two", c.progs["plugin13"]])
    assert [who(r, n)["rt"] for n in ("main", "plugin", "main-again")] == [11080, 13000, 11080]
    assert all(answers(r, n) == LOWERED for n in ("main", "plugin", "main-again")), r.lines
    assert r.of("layout_mismatch") == [] and r.of("unresolved") == []


def test_dlsym_on_each_of_two_runtime_handles_stays_with_that_runtime(flavour, tmp_path):
    c = Case(flavour, tmp_path)
    args = ["handles", c.progs["rt11"], c.progs["rt13"]]
    stock = c.run(args, shim=False)
    r = c.run(args)
    for name, rt in (("rt11", 11080), ("rt13", 13000), ("rt11-again", 11080)):
        assert who(stock, name)["rt"] == who(r, name)["rt"] == rt
        assert answers(stock, name) == STOCK and answers(r, name) == LOWERED, r.lines
    (called,) = r.of("called")
    assert {"cudaGetDeviceProperties", "cudaDeviceGetAttribute"} <= set(called["substituted"])


def test_ctypes_on_a_second_runtime(flavour, tmp_path):
    """python3 with ctypes.CDLL on both runtimes (RTLD_LOCAL), the 11.8 one's functions looked up
    first, then asked 11, 13, 11, each into a buffer of its own size."""
    c = Case(flavour, tmp_path)
    code = ("import ctypes, json, sys\n"
            "names = ('cudaDeviceGetAttribute', 'cudaRuntimeGetVersion', 'cudaGetDeviceProperties')\n"
            "rt11 = [getattr(ctypes.CDLL(sys.argv[2]), n) for n in names]\n"
            "rt13 = [getattr(ctypes.CDLL(sys.argv[1]), n) for n in names]\n"
            "for (attr, ver, props), size, sm in ((rt11, 728, 388), (rt13, 1008, 384), (rt11, 728, 388)):\n"
            "    a, b, v = ctypes.c_int(-7), ctypes.c_int(-7), ctypes.c_int(-7)\n"
            "    rc = [attr(ctypes.byref(a), 75, 0), attr(ctypes.byref(b), 76, 0), ver(ctypes.byref(v))]\n"
            "    buf = ctypes.create_string_buffer(size)\n"
            "    rc.append(props(buf, 0))\n"
            "    m = [int.from_bytes(buf.raw[o:o + 4], 'little', signed=True) for o in (360, 364, sm)]\n"
            "    print(json.dumps({'who': str(v.value), 'answer': {'rt': v.value, 'rc': rc, 'attr': [a.value, b.value],"
            " 'props': m}}))\n")
    c.h.driver = sys.executable
    args = ["-c", code, c.progs["rt13"], c.progs["rt11"]]
    env = {"PYTHONMALLOC": "malloc"}  # each buffer its own malloc block: AddressSanitizer sees its end
    stock = c.run(args, shim=False, env=env)
    r = c.run(args, env=env)
    assert [line["answer"]["rt"] for line in r.lines] == [11080, 13000, 11080]
    assert all({k: line["answer"][k] for k in LOWERED} == LOWERED for line in r.lines), r.lines
    assert all({k: line["answer"][k] for k in STOCK} == STOCK for line in stock.lines), stock.lines


def test_dlmopen(flavour, tmp_path):
    """A runtime in a new namespace, reached through dlsym on its handle, is lowered (the bound
    wrapper calls it, and finds its version and attributes in that namespace). A plugin in a
    namespace of its own calls its runtime there, where the shim is not: stock, and working.
    The namespaces get the plain stand-ins: instrumented code cannot load without the
    sanitizer runtime, which exists once, in the main namespace."""
    c = Case(flavour, tmp_path)
    rt13, plugin = c.plain["rt13"], c.plain["plugin13"]
    env = {"LD_LIBRARY_PATH": str(rt13.parent)}
    stock = c.run(["dlmopen", rt13, plugin], shim=False, env=env)
    r = c.run(["dlmopen", rt13, plugin], env=env)
    for name in ("namespace-runtime", "namespace-runtime-again"):
        assert answers(stock, name) == STOCK and answers(r, name) == LOWERED, r.lines
    assert answers(stock, "namespace-plugin") == answers(r, "namespace-plugin") == STOCK
    assert r.of("layout_mismatch") == [] and r.of("unresolved") == []


def test_a_runtime_loaded_after_the_shim(flavour, tmp_path):
    """Before any runtime is loaded, dlsym(RTLD_DEFAULT) finds nothing, as without the shim (the
    shim's own export is not handed out then, nor is the miss remembered); after dlopen
    RTLD_GLOBAL the same lookup works and lowers, and so does a plugin loaded after that."""
    c = Case(flavour, tmp_path)
    args = ["late", c.progs["rt13"], c.progs["plugin13"]]
    stock = c.run(args, shim=False)
    r = c.run(args)
    assert who(stock, "before") == who(r, "before") == {"found": 0}
    assert who(stock, "after") == {"rc": [0, 0], "attr": [9, 0]} and who(r, "after") == {"rc": [0, 0], "attr": [7, 5]}
    assert answers(r, "plugin") == LOWERED
    assert r.of("unresolved") == []


@pytest.mark.parametrize("host", ["tail13", "tail0"])
def test_a_plugin_tail_call_reaches_the_runtime_it_was_linked_against(flavour, tmp_path, host):
    """A plugin linked against the 11.8 runtime jumps to cudaGetDeviceProperties (a tail call), so
    the return address is its caller's: a program linked against the 13 runtime (whose 1008-byte
    struct would overrun the plugin's 728), or one with no runtime while the 13 plugin's runtime
    is loaded too (two candidates, none the caller's). The plugin's reference carries the version
    libcudart.so.11.0; glibc binds it to the shim's alias of that version, which calls the 11.8
    runtime: its 728 bytes, lowered."""
    c = Case(flavour, tmp_path, program=host)
    args = [c.progs["tail11"], c.progs["plugin13"]]
    stock = c.run(args, shim=False)
    assert who(stock, "tail") == {"rc": 0, "past": 0, "props": [9, 0, 132]}
    r = c.run(args)
    assert who(r, "tail") == {"rc": 0, "past": 0, "props": [7, 5, 40]}, r.lines
    assert r.of("unresolved") == [] and r.of("layout_mismatch") == []


@pytest.mark.parametrize("host", ["nx13", "nx0"])
def test_dlsym_rtld_next_from_an_rtld_local_library_searches_its_own_dependencies(flavour, tmp_path, host):
    """A plugin loaded RTLD_LOCAL asks dlsym(RTLD_NEXT) for a function of its own dependency and for
    its 11.8 runtime's cudaRuntimeGetVersion: glibc searches the plugin's own dependencies after it,
    outside the global scope. Under the shim (whose dlsym makes RTLD_NEXT relative to itself) the
    same answers, whether the program's CUDA 13 runtime is in the global scope or none is, and no
    stale dlerror message."""
    c = Case(flavour, tmp_path, program=host)
    expected = {"dep": 42, "rt": 11080, "dlerror": 0}
    assert who(c.run([c.progs["nxplugin"]], shim=False), "next") == expected
    assert who(c.run([c.progs["nxplugin"]]), "next") == expected
    inactive = c.run([c.progs["nxplugin"]], env={"CAPSHIM_TARGET_PID": "1"})  # not the target: stock
    assert who(inactive, "next") == expected


def test_the_runtime_entry_points_carry_each_runtime_version(plain):
    """The shim's exports, as verify checks them: the runtime's names at the default version and
    at each runtime's version node, the driver's and NVML's unversioned."""
    assert cuda._exports(plain[0].library) == cuda.EXPORTS
    assert "cudaGetDeviceProperties@libcudart.so.11.0" in cuda.EXPORTS and "cuDeviceGetAttribute" in cuda.EXPORTS


def test_fork_after_the_first_call(flavour, tmp_path):
    c = Case(flavour, tmp_path)
    r = c.run(["fork", c.progs["plugin13"]])
    assert [answers(r, n) for n in ("parent", "child", "parent-again")] == [LOWERED] * 3


def test_calls_from_threads_while_libraries_load_and_unload(flavour, tmp_path):
    """Every unload drops the cached answers while four threads are asking: each of their 400
    queries still reaches the plugin's runtime and is lowered."""
    c = Case(flavour, tmp_path)
    copy = tmp_path / "copy" / "libscope_plugin_copy.so"
    copy.parent.mkdir()
    copy.write_bytes(c.progs["plugin13"].read_bytes())
    r = c.run(["churn", c.progs["plugin13"], copy])
    assert who(r, "churn") == {"calls": 400, "lowered": 400}
    assert r.of("unresolved") == []


def test_a_full_pool_of_bound_wrappers_hands_out_the_real_function(flavour, tmp_path):
    """Nine copies of the runtime, each asked through its own dlsym'd pointer: the first eight
    get a wrapper bound to their own function (lowered), the ninth the real function itself
    (stock, working), and the status says which entry point ran out and what that means. The
    runtimes find their driver with dlvsym here, past the shim's dlsym, so that what each
    runtime pointer answers is its own doing."""
    c = Case(flavour, tmp_path)
    copies = []
    for i in range(9):
        copy = tmp_path / f"copy{i}" / cuda.STANDIN_RUNTIME
        copy.parent.mkdir()
        copy.write_bytes(c.progs["rt13"].read_bytes())
        copies.append(copy)
    r = c.run(["many", *copies], env={"CAPSHIM_STANDIN_RESOLVE": "dlvsym"})
    got = [who(r, f"many-{i}") for i in range(9)]
    assert got == [{"rc": [0, 0], "attr": [7, 5]}] * 8 + [{"rc": [0, 0], "attr": [9, 0]}], got
    (u,) = r.of("unbound")
    assert u["entry_point"] == "cudaDeviceGetAttribute" and "all 8 bound wrappers" in u["reason"]
    assert "unbound" in cuda.classify(st.StatusReport(r.events)).reason


def test_a_wrapper_reached_without_any_runtime_says_unresolved(flavour, tmp_path):
    """A weak reference binds to the shim's export with no runtime loaded: the call returns 500
    (not found), the status names the entry point and why, and the run is not called one that
    "made no CUDA call"."""
    c = Case(flavour, tmp_path)
    assert who(c.run(["weak"], shim=False), "weak") == {"rc": -1, "value": -7}
    r = c.run(["weak"])
    assert who(r, "weak") == {"rc": 500, "value": -7}
    (u,) = r.of("unresolved")
    assert u["entry_point"] == "cudaDeviceGetAttribute" and "no loaded library defines it" in u["reason"]
    assert u["caller"].endswith("scope_host")
    state = cuda.classify(st.StatusReport(r.events))
    assert "made no CUDA call" not in state.reason and "unresolved" in state.reason
    assert "cudaDeviceGetAttribute" in state.reason
    # the miss is not remembered past a load: the same call site reaches the runtime loaded after it
    r = c.run(["weak", c.progs["rt13"]])
    assert [who(r, "weak"), who(r, "weak-after-load")] == [{"rc": 500, "value": -7}, {"rc": 0, "value": 7}]


def test_stand_in_runtimes_fill_their_own_sizes(plain):
    """The 11.8 stand-in writes exactly 728 bytes and the 13 one 1008 (what the cases above rely on)."""
    b, progs = plain
    code = ("import ctypes, sys\n"
            "for path in sys.argv[1:]:\n"
            "    buf = ctypes.create_string_buffer(b'\\xa5' * 1100, 1100)\n"
            "    assert ctypes.CDLL(path).cudaGetDeviceProperties(buf, 0) == 0\n"
            "    print(len(buf.raw.rstrip(b'\\xa5')))\n")
    p = subprocess.run([sys.executable, "-c", code, str(progs["rt13"]), str(progs["rt11"])], capture_output=True,
                       text=True, env={"LD_LIBRARY_PATH": str(b.standin)})
    assert p.returncode == 0, p.stderr
    assert [int(n) for n in p.stdout.split()] == [1008, 728]


def test_capshim_run_python_importing_an_extension_module_that_links_the_runtime(plain, tmp_path):
    """The issue's case, end to end: `capshim run --profile t4-class -- python -c 'import scope_ext'`
    where scope_ext is an extension module linked against the (stand-in) runtime. Python loads it
    RTLD_LOCAL; every call used to return 500 and the run said the program made no CUDA call."""
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        pytest.skip(f"Python.h is not in {include} (install the Python development headers)")
    b, _progs = plain
    ext = tmp_path / f"scope_ext{sysconfig.get_config_var('EXT_SUFFIX')}"
    nb.run_compiler(["gcc", "-std=gnu11", "-O1", "-g", *nb.WARNINGS, "-shared", "-fPIC", "-isystem", str(include),
                     "-I", str(nb.source_dir("cuda")), "-I", str(HERE), str(HERE / "scope_ext.c"), "-o", str(ext),
                     f"-L{b.standin}", f"-Wl,-rpath,{b.standin}", f"-l:{cuda.STANDIN_RUNTIME}"])
    code = "import scope_ext; print(scope_ext.query())"
    env = {"LD_LIBRARY_PATH": str(b.standin), "PYTHONPATH": f"{REPO / 'src'}:{tmp_path}"}  # this checkout's capshim
    stock = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert stock.returncode == 0, stock.stderr
    assert {k: json.loads(stock.stdout)[k] for k in STOCK} == STOCK
    p = run_capshim("run", "--profile", "t4-class", "--", sys.executable, "-c", code, env=env)
    assert p.returncode == 0, p.stderr
    assert {k: json.loads(p.stdout)[k] for k in LOWERED} == LOWERED, p.stdout
    assert "made no CUDA call" not in p.stderr and "stayed inert" not in p.stderr, p.stderr
