"""`capshim run --profile <cuda> -- PROGRAM` for any program: it starts or is refused in one line, and the
inert reason names the real cause, as the Vulkan and Metal backends do (issue 27, item 3).

The classification table uses status events as the shim writes them (``loaded`` with the pid, the
launcher's /bin/sh first under the pid wrapper) and program files built byte by byte; the slow
tests run `capshim run` with the real shim on programs built here (gcc and the fixtures).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from capshim import profiles, program
from capshim import status as st
from capshim.backends import cuda
from tests.conftest import run_capshim
from tests.fixtures import elfexe
from tests.fixtures import fatbin as fb

T4 = profiles.load("t4-class")
HOST_INTERP = program.inspect(sys.executable).image().elf.interpreter


def _exe(tmp_path: Path, data: bytes, name: str, mode: int = 0o755) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    p.chmod(mode)
    return p


def _report(tmp_path, events):
    path = tmp_path / "status.jsonl"
    path.write_text("".join(json.dumps({"schema": 1, "shim": "cuda", "pid": 7, **e}) + "\n" for e in events))
    return st.read(path)


WRAPPER_ONLY = [{"event": "loaded", "process": "sh"}, {"event": "config", "accepted": True}]
PROGRAM_TOO = WRAPPER_ONLY + [{"event": "loaded", "process": "prog"}, {"event": "config", "accepted": True}]


def _programs(tmp_path: Path) -> dict[str, Path]:
    static_exe = elfexe.program(interp=None, needed=())[0]
    static_rt = elfexe.program(interp=HOST_INTERP, needed=("libc.so.6",), sections={".nv_fatbin": fb.sample()},
                               symbols={"cudaGetDeviceProperties": True})[0]
    dynamic_rt = elfexe.program(interp=HOST_INTERP, needed=("libcudart.so.12", "libc.so.6"))[0]
    plain = elfexe.program(interp=HOST_INTERP, needed=("libc.so.6",))[0]
    out = {"static-exe": _exe(tmp_path, static_exe, "static-exe"), "static-rt": _exe(tmp_path, static_rt, "static-rt"),
           "dynamic-rt": _exe(tmp_path, dynamic_rt, "dynamic-rt"), "plain": _exe(tmp_path, plain, "plain")}
    out["script"] = _exe(tmp_path, f"#!{out['plain']}\n".encode(), "script")
    return out


# (program, events, words the inert reason holds)
CASES = [
    ("static-exe", WRAPPER_ONLY, "never loaded into the program: '{p}' is statically linked (no program interpreter"),
    ("plain", WRAPPER_ONLY, "never loaded into the program: '{p}' did not start, or the dynamic linker did not load"),
    ("static-rt", PROGRAM_TOO, "no CUDA entry point was reached through it: '{p}' has its CUDA runtime statically linked"),
    ("dynamic-rt", PROGRAM_TOO, "'{p}' links libcudart.so.12 but made none of the queries the shim answers"),
    ("plain", PROGRAM_TOO, "'{p}' links no CUDA library (no libcudart or libcuda among its DT_NEEDED)"),
    ("script", PROGRAM_TOO, "'{p}' (a script run by {plain}): the interpreter links no CUDA library"),
]


@pytest.mark.parametrize("name, events, words", CASES,
                         ids=[f"{c[0]}-{'wrapper' if c[1] is WRAPPER_ONLY else 'loaded'}" for c in CASES])
def test_the_inert_reason_names_the_cause_in_the_program_file(tmp_path, name, events, words):
    progs = _programs(tmp_path)
    prog = program.inspect(str(progs[name]))
    state = cuda.classify(_report(tmp_path, events), prog=prog, wrapped=True)
    assert state.state == st.INERT
    assert words.format(p=progs[name], plain=progs["plain"]) in state.reason, state.reason
    assert "\n" not in state.reason


def test_without_the_wrapper_the_first_loaded_event_is_the_programs(tmp_path):
    progs = _programs(tmp_path)
    prog = program.inspect(str(progs["plain"]))
    s = cuda.classify(_report(tmp_path, WRAPPER_ONLY), prog=prog, wrapped=False)
    assert "links no CUDA library" in s.reason  # --inherit: no /bin/sh wrapper, so the program loaded it
    assert "entry points called" not in s.reason


def test_secure_execution_and_another_class_are_why_the_shim_cannot_load(tmp_path, monkeypatch):
    plain = elfexe.program(interp=HOST_INTERP, needed=("libc.so.6",))[0]
    i386 = program.Program("old", "/x/old", "elf", program.Elf(32, "i386", "executable", "/lib/ld-linux.so.2"))
    assert cuda.unreachable(i386) == ("'old' is a 32-bit i386 program; the shim is a 64-bit " + cuda.platform.machine()
                                      + " library, which the dynamic linker skips for it (wrong ELF class or machine)")
    suid = _exe(tmp_path, plain, "suid", 0o4755)
    monkeypatch.setattr(program.os, "getuid", lambda: os.stat(suid).st_uid + 1)
    prog = program.inspect(str(suid))
    if prog.secure is None:  # a nosuid file system: the kernel ignores the bit, the shim loads
        assert os.statvfs(suid).f_flag & os.ST_NOSUID and cuda.unreachable(prog) is None
        return
    why = cuda.unreachable(prog)
    assert why.startswith(f"'{suid}' is set-user-ID") and "secure-execution mode" in why and "ld.so(8)" in why
    s = cuda.classify(_report(tmp_path, WRAPPER_ONLY), prog=prog, wrapped=True)
    assert s.reason == f"never loaded into the program: {why}"
    assert [n for n in cuda.BACKEND.run_warnings(T4, None, [str(suid)]) if "the shim cannot load" in n] == \
        [f"the shim cannot load: {why}; its CUDA and NVML answers stay the device's (nothing is lowered)"]


def test_run_notes_say_what_keeps_the_shim_out_once_before_the_run(tmp_path):
    progs = _programs(tmp_path)
    notes = cuda.BACKEND.run_warnings(T4, None, [str(progs["static-exe"])])
    assert notes == [f"the shim cannot load: '{progs['static-exe']}' is statically linked (no program interpreter, "
                     "PT_INTERP): no dynamic linker runs for it, so LD_PRELOAD is never read; its CUDA and NVML "
                     "answers stay the device's (nothing is lowered)"]
    for argv in ([str(progs["plain"])], [str(tmp_path / "missing")], [str(tmp_path)]):
        assert cuda.BACKEND.run_warnings(T4, None, argv) == []


# ---- the real shim, the real kernel ------------------------------------------------------------------

def _run(*argv: str, env: dict | None = None):
    r = run_capshim("run", "--profile", "t4-class", "--", *argv, env=env, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def _inert_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("capshim: cuda stayed inert: ")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.slow
def test_run_a_statically_linked_program(tmp_path):
    """No program interpreter: the program runs (exit 0), and capshim says why the shim never loaded."""
    p = _exe(tmp_path, elfexe.program(interp=None, needed=())[0], "tiny-static")
    assert subprocess.run([str(p)]).returncode == 0  # the kernel runs it as built
    r = _run(str(p))
    assert r.returncode == 0, r.stderr
    assert "never loaded into the program" in _inert_line(r.stderr) and "statically linked" in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_run_a_program_with_its_own_cuda_runtime_and_one_found_through_path(tmp_path):
    """A runtime linked into the program (it defines cudaGetDeviceProperties and calls it directly):
    the shim loads but is never reached, and the reason says the runtime is static."""
    src = tmp_path / "app.c"
    src.write_text("int cudaGetDeviceProperties(void *p, int d) { (void)p; return d; }\n"
                   "int main(void) { return cudaGetDeviceProperties(0, 0); }\n")
    subprocess.run(["gcc", "-o", str(tmp_path / "capshim-static-rt-app"), str(src)], check=True)
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = _run("capshim-static-rt-app", env=env)
    assert r.returncode == 0, r.stderr
    line = _inert_line(r.stderr)
    assert "loaded, but no CUDA entry point was reached through it: 'capshim-static-rt-app' has its CUDA " \
           "runtime statically linked" in line


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_run_a_set_user_id_program(tmp_path):
    """Set-user-ID to another user: the kernel sets AT_SECURE, ld.so drops the shim's LD_PRELOAD entry;
    the program runs and both the note before and the reason after say so."""
    p = tmp_path / "suid-true"
    shutil.copy(shutil.which("true"), p)
    os.chown(p, 65534, -1)
    p.chmod(0o4755)
    if os.statvfs(p).f_flag & os.ST_NOSUID:
        pytest.skip("the test folder's file system is mounted nosuid: the kernel ignores the bit there")
    r = _run(str(p))
    assert r.returncode == 0, r.stderr
    assert "capshim: warning: the shim cannot load: " in r.stderr and "is set-user-ID (owner uid 65534" in r.stderr
    assert "never loaded into the program" in _inert_line(r.stderr) and "secure-execution mode" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["truncated", "object", "interp", "env"])
def test_run_refuses_in_one_line_before_anything_starts(tmp_path, kind):
    data, lay = elfexe.program(interp=HOST_INTERP, needed=("libc.so.6",))
    if kind == "truncated":
        p, words = _exe(tmp_path, data[:40], "cut"), "a truncated or damaged ELF file"
    elif kind == "object":
        p, words = _exe(tmp_path, data[:16] + b"\x01\x00" + data[18:], "obj"), "an object file (ET_REL)"
    elif kind == "interp":
        other = elfexe.program(interp="/lib/ld-nowhere.so.9", needed=("libc.so.6",))[0]
        p, words = _exe(tmp_path, other, "foreign"), "/lib/ld-nowhere.so.9 (PT_INTERP) was not found"
    else:
        p, words = _exe(tmp_path, b"#!/usr/bin/env no-such-python-27\n", "s"), "is not found in PATH"
    r = _run(str(p))
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("capshim: cannot run")] == \
        [ln for ln in r.stderr.splitlines() if "cannot run" in ln]
    assert len([ln for ln in r.stderr.splitlines() if "cannot run" in ln]) == 1
    assert "inert" not in r.stderr
