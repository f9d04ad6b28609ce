"""What a program file is, read before ``capshim run`` starts it, bounded in bytes and time.

``capshim run`` starts commands through ``/bin/sh -c 'exec "$@"'`` (the pid wrapper of
:mod:`capshim.launch`), and a shim enabled through the dynamic linker (``LD_PRELOAD``) reaches
a program only when the kernel starts it through ``ld.so`` in normal mode. This module says,
from the file alone and without running it:

- whether the kernel would start it at all, and if not why, in one line
  (:attr:`Program.refusal`): a folder, no execute permission, a ``#!`` line whose interpreter
  is missing, an ELF file for another machine, a truncated or damaged ELF header or program
  header table, a ``PT_INTERP`` the kernel refuses or that names a missing file. The checks
  are those of Linux's ``fs/binfmt_elf.c`` (``load_elf_binary``, ``load_elf_phdrs``) and
  ``fs/binfmt_script.c``;
- what the dynamic linker will make of it (:class:`Elf`): its program interpreter (none: a
  statically linked program, which no dynamic linker serves), its ``DT_NEEDED`` libraries and
  ``DT_SONAME`` (through ``DT_STRTAB``, as ``ld.so`` finds them), its ELF class and machine;
- whether it runs in secure-execution mode (:attr:`Program.secure`: set-user-ID or
  set-group-ID to someone else, or file capabilities), where ``ld.so`` ignores ``LD_PRELOAD``
  entries that contain a slash (ld.so(8), "Secure-execution mode"; the shim's path has one).

A ``#!`` script is followed to the program the kernel really runs (up to 4 levels, Linux's
``BINPRM_MAX_RECURSION``; ``/usr/bin/env NAME`` resolved through ``PATH``).

The ELF structures are parsed with pyelftools (``elftools``) over a :class:`BoundedReader`:
every read of one file counts against :data:`READ_BUDGET` bytes and :data:`TIME_BUDGET_S`
seconds, so a hostile file (a huge section count, a bogus string-table offset, a string
without an end, a sparse multi-gigabyte file) costs at most that, and any damage ends as a
sentence in :attr:`Elf.damage`, never an exception. Names read from the file are returned
as text with undecodable bytes replaced; :func:`show` makes any name safe to print on one line.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from capshim.contracts import environ, names

__all__ = ["Program", "Elf", "BoundedReader", "ReadLimit", "inspect", "open_elf", "show", "READ_BUDGET",
           "TIME_BUDGET_S"]

#: Bytes read from one file at most (all reads together): headers and tables, never code.
READ_BUDGET = 64 << 20
#: Seconds one file's reading may take at most (checked at every read).
TIME_BUDGET_S = 3.0
#: Largest program header table the kernel accepts (bytes; fs/binfmt_elf.c load_elf_phdrs).
MAX_PHDR_BYTES = 65536
#: PATH_MAX: the longest PT_INTERP the kernel accepts (bytes, with its NUL).
PATH_MAX = 4096
#: Dynamic entries read at most (a real executable has under 100).
MAX_DYNAMIC = 8192
#: Longest library name read from the dynamic string table (bytes).
MAX_NAME = 4096
#: The kernel's BINPRM_BUF_SIZE: what it reads of a #! line (bytes).
SHEBANG_BYTES = 256
#: How deep the kernel follows #! interpreters (BINPRM_MAX_RECURSION).
MAX_SCRIPT_DEPTH = 4

# ELF e_machine names pyelftools gives -> what a person calls them; and which (class, machine)
# each host runs natively (compat: 32-bit x86 on x86_64, 32-bit Arm on aarch64).
_MACHINES = {"EM_X86_64": "x86_64", "EM_386": "i386", "EM_AARCH64": "aarch64", "EM_ARM": "arm",
             "EM_PPC64": "ppc64", "EM_S390": "s390x", "EM_RISCV": "riscv"}
_HOST_RUNS = {"x86_64": {(64, "EM_X86_64"), (32, "EM_386"), (32, "EM_X86_64")},
              "aarch64": {(64, "EM_AARCH64"), (32, "EM_ARM")},
              "arm64": {(64, "EM_AARCH64"), (32, "EM_ARM")}}
_TYPES = {"ET_EXEC": "executable", "ET_DYN": "shared object", "ET_REL": "object file", "ET_CORE": "core dump"}


class ReadLimit(Exception):
    """A file's reading went past :data:`READ_BUDGET` bytes or :data:`TIME_BUDGET_S` seconds."""


class BoundedReader:
    """A read-only file stream (``read``, ``seek``, ``tell``) that counts bytes and time.

    Args:
        fh: a binary file opened for reading (a regular file).
        budget: bytes that may be read in all; seconds: wall time from now.

    Raises (from ``read``):
        ReadLimit: the budget or the time is spent.
    """

    def __init__(self, fh, budget: int = READ_BUDGET, seconds: float = TIME_BUDGET_S):
        self._fh = fh
        self.size = os.fstat(fh.fileno()).st_size
        self.left = budget
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._fh.seek(offset, whence)

    def tell(self) -> int:
        return self._fh.tell()

    def read(self, n: int = -1) -> bytes:
        if time.monotonic() > self.deadline:
            raise ReadLimit(f"reading it took longer than {self.seconds:g} s")
        room = max(0, self.size - self._fh.tell())
        n = room if n is None or n < 0 else min(n, room)
        if n > self.left:
            raise ReadLimit(f"reading it needed more than {READ_BUDGET >> 20} MiB")
        data = self._fh.read(n)
        self.left -= len(data)
        return data

    def read_at(self, offset: int, n: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` (fewer at the end of the file; none past it)."""
        if offset < 0 or offset >= self.size:
            return b""
        self._fh.seek(offset)
        return self.read(n)

    def cstring(self, offset: int, limit: int = MAX_NAME) -> str | None:
        """The NUL-terminated string at ``offset`` (at most ``limit`` bytes), as text with undecodable
        bytes replaced; None when it has no NUL within the limit or lies outside the file."""
        raw = self.read_at(offset, limit)
        end = raw.find(b"\0")
        return None if end < 0 else raw[:end].decode("utf-8", errors="replace")


def show(text: str) -> str:
    """``text`` (a path or name from the command line or a file) safe to print on one line:
    undecodable bytes as ``\\xNN``, control and bidi characters escaped."""
    return names.escape(environ.recordable(str(text)))


@dataclass(frozen=True)
class Elf:
    """What the kernel and the dynamic linker see of an ELF file.

    Attributes:
        bits: 32 or 64 (EI_CLASS).
        machine: "x86_64", "aarch64", "i386" ... or pyelftools' ``EM_*`` name.
        kind: "executable", "shared object", "object file", "core dump" or the ``ET_*`` value.
        interpreter: the ``PT_INTERP`` path; None for a statically linked program.
        needed: the ``DT_NEEDED`` names, in order (names that could not be read are left out).
        soname: ``DT_SONAME``, or None.
        refusal: why the kernel would not start it (a sentence), or None.
        damage: what could not be read where it does not stop the kernel (a sentence), or None.
    """

    bits: int
    machine: str
    kind: str
    interpreter: str | None = None
    needed: tuple[str, ...] = ()
    soname: str | None = None
    refusal: str | None = None
    damage: str | None = None


@dataclass(frozen=True)
class Program:
    """One command's program file.

    Attributes:
        given: the name as given (``argv[0]``).
        path: the file (``given``, or where ``PATH`` found it); None when not found.
        kind: "missing", "folder", "special", "not-executable", "unreadable", "elf", "script",
            "macho" or "other".
        elf: :class:`Elf` for an ELF file.
        shebang: the words of a script's ``#!`` line.
        interpreter: for a script, the :class:`Program` the kernel runs for it (through ``env``:
            the program env runs).
        secure: why the dynamic linker runs it in secure-execution mode, or None.
        refusal: why it cannot be started (one line, naming it and the cause), or None.
    """

    given: str
    path: str | None
    kind: str
    elf: Elf | None = None
    shebang: tuple[str, ...] = ()
    interpreter: Program | None = None
    secure: str | None = None
    refusal: str | None = field(default=None)

    def image(self) -> Program:
        """The program the dynamic linker loads in the end: this one, or its script's interpreter."""
        p = self
        while p.interpreter is not None:
            p = p.interpreter
        return p

    def label(self) -> str:
        """How messages name it: ``'NAME'`` (printable)."""
        return f"'{show(self.given)}'"


_MACHO = (b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")


def _resolve(given: str, env_path: str | None) -> str | None:
    if "/" in given:
        return given if os.path.lexists(given) else None
    if not given:
        return None
    return shutil.which(given, mode=os.F_OK, path=env_path)


@contextlib.contextmanager
def _open_regular(path: str):
    """A :class:`BoundedReader` of a regular file (never blocks on a FIFO); None when it cannot be."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        yield None
        return
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:  # a folder, FIFO or device: never read
        os.close(fd)
        yield None
        return
    with os.fdopen(fd, "rb", buffering=0) as fh:
        yield BoundedReader(fh)


def inspect(given: str, env_path: str | None = None, _depth: int = 0) -> Program:
    """What ``given`` (``argv[0]`` of a command) is, and why it cannot be started if so.

    Args:
        given: a path (with a slash) or a name looked up in ``env_path`` (default ``$PATH``).

    Returns:
        A :class:`Program`; never raises (an unreadable or damaged file is described).
    """
    path = _resolve(given, env_path)
    label = f"'{show(given)}'"
    if path is None:
        where = "" if "/" in given else " in PATH"
        return Program(given, None, "missing", refusal=f"{label}: not found{where}")
    try:
        st = os.stat(path)
    except OSError as exc:
        why = "a link to nowhere" if os.path.islink(path) else (exc.strerror or "cannot be read")
        return Program(given, path, "missing", refusal=f"{label}: {why}")
    if stat.S_ISDIR(st.st_mode):
        return Program(given, path, "folder", refusal=f"{label}: it is a folder, not a program")
    if not stat.S_ISREG(st.st_mode):
        return Program(given, path, "special", refusal=f"{label}: not a regular file (a device, FIFO or socket)")
    if not os.access(path, os.X_OK):
        noexec = False
        with contextlib.suppress(OSError):
            noexec = bool(os.statvfs(path).f_flag & getattr(os, "ST_NOEXEC", 8))
        why = ("its file system is mounted noexec (no program there can be started)" if noexec
               else f"not executable (mode {stat.S_IMODE(st.st_mode):04o}; chmod +x it)")
        return Program(given, path, "not-executable", refusal=f"{label}: {why}")
    secure = _secure_execution(path, st)
    with _open_regular(path) as reader:
        head = b""
        if reader is not None:
            with contextlib.suppress(OSError, ReadLimit):
                head = reader.read_at(0, SHEBANG_BYTES)
        if reader is None or (not head and st.st_size > 0):
            # executable but not readable: the kernel may still run an ELF file; let it decide
            return Program(given, path, "unreadable", secure=secure)
        if head.startswith(b"#!"):
            return _script(given, path, head, env_path, _depth)
        if head.startswith(b"\x7fELF"):
            elf = read_elf(reader)
            refusal = f"{label}: {elf.refusal}" if elf.refusal else None
            return Program(given, path, "elf", elf=elf, secure=secure, refusal=refusal)
    if head.startswith(_MACHO):
        return Program(given, path, "macho")
    return Program(given, path, "other",
                   refusal=f"{label}: not an executable format (no #! line and not a program for this machine)")


def _script(given: str, path: str, head: bytes, env_path: str | None, depth: int) -> Program:
    """A ``#!`` script: the interpreter the kernel runs (fs/binfmt_script.c), followed."""
    label = f"'{show(given)}'"
    # the kernel's split: the interpreter ends at a space or tab, the rest (trimmed) is one argument;
    # a carriage return is part of the name (a script saved with Windows line endings)
    line = head[2:].split(b"\n", 1)[0].strip(b" \t")
    name, rest = (line.replace(b"\t", b" ").split(b" ", 1) + [b""])[:2]
    words = tuple(w.decode("utf-8", errors="surrogateescape") for w in (name, *rest.split()) if w)
    if not words:
        return Program(given, path, "script", refusal=f"{label}: its interpreter (#! line) was not found: (empty)")
    if depth >= MAX_SCRIPT_DEPTH:
        return Program(given, path, "script", shebang=words,
                       refusal=f"{label}: its #! interpreters nest deeper than {MAX_SCRIPT_DEPTH} levels")
    # the kernel opens the interpreter as a path (relative to the working folder), never through PATH
    interp = inspect(words[0] if "/" in words[0] else f"./{words[0]}", env_path, depth + 1)
    if interp.refusal:
        if interp.kind in ("missing", "folder", "not-executable", "special"):
            why = {"missing": "was not found", "folder": "is a folder",
                   "not-executable": "is not executable", "special": "is not a regular file"}[interp.kind]
            crlf = " (the #! line ends in a carriage return: Windows line endings)" if words[0].endswith("\r") else ""
            return Program(given, path, "script", shebang=words, interpreter=interp,
                           refusal=f"{label}: its interpreter (#! line) {why}: {show(words[0])}{crlf}")
        return Program(given, path, "script", shebang=words, interpreter=interp,
                       refusal=f"{label}: its interpreter (#! line) {show(words[0])} cannot run: {interp.refusal}")
    if Path(words[0]).name == "env" and interp.kind != "script":
        target = _env_target(words[1:])
        if target is not None:
            found = inspect(target, env_path, depth + 1)
            if found.kind == "missing" and "/" not in target:
                return Program(given, path, "script", shebang=words, interpreter=interp,
                               refusal=f"{label}: its #! line runs '{show(target)}' through env, and "
                                       f"'{show(target)}' is not found in PATH")
            if found.refusal is None:
                interp = Program(interp.given, interp.path, interp.kind, interp.elf, interp.shebang, found,
                                 interp.secure)
    return Program(given, path, "script", shebang=words, interpreter=interp)


def _env_target(args: tuple[str, ...]) -> str | None:
    """The program ``env ARGS`` runs: the first word that is no option and no NAME=VALUE; with
    ``-S`` (split string) the first word of what follows. None when env's options are unclear."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-S", "--split-string") or a.startswith("-S"):
            rest = ([a[2:]] if len(a) > 2 else []) + list(args[i + 1:])
            words = " ".join(rest).split()
            return _env_target(tuple(words)) if words else None
        if a in ("-u", "--unset", "-C", "--chdir"):
            i += 2
            continue
        if a.startswith("-") or ("=" in a and not a.startswith("/")):
            i += 1
            continue
        return a
    return None


def _secure_execution(path: str, st: os.stat_result) -> str | None:
    """Why the kernel sets AT_SECURE for this program (the dynamic linker's secure-execution mode),
    or None: set-user-ID to another user, set-group-ID to another group, or file capabilities,
    unless its file system is mounted nosuid or this process has no_new_privs."""
    try:
        if os.statvfs(path).f_flag & getattr(os, "ST_NOSUID", 2):
            return None
    except OSError:
        pass
    with contextlib.suppress(OSError):
        with open("/proc/self/status", "rb") as fh:
            if b"\nNoNewPrivs:\t1" in fh.read(1 << 16):
                return None
    mode = st.st_mode
    if mode & stat.S_ISUID and st.st_uid != os.getuid():
        return f"set-user-ID (owner uid {st.st_uid}, this user is uid {os.getuid()})"
    if mode & stat.S_ISGID and mode & stat.S_IXGRP and st.st_gid != os.getgid():
        return f"set-group-ID (group gid {st.st_gid}, this user's group is gid {os.getgid()})"
    if os.getuid() != 0 and hasattr(os, "getxattr"):
        with contextlib.suppress(OSError):
            if os.getxattr(path, "security.capability"):
                return "given file capabilities (security.capability)"
    return None


@contextlib.contextmanager
def open_elf(path: str | Path):
    """``(ELFFile, BoundedReader)`` of a regular ELF file, or None (not a regular readable ELF file,
    or a header pyelftools refuses). Every read goes through the reader's bounds."""
    from elftools.elf.elffile import ELFFile

    with _open_regular(str(path)) as reader:
        if reader is None:
            yield None
            return
        try:
            if reader.read_at(0, 4) != b"\x7fELF":
                yield None
                return
            elf = ELFFile(reader)
        except Exception:  # noqa: BLE001 - pyelftools raises assorted errors on a damaged header
            yield None
            return
        yield elf, reader


def read_elf(reader: BoundedReader) -> Elf:
    """The :class:`Elf` facts of the ELF file behind ``reader`` (the kernel's checks, then the
    dynamic linker's view); never raises."""
    from elftools.elf.elffile import ELFFile

    size = reader.size
    try:
        elf = ELFFile(reader)
    except ReadLimit as exc:
        return Elf(0, "?", "?", refusal=f"a damaged ELF file: {exc}")
    except Exception as exc:  # noqa: BLE001 - pyelftools: ELFError, struct/construct errors on a cut header
        cut = f"its header is cut at {size} bytes" if size < 64 else str(exc) or type(exc).__name__
        return Elf(0, "?", "?", refusal=f"a truncated or damaged ELF file ({show(cut)}): the kernel refuses it")
    h = elf.header
    bits, machine = elf.elfclass, _MACHINES.get(str(h["e_machine"]), str(h["e_machine"]))
    kind = _TYPES.get(str(h["e_type"]), str(h["e_type"]))
    base = Elf(bits, machine, kind)
    refusal = _kernel_refusal(elf, h, bits, kind)
    if refusal:
        return Elf(bits, machine, kind, refusal=refusal)
    try:
        interp, phdrs = _program_headers(elf, reader)
    except _Refused as exc:
        return Elf(bits, machine, kind, refusal=str(exc))
    except ReadLimit as exc:
        return Elf(bits, machine, kind, refusal=f"its program headers could not be read ({exc})")
    except Exception as exc:  # noqa: BLE001
        return Elf(bits, machine, kind, refusal=f"its program header table is damaged ({show(str(exc) or type(exc).__name__)})")
    needed, soname, damage = _dynamic(elf, reader, phdrs)
    return Elf(base.bits, base.machine, base.kind, interp, needed, soname, None, damage)


class _Refused(Exception):
    """The kernel would refuse the file (the message says why)."""


def _kernel_refusal(elf, h, bits: int, kind: str) -> str | None:
    """fs/binfmt_elf.c's first checks: type, machine, program header entry size and count."""
    if kind not in ("executable", "shared object"):
        what = {"object file": "an object file (ET_REL), not a program: link it first",
                "core dump": "a core dump, not a program"}.get(kind, f"an ELF file of type {kind}, not a program")
        return what
    host = platform.machine()
    runs = _HOST_RUNS.get(host)
    if runs is not None and (bits, str(h["e_machine"])) not in runs and not _binfmt_misc_elf():
        name = _MACHINES.get(str(h["e_machine"]), str(h["e_machine"]))
        return f"an ELF program for {name} ({bits}-bit); this machine runs {host} programs"
    if runs is not None and not elf.little_endian:
        return f"a big-endian ELF program; this machine ({host}) runs little-endian programs"
    want = 56 if bits == 64 else 32
    if h["e_phentsize"] != want:
        return f"a damaged ELF file: program header entries of {h['e_phentsize']} bytes (expected {want})"
    count = h["e_phnum"]
    if count == 0 or count * want > MAX_PHDR_BYTES:
        return f"a damaged ELF file: {count} program headers (the kernel takes 1..{MAX_PHDR_BYTES // want})"
    return None


def _binfmt_misc_elf() -> bool:
    """Whether binfmt_misc has an enabled handler for ELF files (an emulator such as qemu-user):
    then a program for another machine may still start."""
    folder = Path("/proc/sys/fs/binfmt_misc")
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry.name in ("register", "status"):
                continue
            with contextlib.suppress(OSError):
                text = entry.read_bytes()[:4096]
                if text.startswith(b"enabled") and b"magic 7f454c46" in text:
                    return True
    return False


def _program_headers(elf, reader: BoundedReader) -> tuple[str | None, list]:
    """The program interpreter and the program headers, with the kernel's PT_INTERP checks.

    Raises:
        _Refused: the table runs past the file, or PT_INTERP is refused or names a missing file.
    """
    h = elf.header
    end = h["e_phoff"] + h["e_phnum"] * h["e_phentsize"]
    if end > reader.size:
        raise _Refused(f"a truncated ELF file: its program headers end at byte {end}, the file has {reader.size}")
    # parsed from the table alone (pyelftools' segment objects consult the sections, which the kernel never reads)
    entry = elf.structs.Elf_Phdr
    size = entry.sizeof()
    raw = reader.read_at(h["e_phoff"], h["e_phnum"] * size)
    phdrs = [entry.parse(raw[i * size:(i + 1) * size]) for i in range(h["e_phnum"])]
    interp = None
    for ph in phdrs:
        if ph["p_type"] != "PT_INTERP":
            continue
        n, off = ph["p_filesz"], ph["p_offset"]
        if n < 2 or n > PATH_MAX:
            raise _Refused(f"a damaged ELF file: its program interpreter (PT_INTERP) is {n} bytes long")
        raw = reader.read_at(off, n)
        if len(raw) < n:
            raise _Refused("a truncated ELF file: its program interpreter (PT_INTERP) runs past the end")
        if raw[-1:] != b"\0":
            raise _Refused("a damaged ELF file: its program interpreter (PT_INTERP) does not end in NUL")
        interp = os.fsdecode(raw[:-1].split(b"\0", 1)[0])
        if not os.path.isfile(interp):
            raise _Refused(f"its program interpreter {show(interp)} (PT_INTERP) was not found: it was built for "
                           "another system (another C library or distribution)")
        break  # the kernel uses the first
    return interp, phdrs


def _dynamic(elf, reader: BoundedReader, phdrs: list) -> tuple[tuple[str, ...], str | None, str | None]:
    """``(DT_NEEDED names, DT_SONAME, damage)`` from PT_DYNAMIC, with strings found through
    DT_STRTAB mapped by the PT_LOAD segments (as ld.so finds them, sections play no part)."""
    dyn = next((p for p in phdrs if p["p_type"] == "PT_DYNAMIC"), None)
    if dyn is None:
        return (), None, None
    try:
        entry = elf.structs.Elf_Dyn
        size = entry.sizeof()
        count = min(dyn["p_filesz"] // size, MAX_DYNAMIC)
        raw = reader.read_at(dyn["p_offset"], count * size)
        tags = []
        for i in range(len(raw) // size):
            t = entry.parse(raw[i * size:(i + 1) * size])
            if t["d_tag"] == "DT_NULL":
                break
            tags.append((t["d_tag"], t["d_val"]))
        strtab = next((v for k, v in tags if k == "DT_STRTAB"), None)
        base = _file_offset(phdrs, strtab) if strtab is not None else None
        if base is None:
            wanted = [k for k, _ in tags if k in ("DT_NEEDED", "DT_SONAME")]
            return (), None, ("its dynamic string table (DT_STRTAB) lies outside the file" if wanted else None)
        needed, soname, bad = [], None, 0
        for k, v in tags:
            if k not in ("DT_NEEDED", "DT_SONAME"):
                continue
            s = reader.cstring(base + v)
            if s is None:
                bad += 1
            elif k == "DT_NEEDED":
                needed.append(s)
            else:
                soname = s
        damage = f"{bad} library name(s) of its dynamic section point outside the file" if bad else None
        return tuple(needed), soname, damage
    except ReadLimit as exc:
        return (), None, f"its dynamic section could not be read ({exc})"
    except Exception as exc:  # noqa: BLE001 - pyelftools' struct errors on a damaged table
        return (), None, f"its dynamic section is damaged ({show(str(exc) or type(exc).__name__)})"


def _file_offset(phdrs: list, vaddr: int) -> int | None:
    """The file offset of virtual address ``vaddr`` through the PT_LOAD segments; None outside them."""
    for p in phdrs:
        if p["p_type"] == "PT_LOAD" and p["p_vaddr"] <= vaddr < p["p_vaddr"] + p["p_filesz"]:
            return vaddr - p["p_vaddr"] + p["p_offset"]
    return None
