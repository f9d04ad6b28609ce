"""capshim.program: whatever a program file holds, `run` starts it or refuses in one line naming the
cause, and the facts the CUDA backend reads are bounded (issue 27, item 3).

The programs are built byte by byte (tests/fixtures/elfexe.py); the damaged ones change one field
the kernel or the dynamic linker reads. Expected refusals follow Linux's fs/binfmt_elf.c and
fs/binfmt_script.c (what execve would do with the same file).
"""

from __future__ import annotations

import os
import struct
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capshim import cuda_binary as cb
from capshim import launch, program
from tests.fixtures import elfexe
from tests.fixtures import fatbin as fb

#: This machine's dynamic linker (the fixture programs name it so the kernel would find it).
HOST_INTERP = program.inspect(sys.executable).image().elf.interpreter
OTHER_MACHINE = 183 if elfexe._host() == "x86_64" else 62


def _exe(tmp_path: Path, data: bytes, name: str = "prog", mode: int = 0o755) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    p.chmod(mode)
    return p


def _prog(**kw) -> tuple[bytearray, elfexe.Layout]:
    kw.setdefault("interp", HOST_INTERP)
    data, layout = elfexe.program(**kw)
    return bytearray(data), layout


def _patch(fmt: str, at, value):
    def apply(b: bytearray, lay: elfexe.Layout) -> bytes:
        struct.pack_into(fmt, b, at(lay) if callable(at) else at, value)
        return bytes(b)
    return apply


# (id, how the file is made from a good dynamic program, what the refusal says; None: it starts)
ELF_CASES = [
    ("good-dynamic", lambda b, lay: bytes(b), None),
    ("truncated-header", lambda b, lay: bytes(b[:7]), "header is cut at 7 bytes"),
    ("bad-class", _patch("<B", 4, 7), "damaged ELF file"),
    ("object-file", _patch("<H", 16, 1), "an object file (ET_REL), not a program"),
    ("core-dump", _patch("<H", 16, 4), "a core dump"),
    ("other-machine", _patch("<H", 18, OTHER_MACHINE), "this machine runs"),
    ("phentsize", _patch("<H", 54, 40), "program header entries of 40 bytes (expected 56)"),
    ("no-phdrs", _patch("<H", 56, 0), "0 program headers"),
    ("huge-phnum", _patch("<H", 56, 0xFFFF), "65535 program headers"),
    ("phdrs-past-end", _patch("<Q", 32, 1 << 40), "its program headers end at byte"),
    ("interp-1-byte", _patch("<Q", lambda lay: 64 + 56 + 32, 1), "PT_INTERP) is 1 bytes long"),
    ("interp-no-nul", lambda b, lay: bytes(b[:lay.interp + len(HOST_INTERP)] + b"X" + b[lay.interp + len(HOST_INTERP) + 1:]),
     "does not end in NUL"),
    ("interp-past-end", _patch("<Q", lambda lay: 64 + 56 + 8, 1 << 40), "PT_INTERP) runs past the end"),
]


@pytest.mark.parametrize("make, words", [c[1:] for c in ELF_CASES], ids=[c[0] for c in ELF_CASES])
def test_elf_files_the_kernel_refuses_are_refused_in_one_line(tmp_path, make, words):
    if words == "this machine runs" and program._binfmt_misc_elf():
        words = None  # an emulator (binfmt_misc) runs programs of another machine here: exec would start it
    b, lay = _prog()
    p = _exe(tmp_path, make(b, lay))
    problem = launch.exec_problem(str(p))
    if words is None:
        assert problem is None
    else:
        assert problem is not None and words in problem and "\n" not in problem, problem
        assert problem.startswith(f"'{p}': ")


def test_a_missing_program_interpreter_is_named(tmp_path):
    b, _ = _prog(interp="/lib/ld-musl-nowhere.so.1")
    problem = launch.exec_problem(str(_exe(tmp_path, bytes(b))))
    assert "its program interpreter /lib/ld-musl-nowhere.so.1 (PT_INTERP) was not found" in problem


def test_files_that_are_not_programs(tmp_path):
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "fifo").chmod(0o755)
    cases = {
        str(tmp_path / "missing"): "not found",
        "no-such-program-xyz-27": "not found in PATH",
        str(tmp_path / "d"): "it is a folder, not a program",
        str(tmp_path / "fifo"): "not a regular file",
        str(_exe(tmp_path, b"#!/bin/sh\n", "noexec", 0o644)): "not executable (mode 0644",
        str(_exe(tmp_path, b"#!\n", "empty")): "its interpreter (#! line) was not found: (empty)",
        str(_exe(tmp_path, b"#!/nonexistent/python9\n", "gone")): "was not found: /nonexistent/python9",
        str(_exe(tmp_path, f"#!{tmp_path / 'd'}\n".encode(), "dirinterp")): "its interpreter (#! line) is a folder",
        str(_exe(tmp_path, b"#!/usr/bin/env no-such-python-27 -u\n", "envgone")):
            "runs 'no-such-python-27' through env, and 'no-such-python-27' is not found in PATH",
        str(_exe(tmp_path, bytes(range(7, 250)) * 4, "random")): "not an executable format",
    }
    for given, words in cases.items():
        problem = launch.exec_problem(given)  # never blocks on the FIFO
        assert problem is not None and words in problem and "\n" not in problem, (given, problem)
    assert launch.exec_problem(str(_exe(tmp_path, b"#!/bin/sh\nexit 0\n", "ok"))) is None
    assert launch.exec_problem(str(_exe(tmp_path, b"#!/usr/bin/env sh\n", "envok"))) is None


def test_a_script_is_read_through_to_the_program_the_kernel_runs(tmp_path):
    b, _ = _prog(interp=None, needed=())
    static = _exe(tmp_path, bytes(b), "static")
    script = _exe(tmp_path, f"#!/usr/bin/env -S {static.name} -x\n".encode(), "s")
    p = program.inspect(str(script), env_path=str(tmp_path))
    assert p.kind == "script" and p.image().path == str(static) and p.image().elf.interpreter is None
    nested = _exe(tmp_path, f"#!{script}\n".encode(), "n")
    assert program.inspect(str(nested), env_path=str(tmp_path)).image().path == str(static)


def test_a_program_found_through_path(tmp_path):
    b, _ = _prog()
    _exe(tmp_path, bytes(b), "myprog")
    p = program.inspect("myprog", env_path=str(tmp_path))
    assert p.path == str(tmp_path / "myprog") and p.refusal is None and p.elf.needed == ("libc.so.6",)


def test_names_with_any_bytes_are_shown_on_one_line(tmp_path):
    name = os.fsdecode(b"odd\xff\n\x1b[31mname")
    b, lay = _prog()
    p = tmp_path / name
    p.write_bytes(bytes(b[:7]))
    p.chmod(0o755)
    problem = launch.exec_problem(str(p))
    assert "\n" not in problem and "\x1b" not in problem and "\\xff" in problem
    problem.encode("utf-8")  # printable: no lone surrogate
    # a DT_NEEDED name of any bytes is read as text (undecodable bytes replaced), never an error
    b, lay = _prog(needed=("lib\xe9\x01.so",))
    i = b.index("lib\xe9\x01.so".encode())
    b[i + 3:i + 5] = b"\xff\xfe"
    facts = program.inspect(str(_exe(tmp_path, bytes(b)))).elf
    assert facts.refusal is None and facts.needed[0].startswith("lib\ufffd")


def test_bogus_dynamic_string_offsets_are_damage_not_errors(tmp_path):
    b, lay = _prog(needed=("libcudart.so.13",))
    struct.pack_into("<Q", b, lay.dynamic + 8, 1 << 50)  # DT_NEEDED's name far outside the file
    facts = program.inspect(str(_exe(tmp_path, bytes(b), "n"))).elf
    assert facts.refusal is None and facts.needed == () and "point outside the file" in facts.damage
    b, lay = _prog(needed=("libcudart.so.13",))
    struct.pack_into("<Q", b, lay.dynamic + 16 + 8, 7)  # DT_STRTAB at an address no PT_LOAD maps
    facts = program.inspect(str(_exe(tmp_path, bytes(b), "s"))).elf
    assert facts.needed == () and "DT_STRTAB) lies outside the file" in facts.damage


def test_huge_tables_and_huge_files_cost_at_most_the_bounds(tmp_path):
    b, lay = _prog(sections={".nv_fatbin": fb.sample()}, symbols={"cudaMalloc": True})
    huge_sections = bytearray(b)
    struct.pack_into("<H", huge_sections, 60, 0)  # e_shnum 0: the count is section 0's sh_size
    struct.pack_into("<Q", huge_sections, lay.shoff + 32, 1 << 40)
    bogus_names = bytearray(b)
    struct.pack_into("<H", bogus_names, 62, 0xFFF0)  # e_shstrndx past the table
    huge_symtab = bytearray(b)
    sym_header = lay.shoff + 64 * (1 + 2 + 1)  # null, .dynstr, .dynamic, .nv_fatbin, then .symtab
    struct.pack_into("<Q", huge_symtab, sym_header + 32, 1 << 34)  # .symtab claims 16 GiB
    t0 = time.monotonic()
    for name, data in (("sections", huge_sections), ("names", bogus_names), ("symtab", huge_symtab)):
        p = _exe(tmp_path, bytes(data), name)
        assert program.inspect(str(p)).refusal is None
        assert cb.static_runtime(p) in (None, False, True)
        assert cb.embedded_architectures(p) in (None, cb.CodeTargets((75, 80, 86, 90), (90,)))
    assert cb.static_runtime(tmp_path / "sections") is None and cb.embedded_architectures(tmp_path / "sections") is None
    sparse = tmp_path / "sparse"
    sparse.write_bytes(bytes(b))
    with open(sparse, "r+b") as fh:  # a 3 GB file of zeros after the program (LIEF read it whole: 6 GB, 34 s)
        fh.truncate(3 << 30)
    sparse.chmod(0o755)
    assert program.inspect(str(sparse)).refusal is None
    assert cb.static_runtime(sparse) is True and cb.embedded_architectures(sparse).sass == (75, 80, 86, 90)
    assert time.monotonic() - t0 < 6 * program.TIME_BUDGET_S


def test_the_reader_stops_at_its_byte_and_time_bounds(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(bytes(4096))
    with open(f, "rb") as fh:
        r = program.BoundedReader(fh, budget=1000)
        assert len(r.read_at(0, 600)) == 600 and r.read_at(5000, 10) == b""
        with pytest.raises(program.ReadLimit, match="more than"):
            r.read_at(0, 600)
        r = program.BoundedReader(fh, seconds=0.0)
        with pytest.raises(program.ReadLimit, match="longer than"):
            r.read_at(0, 1)


def test_secure_execution_is_named(tmp_path, monkeypatch):
    b, _ = _prog()
    p = _exe(tmp_path, bytes(b), "suid", 0o4755)
    nosuid = bool(os.statvfs(p).f_flag & os.ST_NOSUID)
    assert program.inspect(str(p)).secure is None  # set-user-ID to its own owner: no change of user
    monkeypatch.setattr(program.os, "getuid", lambda: os.stat(p).st_uid + 1)
    secure = program.inspect(str(p)).secure
    if nosuid:  # the kernel ignores the bit on a nosuid file system: no secure-execution mode
        assert secure is None
    else:
        assert secure.startswith(f"set-user-ID (owner uid {os.stat(p).st_uid}")


# ---- property: any bytes --------------------------------------------------------------------------

SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_BASES = [bytes(_prog(needed=("libcudart.so.13", "libc.so.6"), soname="libx.so",
                      sections={".nv_fatbin": fb.sample()}, symbols={"__cudaRegisterFatBinary": False})[0]),
          bytes(_prog(interp=None, needed=(), symbols={"cudaMalloc": True})[0])]


@st.composite
def hostile_elf(draw) -> bytes:
    """A good program with fields overwritten by any value (in the header and the tables), cut short,
    or grown; or plain bytes after the ELF magic."""
    if draw(st.integers(0, 9)) == 0:
        return b"\x7fELF" + draw(st.binary(max_size=600))
    b = bytearray(draw(st.sampled_from(_BASES)))
    for _ in range(draw(st.integers(1, 8))):
        size = draw(st.sampled_from([1, 2, 4, 8]))
        at = draw(st.integers(4, len(b) - size))
        b[at:at + size] = draw(st.binary(min_size=size, max_size=size))
    if draw(st.booleans()):
        b = b[:draw(st.integers(0, len(b)))]
    return bytes(b)


@SETTINGS
@given(data=hostile_elf())
def test_any_elf_bytes_give_facts_or_one_line_never_an_exception(tmp_path_factory, data):
    p = _exe(tmp_path_factory.mktemp("h"), data)
    t0 = time.monotonic()
    prog = program.inspect(str(p))
    assert prog.refusal is None or ("\n" not in prog.refusal and prog.refusal.startswith(f"'{p}': "))
    if data.startswith(b"\x7fELF"):
        assert prog.kind == "elf" and all(isinstance(n, str) for n in prog.elf.needed)
    else:  # cut before the magic
        assert prog.kind == "other" and "not an executable format" in prog.refusal
    assert cb.static_runtime(p) in (None, True, False)
    got = cb.embedded_architectures(p)
    assert got is None or isinstance(got, cb.CodeTargets)
    assert time.monotonic() - t0 < 3 * program.TIME_BUDGET_S + 2


def test_a_noexec_file_system_is_named_not_the_mode(tmp_path, monkeypatch):
    """access(2) refuses X_OK on a noexec mount whatever the mode: the hint is the mount, not chmod."""
    p = _exe(tmp_path, b"#!/bin/sh\n", "onnoexec")
    real = os.statvfs(p)

    class NoExec:
        f_flag = real.f_flag | os.ST_NOEXEC

    monkeypatch.setattr(program.os, "access", lambda path, mode: mode != os.X_OK)
    monkeypatch.setattr(program.os, "statvfs", lambda path: NoExec())
    assert "mounted noexec" in launch.exec_problem(str(p)) and "chmod" not in launch.exec_problem(str(p))


def test_a_script_with_windows_line_endings_is_named(tmp_path):
    """The kernel ends the interpreter's name at a space, a tab or the newline: '/bin/sh\\r' is not /bin/sh."""
    p = _exe(tmp_path, b"#!/bin/sh\r\necho hi\r\n", "crlf")
    problem = launch.exec_problem(str(p))
    assert "was not found: /bin/sh\\x0d (the #! line ends in a carriage return" in problem and "\r" not in problem
    assert launch.exec_problem(str(_exe(tmp_path, b"#!  /bin/sh  -e  \n", "spaces"))) is None


def test_a_bare_interpreter_name_is_a_path_not_a_path_lookup(tmp_path, monkeypatch):
    """`#!sh` makes the kernel open ./sh (execve(2)), whatever PATH says."""
    monkeypatch.chdir(tmp_path)
    p = _exe(tmp_path, b"#!sh\n", "bare")
    assert "its interpreter (#! line) was not found: sh" in launch.exec_problem(str(p))
    _exe(tmp_path, b"#!/bin/sh\n", "sh")
    assert launch.exec_problem(str(p)) is None  # ./sh exists now: the kernel runs it
