"""What a CUDA program was built for: the architectures its fatbins embed, and a static runtime.

A lower compute capability changes what the application *chooses*; its own kernels were
compiled for the architectures its fatbins hold (issue 22, "Honest limits"). This module
reads them, without a GPU and without NVIDIA's tools, so ``capshim run`` can say in its
status what was lowered and what the code was built for; and it detects an executable that
links the CUDA runtime statically, which an ``LD_PRELOAD`` shim cannot reach (the shim then
stays inert: never a shim result).

Pure Python, import-light: the ELF sections come from LIEF (imported on first use: an
optional dependency, ``pip install 'capshim[macos]'``); the fatbin containers are read with
``struct`` through file offsets, so a 2 GB ``libtorch_cuda.so`` is never read whole.

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
import struct
from dataclasses import dataclass
from pathlib import Path

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


def _lief():
    """LIEF, imported on first use (heavy optional library; this module stays import-light)."""
    try:
        import lief
    except ImportError:
        return None
    lief.logging.disable()
    return lief


def _elf(path: Path):
    """The LIEF ELF binary of ``path``, or None: not a regular readable file, not ELF, LIEF missing
    or unable to parse it (checked by magic first: LIEF is never handed random bytes)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64) if os.path.isfile(path) else b""
            if head[:4] != b"\x7fELF" or len(head) < 52:  # 52: the ELF32 header, 64: ELF64
                return None
    except OSError:
        return None
    lief = _lief()
    if lief is None:
        return None
    cfg = lief.ELF.ParserConfig()
    cfg.parse_relocations = False
    cfg.parse_notes = False
    cfg.parse_overlay = False
    try:
        return lief.ELF.parse(str(path), cfg)
    except Exception:  # noqa: BLE001 - LIEF raises assorted errors on broken files; a broken file is None
        return None


def embedded_architectures(path: str | Path) -> CodeTargets | None:
    """The architectures the fatbins of an ELF file (executable or shared library) hold.

    Args:
        path: the file.

    Returns:
        :class:`CodeTargets` (empty tuples when the file has no fatbin section: no CUDA code of its
        own); None when the file is not an ELF file LIEF can read, or its fatbin is broken (a status
        line then says nothing about it rather than something wrong).
    """
    binary = _elf(Path(path))
    if binary is None:
        return None
    entries: list[FatbinEntry] = []
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            for name in FATBIN_SECTIONS:
                sec = binary.get_section(name)
                if sec is None or sec.type == sec.TYPE.NOBITS:
                    continue
                if sec.offset + sec.size > size:
                    return None
                entries += _walk(_reader(fh), sec.offset, sec.size)
    except (OSError, FatbinError):
        return None
    sass = tuple(sorted({e.arch for e in entries if e.kind == "elf"}))
    ptx = tuple(sorted({e.arch for e in entries if e.kind == "ptx"}))
    return CodeTargets(sass, ptx)


def static_runtime(path: str | Path) -> bool | None:
    """Whether an ELF executable links the CUDA runtime statically (``nvcc``'s default, ``-cudart static``).

    ``LD_PRELOAD`` interposes only calls that go through the dynamic linker; a runtime linked
    into the executable calls itself directly, so the shim cannot change what it answers.

    The rule: no ``NEEDED`` entry names ``libcudart.so*``, and either the file defines one of
    :data:`RUNTIME_SYMBOLS` (its symbol table; a stripped file has none) or it has a fatbin
    section yet refers to no ``__cudaRegister*`` symbol it does not define (the runtime's
    registration entries, which every nvcc-built module calls: defined here, or gone with the
    symbol table of a stripped executable, means linked in). The runtime itself (``SONAME``
    ``libcudart.so*``) is the dynamic runtime the shim interposes, and an object file
    (``ET_REL``) links nothing yet: both False. Checked against nvcc 13.0's executables
    (``-cudart static``, the default, and ``-cudart shared``; stripped too) and ``libcudart.so.13``.

    Returns:
        True (static runtime), False (dynamic runtime, an object file, or no CUDA at all),
        None (not an ELF file LIEF can read).
    """
    binary = _elf(Path(path))
    if binary is None:
        return None
    lief = _lief()
    if binary.header.file_type == lief.ELF.Header.FILE_TYPE.REL:
        return False
    soname = binary.get(lief.ELF.DynamicEntry.TAG.SONAME)
    if soname is not None and str(getattr(soname, "name", "")).startswith("libcudart.so"):
        return False
    if any(lib.startswith("libcudart.so") for lib in binary.libraries):
        return False
    defined = imported = False
    for sym in binary.symbols:
        undefined = sym.shndx == 0  # SHN_UNDEF
        if sym.name in RUNTIME_SYMBOLS and not undefined and sym.value:
            defined = True
        elif sym.name.startswith("__cudaRegister") and undefined:
            imported = True
    fatbin = any(binary.get_section(n) is not None for n in FATBIN_SECTIONS)
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
