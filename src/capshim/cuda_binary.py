"""What a CUDA program was built for: the architectures its fatbins embed, and a static runtime.

A lower compute capability changes what the application *chooses*; its own kernels were
compiled for the architectures its fatbins hold (issue 22, "Honest limits"). This module
reads them, without a GPU and without NVIDIA's tools, so ``capshim run`` can say in its
status what was lowered and what the code was built for; and it detects an executable that
links the CUDA runtime statically, which an ``LD_PRELOAD`` shim cannot reach (the shim then
stays inert: never a shim result).

Pure Python, import-light: the ELF headers are parsed with pyelftools (imported on first use)
through :class:`capshim.program.BoundedReader`, which bounds every file's reads in bytes and
seconds; the fatbin containers and symbol tables are read with ``struct`` through file offsets,
so a 2 GB ``libtorch_cuda.so`` is never read whole and a hostile file costs at most the bounds.

The fatbin container format (NVIDIA does not document it; the offsets are those of
GrigoryEvko/nvopen-tools ``fatbin/FORMAT_SPECIFICATION.md`` at commit 3b50e20e, "reverse-engineered
from cuobjdump, validated against CUDA 11.x-13.x binaries", and agree with ZLUDA's
``FatbinHeader``/``FatbinFileHeader``). Little-endian throughout:

    container header (16 bytes)
      @0  u32 magic      0xBA55ED50
      @4  u16 version    1
      @6  u16 header size (16: the first entry follows it)
      @8  u64 fat size   bytes of the entries that follow the header
    entry header (``header size`` bytes: 64, 80 for sm_120+ PTX, 112 for sm_100+ ELF)
      @0  u16 kind       1 PTX, 2 ELF (cubin), 0x10 ELF (cuobjdump counts it as ELF too)
      @2  u16 version    0x0101
      @4  u32 header size
      @8  u64 payload size (padded to 8 bytes; the next entry starts at header size + this)
      @16 u32 payload size unpadded (compressed)
      @28 u32 sm architecture (major * 10 + minor: 75 is sm_75)

A section (``.nv_fatbin``) holds one or more containers back to back, each possibly followed
by zero padding up to an 8-byte boundary.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from capshim import program

__all__ = ["FatbinError", "FatbinEntry", "CodeTargets", "parse_fatbin", "read_fatbin", "read_entries",
           "embedded_architectures", "static_runtime", "status_line", "FATBIN_MAGIC", "FATBIN_SECTIONS"]

FATBIN_MAGIC = 0xBA55ED50
#: ELF sections that hold fatbin containers (nvcc: ``.nv_fatbin``; relocatable device code: ``__nv_relfatbin``).
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
KIND_PTX, KIND_ELF, KIND_ELF_ALT = 1, 2, 0x10
_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQ")          # kind, version, header size, padded payload size
ENTRY_MIN = 64
#: Largest entry header accepted (bytes): 112 is the largest seen (sm_100+ ELF); more is a broken file.
ENTRY_MAX = 4096
#: Most entries read from one section (libcublasLt.so.13 holds about 5,400: the spec above).
MAX_ENTRIES = 1_000_000
#: The largest sm number taken as an architecture (sm_120 is the newest in the source; room to grow).
MAX_ARCH = 1000
#: Symbols only the CUDA runtime defines: one defined in an executable means cudart is linked in.
RUNTIME_SYMBOLS = ("cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaDeviceGetAttribute",
                   "cudaMalloc", "__cudaRegisterFatBinary")


class FatbinError(ValueError):
    """A fatbin container that is not the format above (names the offset and what is wrong)."""


@dataclass(frozen=True)
class FatbinEntry:
    """One code object of a fatbin.

    Attributes:
        kind: "ptx", "elf" (a cubin: machine code) or "other" (an entry kind this reader does not know).
        arch: the sm architecture number (75 for sm_75 / compute_75).
        offset: the entry header's offset in the data given (bytes).
        payload_size: the payload's size in the file (bytes, padded to 8).
    """

    kind: str
    arch: int
    offset: int
    payload_size: int


@dataclass(frozen=True)
class CodeTargets:
    """The architectures a binary's fatbins hold: ``sass`` (machine code, sorted sm numbers) and
    ``ptx`` (PTX that the driver can compile for newer GPUs, sorted compute numbers)."""

    sass: tuple[int, ...]
    ptx: tuple[int, ...]

    def text(self) -> str:
        """``sm_75, sm_80, sm_90 (+PTX compute_90)``; ``no CUDA code`` when empty."""
        parts = ", ".join(f"sm_{a}" for a in self.sass)
        ptx = ", ".join(f"compute_{a}" for a in self.ptx)
        if parts and ptx:
            return f"{parts} (+PTX {ptx})"
        return parts or (f"PTX {ptx} only" if ptx else "no CUDA code")


def _walk(read_at, start: int, size: int, limit: int = MAX_ENTRIES) -> list[FatbinEntry]:
    """The entries of the containers in ``[start, start + size)``; ``read_at(offset, n)`` returns up to n bytes."""
    end = start + size
    pos = start
    out: list[FatbinEntry] = []
    while pos + _HEADER.size <= end:
        head = read_at(pos, _HEADER.size)
        if len(head) < _HEADER.size:
            raise FatbinError(f"offset {pos}: truncated container header")
        magic, _version, hsize, fat = _HEADER.unpack(head)
        if head[:8] == bytes(8):  # zero padding between containers (8-byte steps)
            pos += 8
            continue
        if magic != FATBIN_MAGIC:
            raise FatbinError(f"offset {pos}: magic 0x{magic:08x}, expected 0x{FATBIN_MAGIC:08X}")
        if hsize < _HEADER.size or hsize > ENTRY_MAX:
            raise FatbinError(f"offset {pos}: container header size {hsize} (expected 16)")
        body, stop = pos + hsize, pos + hsize + fat
        if stop > end:
            raise FatbinError(f"offset {pos}: container of {fat} bytes runs past the end ({end - body} left)")
        p = body
        while p + ENTRY_MIN <= stop:
            raw = read_at(p, 32)
            if len(raw) < 32:
                raise FatbinError(f"offset {p}: truncated entry header")
            kind, _ver, ehsize, payload = _ENTRY.unpack_from(raw)
            (arch,) = struct.unpack_from("<I", raw, 28)
            if ehsize < ENTRY_MIN or ehsize > ENTRY_MAX:
                raise FatbinError(f"offset {p}: entry header size {ehsize} (expected 64..{ENTRY_MAX})")
            if p + ehsize + payload > stop:
                raise FatbinError(f"offset {p}: entry of {payload} bytes runs past its container")
            name = "ptx" if kind == KIND_PTX else "elf" if kind in (KIND_ELF, KIND_ELF_ALT) else "other"
            if name != "other" and not 0 < arch < MAX_ARCH:
                raise FatbinError(f"offset {p}: architecture {arch} is no sm number")
            out.append(FatbinEntry(name, arch, p, payload))
            if len(out) > limit:
                raise FatbinError(f"more than {limit} entries")
            p += ehsize + payload
        pos = stop + (-(stop - start) % 8)
    if pos < end and read_at(pos, end - pos).strip(b"\0"):
        raise FatbinError(f"offset {pos}: truncated container header ({end - pos} bytes left)")
    return out


def parse_fatbin(data: bytes) -> list[FatbinEntry]:
    """The entries of the fatbin containers in ``data`` (a section's bytes, or a ``.fatbin`` file).

    Returns:
        The entries in file order (offsets into ``data``); empty for empty data.

    Raises:
        FatbinError: a bad magic, a truncated header, a size that runs past the data or its container,
            an entry header size outside 64..4096 bytes, an architecture outside 1..999.
    """
    data = bytes(data)
    return _walk(lambda off, n: data[off:off + n], 0, len(data))


def read_fatbin(path: str | Path) -> list[FatbinEntry]:
    """The entries of a standalone ``.fatbin`` file (what ``nvcc -fatbin`` writes).

    Raises:
        FatbinError: as :func:`parse_fatbin`.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        return _walk(_reader(fh), 0, size)


def read_entries(path: str | Path, offset: int, size: int) -> list[FatbinEntry]:
    """The entries of the fatbin containers in ``size`` bytes at ``offset`` of the file ``path`` (a section
    found by other means than LIEF, e.g. ``readelf -S``; offsets in the entries are file offsets).

    Raises:
        FatbinError: as :func:`parse_fatbin`, or the range runs past the file.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as fh:
        if offset < 0 or size < 0 or offset + size > os.fstat(fh.fileno()).st_size:
            raise FatbinError(f"{offset}+{size} runs past the end of {path}")
        return _walk(_reader(fh), offset, size)


def _reader(fh):
    def read_at(off: int, n: int) -> bytes:
        fh.seek(off)
        return fh.read(n)
    return read_at


#: Most section headers read from one file (a linked program has tens; more is a broken or hostile file).
MAX_SECTIONS = 1 << 16
#: Longest section name read (bytes).
MAX_SECTION_NAME = 256


@dataclass(frozen=True)
class _Section:
    name: str
    type: str
    offset: int
    size: int
    link: int
    entsize: int


def _sections(elf, reader) -> list[_Section]:
    """The section headers (bounded: :data:`MAX_SECTIONS`, the table within the file, names of at most
    :data:`MAX_SECTION_NAME` bytes); empty when the file has none.

    Raises:
        FatbinError: the table is damaged (names what); program.ReadLimit: the read bounds are spent.
    """
    h = elf.header
    if h["e_shoff"] == 0:
        return []
    shdr = elf.structs.Elf_Shdr
    size = shdr.sizeof()
    if h["e_shentsize"] != size:
        raise FatbinError(f"section header entries of {h['e_shentsize']} bytes (expected {size})")
    count = h["e_shnum"]
    if count == 0:  # more than 0xff00 sections: the count is section 0's sh_size (ELF gABI)
        first = reader.read_at(h["e_shoff"], size)
        count = shdr.parse(first)["sh_size"] if len(first) == size else 0
    if count > MAX_SECTIONS or h["e_shoff"] + count * size > reader.size:
        raise FatbinError(f"{count} section headers at offset {h['e_shoff']} (past the end, or over {MAX_SECTIONS})")
    raw = reader.read_at(h["e_shoff"], count * size)
    heads = [shdr.parse(raw[i * size:(i + 1) * size]) for i in range(count)]
    index = h["e_shstrndx"]
    if index == 0xFFFF and heads:  # SHN_XINDEX: the index is section 0's sh_link
        index = heads[0]["sh_link"]
    if count and not 0 < index < count:
        raise FatbinError(f"section name table {index} is not one of the {count} sections")
    names_at = heads[index]["sh_offset"] if count else 0
    out = []
    for hd in heads:
        name = reader.cstring(names_at + hd["sh_name"], MAX_SECTION_NAME)
        out.append(_Section(name or "", str(hd["sh_type"]), hd["sh_offset"], hd["sh_size"], hd["sh_link"],
                            hd["sh_entsize"]))
    return out


def embedded_architectures(path: str | Path) -> CodeTargets | None:
    """The architectures the fatbins of an ELF file (executable or shared library) hold.

    Reads are bounded (:class:`capshim.program.BoundedReader`: bytes and seconds per file).

    Args:
        path: the file.

    Returns:
        :class:`CodeTargets` (empty tuples when the file has no fatbin section: no CUDA code of its
        own); None when the file is not a readable ELF file, its tables are damaged, its fatbin is
        broken, or reading it would pass the bounds (a status line then says nothing about it rather
        than something wrong).
    """
    entries: list[FatbinEntry] = []
    with program.open_elf(path) as opened:
        if opened is None:
            return None
        elf, reader = opened
        try:
            for sec in _sections(elf, reader):
                if sec.name not in FATBIN_SECTIONS or sec.type == "SHT_NOBITS":
                    continue
                if sec.offset + sec.size > reader.size:
                    return None
                entries += _walk(reader.read_at, sec.offset, sec.size)
        except (OSError, FatbinError, program.ReadLimit):
            return None
        except Exception:  # noqa: BLE001 - pyelftools' struct errors on a damaged header table
            return None
    sass = tuple(sorted({e.arch for e in entries if e.kind == "elf"}))
    ptx = tuple(sorted({e.arch for e in entries if e.kind == "ptx"}))
    return CodeTargets(sass, ptx)


def _symbols(elf, reader, sections: list[_Section], names: tuple[str, ...], prefix: str) -> tuple[bool, bool]:
    """``(defined, imported)``: one of ``names`` is defined with a value, and a symbol starting with
    ``prefix`` is undefined, in the symbol tables (``.symtab``, ``.dynsym``). The string tables are
    searched for the names first (bytes), so only entries that point at them are looked at.

    Raises:
        program.ReadLimit: the read bounds are spent.
    """
    fmt = ("<" if elf.little_endian else ">") + ("IBBHQQ" if elf.elfclass == 64 else "IIIBBH")
    entsize = struct.calcsize(fmt)
    defined = imported = False
    for sec in sections:
        if sec.type not in ("SHT_SYMTAB", "SHT_DYNSYM") or not 0 < sec.link < len(sections):
            continue
        strtab = sections[sec.link]
        text = reader.read_at(strtab.offset, strtab.size)
        # a name may start inside a longer string (linkers merge string tails): any occurrence counts
        wanted = {m.start() for name in names for m in re.finditer(re.escape(name.encode() + b"\0"), text)}
        pre = {m.start() for m in re.finditer(re.escape(prefix.encode()), text)}
        if not wanted and not pre:
            continue
        table = reader.read_at(sec.offset, sec.size - sec.size % entsize)
        for sym in struct.iter_unpack(fmt, table):
            if elf.elfclass == 64:
                st_name, _info, _other, shndx, value, _size = sym
            else:
                st_name, value, _size, _info, _other, shndx = sym
            if st_name in wanted and shndx != 0 and value:
                defined = True
            elif st_name in pre and shndx == 0:
                imported = True
    return defined, imported


def static_runtime(path: str | Path) -> bool | None:
    """Whether an ELF executable links the CUDA runtime statically (``nvcc``'s default, ``-cudart static``).

    ``LD_PRELOAD`` interposes only calls that go through the dynamic linker; a runtime linked
    into the executable calls itself directly, so the shim cannot change what it answers.

    The rule: no ``NEEDED`` entry names ``libcudart.so*``, and either the file defines one of
    :data:`RUNTIME_SYMBOLS` (its symbol tables; a stripped file has none) or it has a fatbin
    section yet refers to no ``__cudaRegister*`` symbol it does not define (the runtime's
    registration entries, which every nvcc-built module calls: defined here, or gone with the
    symbol table of a stripped executable, means linked in). The runtime itself (``SONAME``
    ``libcudart.so*``) is the dynamic runtime the shim interposes, and an object file
    (``ET_REL``) links nothing yet: both False. Checked against nvcc 13.0's executables
    (``-cudart static``, the default, and ``-cudart shared``; stripped too) and ``libcudart.so.13``.
    ``NEEDED`` and ``SONAME`` are read as the dynamic linker reads them
    (:func:`capshim.program.read_elf`); every read is bounded.

    Returns:
        True (static runtime), False (dynamic runtime, an object file, or no CUDA at all),
        None (not a readable ELF file, damaged tables, or past the read bounds).
    """
    with program.open_elf(path) as opened:
        if opened is None:
            return None
        elf, reader = opened
        try:
            if elf.header["e_type"] == "ET_REL":
                return False
            facts = program.read_elf(reader)
            if (facts.soname or "").startswith("libcudart.so"):
                return False
            if any(lib.startswith("libcudart.so") for lib in facts.needed):
                return False
            sections = _sections(elf, reader)
            defined, imported = _symbols(elf, reader, sections, RUNTIME_SYMBOLS, "__cudaRegister")
        except (OSError, FatbinError, program.ReadLimit):
            return None
        except Exception:  # noqa: BLE001 - pyelftools' struct errors on a damaged header table
            return None
    fatbin = any(s.name in FATBIN_SECTIONS for s in sections)
    return defined or (fatbin and not imported)


def _cc(value: int) -> str:
    """A compute capability as major*10+minor -> ``"7.5"``."""
    return f"{value // 10}.{value % 10}"


def status_line(stock: int, lowered: int | None, targets: CodeTargets | None) -> str:
    """The status sentence: ``lowered 9.0 -> 7.5; code built for sm_75, sm_80, sm_86, sm_90 (+PTX compute_90)``.

    Args:
        stock: the device's compute capability, major*10+minor (90 for 9.0).
        lowered: what the profile answers (same unit), or None when it does not set it.
        targets: :func:`embedded_architectures` of the program, or None when unknown.
    """
    head = (f"lowered {_cc(stock)} -> {_cc(lowered)}" if lowered is not None and lowered < stock
            else f"compute capability {_cc(stock)} kept")
    if targets is None:
        return f"{head}; what the code was built for is unknown (no readable fatbin)"
    return f"{head}; code built for {targets.text()}"
