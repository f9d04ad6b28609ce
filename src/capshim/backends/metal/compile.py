"""Metal shim: the one source list, the build commands (macOS, zig cross build, Linux stand-in) and the cached builds.

The facts behind the constants are in :mod:`capshim.backends.metal`'s docstring.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

from capshim import paths
from capshim.errors import BuildError
from capshim.native import build as nb

NATIVE_DIR = Path(__file__).resolve().parents[2] / "native" / "metal"
# The one source list of every build: the macOS build (xcrun clang), the
# cross build from Linux (zig cc) and the Linux stand-in build (gcc, GNU
# libobjc). HEADERS are hashed into the cache key with them. The status-event
# writer (status.c/.h) and the device-name rule (devname.h) are shared with
# the other shims (one writer, one schema, one rule) and live in
# native/common; builds copy every file flat.
SHARED_DIR = NATIVE_DIR.parent / "common"
SHARED_FILES = ("status.c", "status.h", "devname.h")
SHIM_SOURCES = ("metal_shim.c", "metal_config.c", "status.c")
PROBE_SOURCES = ("metal_probe.c",)
STANDIN_SOURCES = ("standin_metal.m",)
HEADERS = ("metal_config.h", "metal_query.h", "metal_vars.h", "status.h", "devname.h")
IS_MACOS = sys.platform == "darwin"

DYLIB_NAME = "libcapshim-metal.dylib"
SO_NAME = "libcapshim-metal.so"
PROBE_NAME = "capshim-metal-probe"
STANDIN_NAME = "libcapshim_metal_standin.so"
INSTALL_NAME = f"@rpath/{DYLIB_NAME}"

# Every build: C in the GNU dialect (dladdr, getprogname,
# program_invocation_short_name) with native/build.py's warnings (errors).
WARN_FLAGS = ["-std=gnu11", *nb.WARNINGS]
MACOS_MIN_VERSION = "13.0"
MACOS_ARCHS = ["-arch", "arm64", "-arch", "arm64e"]
# What the macOS shim links (both builds), and the install names dyld binds
# them to (Apple: /usr/lib/libobjc.A.dylib; Metal.framework, Versions/A).
SHIM_LINK = ["-lobjc", "-framework", "Metal"]
PROBE_LINK = ["-lobjc"]
LIBSYSTEM_INSTALL_NAME = "/usr/lib/libSystem.B.dylib"
OBJC_INSTALL_NAME = "/usr/lib/libobjc.A.dylib"
METAL_INSTALL_NAME = "/System/Library/Frameworks/Metal.framework/Versions/A/Metal"
# Cross targets (zig cc names) -> the folder of each; zig has no arm64e.
CROSS_TARGETS = {"arm64": f"aarch64-macos.{MACOS_MIN_VERSION}",
                 "x86_64": f"x86_64-macos.{MACOS_MIN_VERSION}"}
ARM64E_NOTE = ("arm64e (the slice that /usr/bin programs and other arm64e processes load) "
               "can only be built on a Mac with Xcode: capshim build --api metal there")


def _variables(macro: str) -> dict[str, str]:
    """Profile key -> variable name, from the X(key, "NAME") lines of ``macro``
    in ``native/metal/metal_vars.h``: the one place the names are written."""
    text = (NATIVE_DIR / "metal_vars.h").read_text()
    body = text[text.index(f"#define {macro}(X)"):].split("\n\n", 1)[0]
    return dict(re.findall(r'X\((\w+), "(\w+)"\)', body))


# Profile key -> the shim's variable, capshim spelling and Cua/Lume spelling.
CONFIG_VARIABLES = _variables("CAPSHIM_METAL_VARIABLES")
LUME_VARIABLES = _variables("CAPSHIM_METAL_LUME_VARIABLES")

# Strings that must not be in the shim (Cua's release checks): timing
# interposition, clock functions, mesh/argument-type/sync research switches,
# broad feature-profile or family-range switches.
DENY_LIST = (
    "GPU_HOOK_TIME_SCALE", "mach_absolute_time", "clock_gettime", "gettimeofday",
    "MESH_FALLBACK", "IGNORE_ARGTYPE", "SYNC_COMPUTE", "LUME_METAL_FEATURE_PROFILE",
    "featureProfile", "LUME_METAL_FAMILY_MAX",
)

# Paths whose binaries SIP protects: dyld ignores DYLD_* there (Apple,
# "System Integrity Protection Guide").
SIP_PREFIXES = ("/usr/bin/", "/usr/sbin/", "/usr/libexec/", "/bin/", "/sbin/", "/System/",
                "/Library/Apple/")

SKIPPED = "skipped (macOS only)"

# What the shim's Mach-O may import, as C names (macho.c_name): the
# Objective-C runtime functions it calls (<objc/runtime.h>; all of them must
# be imported), the two Metal functions it interposes (both must be), and the
# C library functions it calls. Compilers may add the _FORTIFY_SOURCE
# variants (__NAME_chk) of these, the stack protector and dyld's binder.
MACHO_OBJC_IMPORTS = frozenset({
    "class_addMethod", "class_getInstanceMethod", "class_getMethodImplementation",
    "class_getName", "class_getSuperclass", "class_respondsToSelector",
    "method_getImplementation", "method_getTypeEncoding", "method_setImplementation",
    "objc_lookUpClass", "object_getClass", "sel_registerName",
})
INTERPOSED = ("MTLCreateSystemDefaultDevice", "MTLCopyAllDevices")
MACHO_LIBC_IMPORTS = frozenset({
    "__error", "bzero", "__bzero", "close", "dladdr", "getenv", "getpid", "getprogname",
    "fstat", "memcpy", "memmove", "memset", "open", "pthread_once", "strerror", "pthread_mutex_lock", "pthread_mutex_unlock",
    "setenv", "snprintf", "stat", "strchr", "strcmp", "strcspn", "strlen", "strtoull",
    "unsetenv", "vsnprintf", "write", "__stack_chk_fail", "__stack_chk_guard",
    "dyld_stub_binder",
})
# Symbols the linker itself defines in every image (the Mach-O header, the
# DSO handle): not the shim's. Anything else exported is a finding.
MACHO_LINKER_EXPORTS = frozenset({"_mh_dylib_header", "_mh_execute_header", "__dso_handle"})


# ---- build ------------------------------------------------------------------

def _shim_command(cc: list[str], platform: list[str], shared: list[str], link: list[str],
                  out: str, opt: list[str]) -> list[str]:
    return [*cc, *platform, *WARN_FLAGS, nb.VERSION_DEFINE, *opt, "-fvisibility=hidden", *shared, *SHIM_SOURCES,
            *link, "-o", out]


def _probe_command(cc: list[str], platform: list[str], link: list[str], out: str,
                   opt: list[str]) -> list[str]:
    return [*cc, *platform, *WARN_FLAGS, *opt, *PROBE_SOURCES, *link, "-o", out]


def _macos_commands() -> list[list[str]]:
    cc, plat = ["xcrun", "clang"], [*MACOS_ARCHS, f"-mmacosx-version-min={MACOS_MIN_VERSION}"]
    return [
        _shim_command(cc, plat, ["-dynamiclib", "-install_name", INSTALL_NAME], SHIM_LINK,
                      DYLIB_NAME, ["-O2"]),
        ["codesign", "--force", "--sign", "-", DYLIB_NAME],
        _probe_command(cc, ["-arch", "arm64", f"-mmacosx-version-min={MACOS_MIN_VERSION}"],
                       PROBE_LINK, PROBE_NAME, ["-O2"]),
        ["codesign", "--force", "--sign", "-", PROBE_NAME],
    ]


def _cross_commands() -> list[list[str]]:
    # The same link flags as on a Mac; -L/-F find the text stubs
    # (_stubs) that stand in for libobjc and Metal, which the zig
    # toolchain does not carry. Without -undefined dynamic_lookup a symbol
    # that no linked library exports fails the link.
    cc = [sys.executable, "-m", "ziglang", "cc"]
    cmds = []
    for arch, target in CROSS_TARGETS.items():
        plat = ["-target", target, "-L", "stubs", "-F", "stubs"]
        cmds.append(_shim_command(cc, plat, ["-dynamiclib", "-install_name", INSTALL_NAME], SHIM_LINK,
                                  f"macos-{arch}/{DYLIB_NAME}", ["-O2"]))
        cmds.append(_probe_command(cc, plat, PROBE_LINK, f"macos-{arch}/{PROBE_NAME}", ["-O2"]))
    return cmds


def _tbd(install_name: str, symbols) -> str:
    """A text-based dylib stub (TAPI ``tbd-version: 4``, the format of the
    macOS SDK's ``.tbd`` files) exporting ``symbols`` (C names)."""
    targets = ", ".join(f"{a}-macos" for a in CROSS_TARGETS)
    names = ", ".join(f"_{n}" for n in sorted(symbols))
    return (f"--- !tapi-tbd\ntbd-version: 4\ntargets: [ {targets} ]\ninstall-name: '{install_name}'\n"
            f"exports:\n  - targets: [ {targets} ]\n    symbols: [ {names} ]\n...\n")


def _stubs() -> dict[str, str]:
    """Relative path -> text of the link stubs for the cross build: libobjc
    exporting ``MACHO_OBJC_IMPORTS``, Metal exporting ``INTERPOSED``."""
    return {"stubs/libobjc.tbd": _tbd(OBJC_INSTALL_NAME, MACHO_OBJC_IMPORTS),
            "stubs/Metal.framework/Metal.tbd": _tbd(METAL_INSTALL_NAME, INTERPOSED)}


def _linux_commands(cc: str = "gcc", opt: list[str] | None = None) -> list[list[str]]:
    opt = opt or ["-O2"]
    so = ["-fPIC", "-shared"]
    standin = [cc, *WARN_FLAGS, *opt, "-fvisibility=hidden", *so, *STANDIN_SOURCES,
               "-lobjc", "-lpthread"]
    return [
        _shim_command([cc], [], so, ["-lobjc", "-ldl", "-lpthread"], SO_NAME, opt),
        _probe_command([cc], [], ["-lobjc", "-ldl"], PROBE_NAME, opt),
        [*standin, "-o", f"standin/full/{STANDIN_NAME}"],
        [*standin[:1], "-DSTANDIN_NO_PRIVATE", *standin[1:], "-o", f"standin/noprivate/{STANDIN_NAME}"],
    ]


def compile_into(dest: Path, commands: list[list[str]]) -> None:
    """Copy the sources into ``dest`` and run ``commands`` there (relative paths,
    so that the commands, and with them the cache key, name no folder).

    Raises:
        BuildError: naming the failing command.
    """
    for name, path in zip(_names(), _sources()):
        (dest / name).write_bytes(path.read_bytes())
    for cmd in commands:
        out = cmd[cmd.index("-o") + 1] if "-o" in cmd else None
        if out and "/" in out:
            (dest / out).parent.mkdir(parents=True, exist_ok=True)
        nb.run_compiler(cmd, dest)


def _names() -> list[str]:
    return list(dict.fromkeys((*SHIM_SOURCES, *PROBE_SOURCES, *STANDIN_SOURCES, *HEADERS)))


def _src(names) -> list[str]:
    """Absolute paths of source ``names`` (the shared status files from native/common)."""
    return [str((SHARED_DIR if n in SHARED_FILES else NATIVE_DIR) / n) for n in names]


def _sources() -> list[Path]:
    return [Path(p) for p in _src(_names())]


def _platform_commands() -> list[list[str]]:
    return _macos_commands() if IS_MACOS else _linux_commands()


def cache_dir() -> Path:
    """Where ``build`` puts the artifacts of the current sources and commands.

    ``native/build.py``'s ``build_dir``: the capshim cache +
    ``/native/metal-<12 hex>``, the hex covering the sources and the compile
    commands. Computing it builds nothing.
    """
    return nb.build_dir("metal", _sources(), _platform_commands())


def cross_dir() -> Path:
    """Where ``build_cross`` puts the macOS binaries (``.../native/metal-macos-<12 hex>``)."""
    return nb.build_dir("metal-macos", _sources(), [*_cross_commands(), *map(list, _stubs().items())])


def _artifacts(root: Path) -> dict[str, Path]:
    if IS_MACOS:
        return {"shim": root / DYLIB_NAME, "probe": root / PROBE_NAME, "sums": root / "SHA256SUMS"}
    return {"shim": root / SO_NAME, "probe": root / PROBE_NAME,
            "standin": root / "standin" / "full" / STANDIN_NAME,
            "standin_noprivate": root / "standin" / "noprivate" / STANDIN_NAME,
            "sums": root / "SHA256SUMS"}


def _cross_artifacts(root: Path) -> dict[str, Path]:
    arts = {}
    for arch in CROSS_TARGETS:
        arts[f"shim-{arch}"] = root / f"macos-{arch}" / DYLIB_NAME
        arts[f"probe-{arch}"] = root / f"macos-{arch}" / PROBE_NAME
    arts["sums"] = root / "SHA256SUMS"
    return arts


def _write_sums(root: Path, files: list[Path]) -> None:
    paths.write_sums(root, [f.relative_to(root).as_posix() for f in files])


def _build_into(final: Path, commands: list[list[str]], arts: dict[str, Path], force: bool,
                files: dict[str, str] | None = None, repair: bool = True) -> dict[str, Path]:
    if not force and all(p.is_file() for p in arts.values()):
        listed = [p.relative_to(final).as_posix() for k, p in arts.items() if k != "sums"]
        if not repair or not paths.verified_sums(final, listed):
            return arts
        # a cached file no longer matches its SHA256SUMS (corrupted, edited): build again
        force = True
    with nb.staging(final) as tmp:  # never left behind; a full cache disk is exit 4 naming the file
        for rel, text in (files or {}).items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text)
        compile_into(tmp, commands)
        _write_sums(tmp, [tmp / p.relative_to(final) for k, p in arts.items() if k != "sums"])
        for name in (*SHIM_SOURCES, *PROBE_SOURCES, *STANDIN_SOURCES, *HEADERS):
            (tmp / name).unlink()
        shutil.rmtree(tmp / "stubs", ignore_errors=True)
        if force and final.is_dir():
            shutil.rmtree(final)
        nb.publish(tmp, final)
    return arts


def build(force: bool = False, repair: bool = True) -> dict[str, Path]:
    """Compile the Metal shim and its probe into ``cache_dir()``.

    macOS: ``libcapshim-metal.dylib``, universal arm64 + arm64e,
    ``-mmacosx-version-min=13.0``, hidden visibility (exports nothing; path 2
    uses dyld's ``__interpose`` section), linked with Metal so that
    ``_MTLDevice`` exists when it loads, ad-hoc signed; and
    ``capshim-metal-probe`` (arm64, ad-hoc signed).
    Linux: the same shim source as ``libcapshim-metal.so`` against GNU libobjc
    (it exports only ``MTLCreateSystemDefaultDevice``/``MTLCopyAllDevices``,
    its ``LD_PRELOAD`` interposers), the probe, and the stand-in Metal
    library (``standin/full`` and ``standin/noprivate`` without
    ``_MTLDevice``) for tests and ``verify``.
    Both write ``SHA256SUMS``. Warnings are errors (``WARN_FLAGS``).

    Args:
        force: rebuild even when the artifacts of these sources exist.
        repair: build again when a cached file no longer matches its
            SHA256SUMS (``verify`` passes False: it reports the mismatch).

    Returns:
        name -> path: "shim", "probe", "sums" (and on Linux "standin",
        "standin_noprivate").

    Raises:
        BuildError: naming the failing command (compiler missing: on Debian
            ``apt-get install gcc gobjc``; on macOS the Xcode command line tools).
    """
    final = cache_dir()
    return _build_into(final, _platform_commands(), _artifacts(final), force, repair=repair)


def build_cross(force: bool = False) -> dict[str, Path]:
    """Cross-build the macOS shim and probe on any OS with ``zig cc`` (``ziglang``).

    The same sources, warnings (as errors) and install name as the macOS
    build, thin, for ``aarch64-macos`` and ``x86_64-macos`` (minimum macOS
    13.0), into ``cross_dir()``: ``macos-arm64/`` and ``macos-x86_64/``, each
    with ``libcapshim-metal.dylib`` and ``capshim-metal-probe``, and
    ``SHA256SUMS``. Not built: arm64e (``ARM64E_NOTE``) and the signature
    (zig signs arm64 ad hoc; ``codesign`` runs only on a Mac). libobjc and
    Metal are linked as on a Mac (``SHIM_LINK``), through text stubs written
    from ``MACHO_OBJC_IMPORTS`` and ``INTERPOSED`` (``_stubs``): the
    toolchain carries none.

    Returns:
        name -> path: "shim-arm64", "probe-arm64", "shim-x86_64",
        "probe-x86_64", "sums".

    Raises:
        BuildError: ``ziglang`` is not installed (``pip install
            'capshim[macos]'``), or a compile command failed (named).
    """
    if importlib.util.find_spec("ziglang") is None:
        raise BuildError("--target macos needs the zig toolchain: pip install 'capshim[macos]' "
                         "(./setup.sh --dev installs it)")
    final = cross_dir()
    return _build_into(final, _cross_commands(), _cross_artifacts(final), force, _stubs())


