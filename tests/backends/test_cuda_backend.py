"""The CUDA backend's Python side: configuration, environment, classification (no compile here;
the shim itself: tests/native/test_cuda_shim.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from capshim import backends, profiles
from capshim import status as st
from capshim.backends import cuda
from capshim.errors import CapshimError, UsageError

T4 = profiles.load("t4-class")


def test_render_config_is_what_the_shim_reads():
    text = cuda.render_config(T4)
    lines = text.splitlines()
    assert lines[0].startswith("# capshim profile t4-class version 1 sha256 ")
    assert lines[1:4] == ["direction=lower", "profile=t4-class", "computeCapability=75"]
    assert "totalGlobalMem=17179869184" in lines and "sharedMemPerBlockOptin=65536" in lines
    named = profiles.parse(T4.text.replace("[capabilities]", '[capabilities]\ndeviceName = "Tesla T4/é"'), "n.toml")
    assert cuda.render_config(named).splitlines()[-1] == "deviceName=Tesla%20T4%2F%C3%A9"


def test_render_config_refuses_other_apis():
    with pytest.raises(UsageError, match="needs 'cuda'"):
        cuda.render_config(profiles.load("vulkan-paravirt"))


@pytest.mark.parametrize("existing, expect", [
    (None, "/s/lib.so"),
    ("", "/s/lib.so"),
    ("/x/y.so:/usr/lib/gcc/libasan.so.8", "/usr/lib/gcc/libasan.so.8:/s/lib.so:/x/y.so"),  # a sanitizer stays first
    ("libclang_rt.asan-x86_64.so /x/y.so", "libclang_rt.asan-x86_64.so:/s/lib.so:/x/y.so"),
    ("/x/libasanity.so", "/s/lib.so:/x/libasanity.so"),
    ("a.so b.so", "/s/lib.so:a.so:b.so"),
    ("/s/lib.so:/x/y.so", "/s/lib.so:/x/y.so"),
])
def test_preload_puts_the_shim_first_and_keeps_the_users_entries(existing, expect):
    assert cuda.preload_value(Path("/s/lib.so"), existing) == expect


def test_launch_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/u/mine.so")
    env = cuda.launch_env(T4, tmp_path / "s.jsonl", tmp_path, inherit=True, quiet=True, library=Path("/s/lib.so"))
    assert env["LD_PRELOAD"] == "/s/lib.so:/u/mine.so"
    assert Path(env[cuda.CONFIG_VAR]).read_text() == cuda.render_config(T4)
    assert (env["CAPSHIM_INHERIT"], env["CAPSHIM_QUIET"], env["CAPSHIM_STATUS_FILE"]) == ("1", "1", str(tmp_path / "s.jsonl"))
    assert cuda.launch_env(None, tmp_path / "s.jsonl", tmp_path, library=Path("/s/lib.so")) == {}


def _report(tmp_path, events):
    path = tmp_path / "status.jsonl"
    path.write_text("".join(json.dumps({"schema": 1, "shim": "cuda", "pid": 7, **e}) + "\n" for e in events))
    return st.read(path)


def test_classify_loaded_but_no_entry_point_is_inert_never_a_result(tmp_path):
    r = _report(tmp_path, [{"event": "loaded"}, {"event": "config", "accepted": True}])
    s = cuda.classify(r)
    assert s.state == st.INERT and "statically linked" in s.reason


def test_classify_active_names_entry_points_and_layout_mismatches(tmp_path):
    r = _report(tmp_path, [
        {"event": "loaded"}, {"event": "config", "accepted": True},
        {"event": "hooks", "installed": ["cudaGetDeviceProperties"], "first": "cudaDeviceGetAttribute"},
        {"event": "changed", "query": "cudaDeviceGetAttribute", "key": "computeCapability", "stock": 90, "reported": 75},
        {"event": "layout_mismatch", "query": "cudaGetDeviceProperties", "layout": 0, "reason": "pre-12 layout"},
        {"event": "called", "entry_points": ["cudaDeviceGetAttribute", "cudaGetDeviceProperties"], "substituted": []}])
    s = cuda.classify(r)
    assert s.state == st.ACTIVE and s.changes == 1
    assert "entry points called: cudaDeviceGetAttribute, cudaGetDeviceProperties" in s.reason
    assert "layout_mismatch (left stock): cudaGetDeviceProperties: pre-12 layout" in s.reason
    assert cuda.BACKEND.summarize_status(r, ["cuda"]) == {"cuda": s}


def test_classify_rejected_configuration_is_invalid(tmp_path):
    r = _report(tmp_path, [{"event": "loaded"}, {"event": "config", "accepted": False, "reason": "direction 'raise'"}])
    assert cuda.classify(r).state == st.INVALID


def test_backend_interface():
    be = backends.get("cuda")
    assert be is cuda.BACKEND and be.tabular_probe and not be.can_simulate
    assert be.requested_shims(T4, None) == ["cuda"] and be.requested_shims(None, None) == []
    assert be.runs_here("linux") and not be.runs_here("darwin")
    with pytest.raises(UsageError, match="--compare needs --profile"):
        be.probe(compare=True)
    with pytest.raises(UsageError, match="checks its own build"):
        be.verify(shim=Path("x.so"))


def test_unavailable_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(cuda.sys, "platform", "darwin")
    assert "Linux only" in cuda.BACKEND.unavailable()
    monkeypatch.setattr(cuda.sys, "platform", "linux")
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    assert "no-such-compiler-xyz" in cuda.BACKEND.unavailable()


def test_the_build_needs_no_cuda_headers():
    """Every source declares what it uses: no CUDA header is included anywhere."""
    src = Path(cuda.__file__).resolve().parents[1] / "native" / "cuda"
    for f in src.glob("*.[ch]"):
        includes = [line for line in f.read_text().splitlines() if line.startswith("#include")]
        assert not [i for i in includes if "cuda.h" in i or "cuda_runtime" in i or "driver_types" in i], f


def test_find_runtime_looks_where_pip_puts_nvidias_wheels(tmp_path):
    assert cuda.find_runtime([str(tmp_path)]) in (None, *[Path(p) for p in cuda._TOOLKIT])
    lib = tmp_path / "site" / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    assert cuda.find_runtime([str(tmp_path / "nothing"), str(tmp_path / "site")]) == lib


def test_run_says_what_a_program_was_built_for_and_refuses_to_call_a_static_runtime_a_result(tmp_path):
    """Issue 22 item 2: the program's own fatbin (what the code was built for) and a statically linked
    runtime (inert) are named before the run; a program without CUDA code of its own gets nothing."""
    from tests.fixtures import fatbin as fb

    static = tmp_path / "static-app"
    static.write_bytes(fb.elf({".nv_fatbin": fb.sample()}, {"cudaGetDeviceProperties": True}))
    dynamic = tmp_path / "dynamic-app"
    dynamic.write_bytes(fb.elf({".nv_fatbin": fb.sample()}, {"__cudaRegisterFatBinary": False}))
    stock = lambda: {"capabilities": {"computeCapability": 90}}  # noqa: E731
    notes = cuda.program_notes(T4, [str(static)], stock)
    assert "links the CUDA runtime statically" in notes[0] and "inert" in notes[0]
    assert notes[1].endswith("lowered 9.0 -> 7.5; code built for sm_75, sm_80, sm_86, sm_90 (+PTX compute_90)")
    only = cuda.program_notes(T4, [str(dynamic)], stock)
    assert len(only) == 1 and "lowered 9.0 -> 7.5" in only[0]

    def no_device():
        raise CapshimError("no CUDA device")

    assert cuda.program_notes(T4, [str(dynamic)], no_device)[0].endswith(
        "answers compute capability 7.5; code built for sm_75, sm_80, sm_86, sm_90 (+PTX compute_90)")
    assert cuda.program_notes(T4, [sys.executable], stock) == []
    assert cuda.program_notes(T4, ["no-such-program-here"], stock) == []


def test_profile_check_against_a_device_without_a_driver_is_exit_1_as_probe_says_it(monkeypatch):
    """No CUDA driver (this machine): `profile check --device 0` cannot read the device, which is exit 1
    (as probe and bench exit), not 2 (bad usage or profile)."""
    from click.testing import CliRunner

    from capshim.cli import main

    monkeypatch.setenv("CAPSHIM_CUDA_RUNTIME", "/nonexistent/libcudart.so.13")
    r = CliRunner().invoke(main, ["profile", "check", "t4-class", "--device", "0"])
    assert r.exit_code == 1 and "cannot check the profile against the device" in r.output, r.output


def test_a_bogus_runtime_is_named_as_such_not_blamed_on_the_driver(tmp_path):
    """Issue 22 hostile pass: CAPSHIM_CUDA_RUNTIME naming a text file, a folder or a library
    without the runtime's symbols ended in "(is an NVIDIA driver installed? try: nvidia-smi ...)",
    and the last said "cudaRuntimeGetVersion failed" of a library that has no such function."""
    b = cuda.build()
    text = tmp_path / "libcudart.so.13"
    text.write_text("not a library\n")
    nosyms = tmp_path / "libnosyms.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-x", "c", "-", "-o", str(nosyms)], input="int x;\n", text=True,
                   check=True)
    for path, words in ((text, "no CUDA runtime"), (tmp_path, "no CUDA runtime"),
                        (nosyms, "not a CUDA runtime (no cudaRuntimeGetVersion)")):
        with pytest.raises(CapshimError) as exc:
            cuda.probe(b=b, extra_env={**cuda.standin_env(b), "CAPSHIM_CUDA_RUNTIME": str(path)})
        assert words in str(exc.value) and "CAPSHIM_CUDA_RUNTIME=" in str(exc.value), str(exc.value)
        assert "is an NVIDIA driver installed" not in str(exc.value)


def test_no_driver_points_to_the_standins_and_probe_says_it_once(monkeypatch):
    """No NVIDIA driver: the error names the stand-ins' section of docs/cuda.md, and
    `probe --api cuda --compare --profile P` says it once (it was a warning of the profile check and
    then the same text as the error)."""
    from click.testing import CliRunner

    from capshim.cli import main

    section = cuda.STANDIN_HINT.split("'")[1]
    assert f"## {section}\n" in (Path(__file__).resolve().parents[2] / "docs" / "cuda.md").read_text()
    monkeypatch.setattr(cuda, "run_probe", lambda *a, **k: ({"error": "no CUDA driver (libcuda.so.1): gone"}, ""))
    r = CliRunner().invoke(main, ["probe", "--api", "cuda", "--compare", "--profile", "t4-class"])
    assert r.exit_code == 1, r.output
    assert r.output.count("no CUDA driver") == 1 and "warning" not in r.output, r.output
    assert cuda.STANDIN_HINT in " ".join(r.output.split()), r.output
