"""Read the facts ``capshim verify`` checks from a Mach-O file, on any OS.

The reader is LIEF (``lief``, https://lief.re, the ``lief.MachO`` API), so a
dylib built on a Mac, or cross-built here with ``zig cc``, can be checked on
Linux before it is copied into a guest. Facts of the format (Apple's
``<mach-o/loader.h>``): ``MH_DYLIB`` files carry their install name in
``LC_ID_DYLIB``; ``CPU_SUBTYPE_ARM64E`` is 2 (the top byte of the subtype
holds capability bits); ``LC_CODE_SIGNATURE`` holds the (ad-hoc or real)
signature; dyld's interposing tuples live in the ``__DATA,__interpose``
section as ``{replacement, replacee}`` pointer pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capshim import paths
from capshim.errors import UsageError

MAX_BYTES = 1 << 30
"""The largest Mach-O file read (a universal dylib or app binary is tens of MiB)."""

__all__ = ["MachOFacts", "read", "c_name"]

_ARM64E_SUBTYPE = 2
_SUBTYPE_MASK = 0x00FFFFFF


@dataclass(frozen=True)
class MachOFacts:
    """One architecture slice of a Mach-O file.

    Symbol names are as the file spells them (C names with their leading
    ``_``); ``c_name`` gives the C spelling.
    """

    path: Path
    arch: str                      # "arm64", "arm64e", "x86_64" or the LIEF CPU name
    file_type: str                 # "dylib", "execute", ... (MH_* without the prefix, lower case)
    install_name: str | None       # LC_ID_DYLIB, dylibs only
    min_os: str | None             # LC_BUILD_VERSION minos, "13.0.0"
    exports: tuple[str, ...]
    imports: tuple[str, ...]
    bound_to: dict[str, str | None]  # import -> the install name dyld binds it to (None: flat lookup)
    libraries: tuple[str, ...]     # LC_LOAD_DYLIB names (not the file's own id)
    sections: tuple[str, ...]      # "__DATA,__interpose", ...
    signed: bool                   # LC_CODE_SIGNATURE present (validity needs codesign on a Mac)
    interposed: tuple[str, ...]    # the replacee symbol of each __interpose tuple, in order
    data: bytes                    # the whole file, for string checks


def c_name(symbol: str) -> str:
    """The C name of a Mach-O symbol: one leading '_' off, a '$VARIANT' suffix off
    (``_stat$INODE64`` -> ``stat``); other names unchanged."""
    name = symbol[1:] if symbol.startswith("_") else symbol
    return name.split("$", 1)[0]


def _lief():
    try:
        import lief
    except ImportError:  # the 'macos' extra; ./setup.sh --dev installs it with 'test'
        raise UsageError("reading Mach-O files needs LIEF: pip install 'capshim[macos]' "
                         "(./setup.sh --dev installs it)") from None
    lief.logging.disable()
    return lief


def _arch(lief, binary) -> str:
    cpu = binary.header.cpu_type
    if cpu == lief.MachO.Header.CPU_TYPE.ARM64:
        sub = binary.header.cpu_subtype & _SUBTYPE_MASK
        return "arm64e" if sub == _ARM64E_SUBTYPE else "arm64"
    if cpu == lief.MachO.Header.CPU_TYPE.X86_64:
        return "x86_64"
    return str(cpu).split(".")[-1].lower()


def _interposed(binary) -> tuple[str, ...]:
    sec = binary.get_section("__DATA", "__interpose")
    if sec is None:
        return ()
    ptr = 8 if binary.header.magic.name.endswith("64") else 4
    binds = {b.address: b.symbol.name for b in binary.bindings if b.has_symbol}
    start = sec.virtual_address
    return tuple(binds.get(start + off + ptr, "?") for off in range(0, sec.size, 2 * ptr))


def _library(symbol) -> str | None:
    if not symbol.has_binding_info:
        return None
    info = symbol.binding_info
    return info.library.name if info.has_library else None


def read(path: Path) -> list[MachOFacts]:
    """The facts of every architecture slice of ``path`` (one for a thin file).

    Raises:
        UsageError: ``path`` is missing or not a Mach-O file (the message
            names the file), or LIEF is not installed.
    """
    lief = _lief()
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        data = paths.read_limited(path, MAX_BYTES)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    fat = lief.MachO.parse(str(path)) if lief.is_macho(str(path)) else None
    if fat is None or fat.size == 0:
        raise UsageError(f"{path}: not a Mach-O file")
    out = []
    for i in range(fat.size):
        b = fat.at(i)
        id_cmds = [c for c in b.commands if c.command == lief.MachO.LoadCommand.TYPE.ID_DYLIB]
        install = id_cmds[0].name if id_cmds else None
        minos = ".".join(map(str, b.build_version.minos)) if b.has_build_version else None
        out.append(MachOFacts(
            path=path,
            arch=_arch(lief, b),
            file_type=b.header.file_type.name.lower(),
            install_name=install,
            min_os=minos,
            exports=tuple(sorted(s.name for s in b.exported_symbols)),
            imports=tuple(sorted(s.name for s in b.imported_symbols)),
            bound_to={s.name: _library(s) for s in b.imported_symbols},
            libraries=tuple(lib.name for lib in b.libraries if lib.name != install),
            sections=tuple(f"{s.segment_name},{s.name}" for s in b.sections),
            signed=b.has_code_signature,
            interposed=_interposed(b),
            data=data,
        ))
    return out
