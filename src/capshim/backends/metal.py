"""Metal backend: build the shim, give the environment of one shimmed process,
probe the answers a process sees, warn about targets that drop the
injection, and verify the built artifacts.

What is verified where: on Linux the shim's logic is built against the GNU
Objective-C runtime (``gobjc``) and tested with stand-in device classes
(``native/metal/standin_metal.m``), injected with ``LD_PRELOAD``; on macOS the
same source is built as a universal (arm64, arm64e) dylib, ad-hoc signed,
and injected with ``DYLD_INSERT_LIBRARIES``; only there does it meet the real
``Metal.framework`` (the macOS CI workflow, ``.github/workflows/macos.yml``).
From Linux it is also cross-built for arm64 and x86_64 with ``zig cc``
(``build_cross``) and its Mach-O files are checked with LIEF
(``inspect_macho``, ``capshim verify --api metal --shim FILE``).

Facts this module relies on (docs/contracts.md, "Published figures" and "Reference facts: Metal"; trycua/cua
``libs/lume/metal-capability-shim``): the private
``-[_MTLDevice initGPUFamilySupport]`` runs when a device is set up; Apple
GPU families are 1001 (Apple1) .. 1009 (Apple9), Mac 2xxx, Common 3xxx,
Metal 5xxx (MTLGPUFamily); raising Metal3 (5001) makes MLX ask for a
residency set the paravirtual device cannot create; system binaries under
``/usr/bin`` are arm64e and refuse a thin arm64 insert; dyld drops
``DYLD_*`` variables for SIP-protected binaries and for hardened-runtime
binaries without the ``com.apple.security.cs.allow-dyld-environment-variables``
entitlement.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from capshim import jsonread, paths
from capshim import status as shim_status
from capshim.backends import Backend
from capshim.errors import BuildError, UsageError
from capshim.native import build as nb
from capshim.native.build import run_compiler

__all__ = [
    "NATIVE_DIR", "CONFIG_VARIABLES", "LUME_VARIABLES", "DENY_LIST", "cache_dir", "cross_dir", "build", "build_cross",
    "compile_into", "inspect_macho", "launch_env",
    "shim_env", "profile_warnings", "probe", "run_probe", "summarize_status",
    "warn_target", "verify", "MetalBackend", "BACKEND",
]

NATIVE_DIR = Path(__file__).resolve().parent.parent / "native" / "metal"
# The one source list of every build: the macOS build (xcrun clang), the
# cross build from Linux (zig cc) and the Linux stand-in build (gcc, GNU
# libobjc). HEADERS are hashed into the cache key with them. The status-event
# writer (status.c/.h) is shared with the Vulkan layer (one writer, one
# schema) and lives in native/vulkan; builds copy every file flat.
SHARED_DIR = NATIVE_DIR.parent / "vulkan"
SHARED_FILES = ("status.c", "status.h")
SHIM_SOURCES = ("metal_shim.c", "metal_config.c", "status.c")
PROBE_SOURCES = ("metal_probe.c",)
STANDIN_SOURCES = ("standin_metal.m",)
HEADERS = ("metal_config.h", "metal_query.h", "metal_vars.h", "status.h")
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
    return [*cc, *platform, *WARN_FLAGS, *opt, "-fvisibility=hidden", *shared, *SHIM_SOURCES,
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
    """Absolute paths of source ``names`` (the shared status files from native/vulkan)."""
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
                         "(./setup.sh installs it)")
    final = cross_dir()
    return _build_into(final, _cross_commands(), _cross_artifacts(final), force, _stubs())


# ---- environment ---------------------------------------------------------------

def _check_metal(profile) -> None:
    if getattr(profile, "api", None) != "metal":
        raise UsageError(f"--profile {getattr(profile, 'name', profile)}: api is "
                         f"'{getattr(profile, 'api', '?')}', the Metal shim needs an api = \"metal\" profile")
    if not any(k in profile.capabilities for k in CONFIG_VARIABLES):
        raise UsageError(f"--profile {profile.name}: sets no Metal capability "
                         f"({', '.join(CONFIG_VARIABLES)}); the shim would stay inert")


def profile_warnings(profile) -> list[str]:
    """Warnings to print before running ``profile`` (plain sentences).

    A profile that forces Mac, Common or Metal families is warned about:
    advertising Metal3 (5001) made MLX ask for a residency set the
    paravirtual device cannot create ("Unable to construct residency set",
    docs/contracts.md ("Published figures")).
    """
    forced = profile.capabilities.get("forceFamilies") or []
    if not forced:
        return []
    return [f"profile {profile.name} forces families {', '.join(map(str, forced))}: apps that "
            "see Metal3 (5001) may take paths the virtual device cannot run (MLX failed with "
            "'Unable to construct residency set'); keep forceFamilies out unless tested"]


def shim_env(profile, shim: Path, status_file: Path | None, inherit: bool, quiet: bool,
             inject_var: str = "DYLD_INSERT_LIBRARIES", existing: str | None = None) -> dict[str, str]:
    """The variables that configure the shim at ``shim`` for one process.

    ``inject_var`` is ``DYLD_INSERT_LIBRARIES`` (macOS) or ``LD_PRELOAD``
    (the Linux tests). ``existing``, the variable's current value, is kept
    before the shim, joined with ':' (a sanitizer runtime must stay first).

    Raises:
        UsageError: the profile is not a Metal profile or sets nothing.
    """
    _check_metal(profile)
    env: dict[str, str] = {}
    env[inject_var] = f"{existing}:{shim}" if existing else str(shim)
    for key, var in CONFIG_VARIABLES.items():
        if key not in profile.capabilities:
            continue
        value = profile.capabilities[key]
        env[var] = ",".join(str(v) for v in value) if isinstance(value, list) else str(int(value))
    if status_file is not None:
        env["CAPSHIM_STATUS_FILE"] = str(status_file)
    env["CAPSHIM_QUIET"] = "1" if quiet else "0"
    env["CAPSHIM_INHERIT"] = "1" if inherit else "0"
    return env


def launch_env(profile, status_file: Path, inherit: bool, quiet: bool) -> dict[str, str]:
    """The environment variables to ADD to one process to shim its Metal answers.

    Builds the shim when needed. Returns ``DYLD_INSERT_LIBRARIES`` (the
    any existing value first, then ':' and the dylib), the
    ``CAPSHIM_METAL_*`` configuration (appleFamilyMax: an MTLGPUFamily
    number; sizes in bytes; forceFamilies comma-separated),
    ``CAPSHIM_STATUS_FILE`` (JSON lines the shim appends), ``CAPSHIM_QUIET``
    ("1": no stderr banner) and ``CAPSHIM_INHERIT`` ("1": children keep the
    injection; otherwise the shim removes it at load).

    Raises:
        UsageError: not on macOS (``DYLD_INSERT_LIBRARIES`` exists only
            there), or the profile is not a Metal profile / sets nothing.
        BuildError: the shim could not be built.
    """
    _check_metal(profile)
    if not IS_MACOS:
        raise UsageError(f"--profile {profile.name}: Metal is only available on macOS; the Metal "
                         "shim's logic is tested on Linux with the GNU Objective-C runtime")
    arts = build()
    return shim_env(profile, arts["shim"], status_file, inherit, quiet,
                    existing=os.environ.get("DYLD_INSERT_LIBRARIES"))


# ---- status --------------------------------------------------------------------

def read_status(path: Path) -> list[dict]:
    """The Metal shim's events in a status file (JSON lines; others skipped)."""
    return shim_status.read(path).for_shim("metal")


def summarize_status(events: list[dict]) -> str:
    """"active", "invalid" or "inert" for the Metal shim's events of one run:
    the shared classifier's verdict (:func:`capshim.status.classify_events`)."""
    return shim_status.classify_events(events).state


# ---- probe ---------------------------------------------------------------------

def _probe_once(probe_bin: Path, env: dict[str, str], framework: Path | None) -> dict:
    cmd = [str(probe_bin)] + (["--framework", str(framework)] if framework else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    try:
        data = jsonread.loads(r.stdout.strip().splitlines()[-1], "the Metal probe's output") if r.stdout.strip() else {}
    except jsonread.JsonShapeError:
        data = {}
    if r.returncode != 0 or "answers" not in data:
        why = data.get("error") or (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"the Metal probe failed (exit {r.returncode}): {why}", exit_code=1)
    data["stderr"] = r.stderr
    return data


def _differences(stock: dict, shimmed: dict) -> list[dict]:
    out = []
    for key in ("families", "highest", "llama_cpp"):
        for k, v in stock.get(key, {}).items():
            if shimmed.get(key, {}).get(k) != v:
                out.append({"answer": f"{key}.{k}", "stock": v, "shimmed": shimmed[key].get(k)})
    for k in ("maxThreadgroupMemoryLength", "recommendedMaxWorkingSetSize", "hasUnifiedMemory"):
        if stock.get(k) != shimmed.get(k):
            out.append({"answer": k, "stock": stock.get(k), "shimmed": shimmed.get(k)})
    return out


def run_probe(probe_bin: Path, shim: Path, profile=None, compare: bool = False, *,
              inject_var: str = "DYLD_INSERT_LIBRARIES", framework: Path | None = None,
              base_env: dict[str, str] | None = None) -> dict:
    """Run the native probe stock and/or shimmed and return the answers.

    Without a profile: ``{"api": "metal", "stock": answers}``. With one:
    ``"shimmed"`` answers, the shim's ``"status"`` ("active", "inert",
    "invalid") and its ``"events"``; with ``compare`` also ``"stock"`` and
    ``"differences"`` (answer, stock, shimmed). Answers are the probe's:
    families as booleans, sizes in bytes.

    Raises:
        UsageError: the probe failed (exit code 1 then), or a bad profile.
    """
    base = dict(os.environ if base_env is None else base_env)
    preload = base.get(inject_var) if inject_var == "LD_PRELOAD" else None
    for var in [inject_var, *CONFIG_VARIABLES.values(), *LUME_VARIABLES.values(),
                "CAPSHIM_STATUS_FILE"]:
        base.pop(var, None)
    if preload:
        base[inject_var] = preload
    result: dict = {"api": "metal"}
    if profile is None or compare:
        result["stock"] = _probe_once(probe_bin, base, framework)["answers"]
    if profile is None:
        return result
    with tempfile.TemporaryDirectory(prefix="capshim-probe-") as td:
        status = Path(td) / "status.jsonl"
        env = dict(base)
        env.update(shim_env(profile, shim, status, inherit=False, quiet=True,
                            inject_var=inject_var, existing=preload))
        shimmed = _probe_once(probe_bin, env, framework)
        events = read_status(status)
    result.update({"profile": profile.name, "shimmed": shimmed["answers"],
                   "status": summarize_status(events), "events": events})
    if compare:
        result["differences"] = _differences(result["stock"], result["shimmed"])
    return result


def probe(profile=None, compare: bool = False) -> dict:
    """The Metal answers a process sees (``capshim probe --api metal``).

    See ``run_probe`` for the result's shape. Builds the shim and probe when
    needed.

    Raises:
        UsageError: not on macOS (exit 2), the probe failed (exit 1), or
            the profile is not a Metal profile.
        BuildError: the native pieces could not be built.
    """
    if not IS_MACOS:
        raise UsageError("--api metal: Metal is only available on macOS; the Metal shim's logic "
                         "is tested on Linux with the GNU Objective-C runtime")
    if profile is not None:
        _check_metal(profile)
    arts = build()
    return run_probe(arts["probe"], arts["shim"], profile, compare)


# ---- target warnings --------------------------------------------------------------

def sip_protected(path: str) -> bool:
    """True when ``path`` lies where SIP protects binaries (dyld drops DYLD_*)."""
    p = path if path.endswith("/") else path
    return any(p.startswith(prefix) for prefix in SIP_PREFIXES)


def parse_codesign(text: str) -> dict:
    """Facts from ``codesign -d --verbose=2 --entitlements - PATH`` output.

    Returns ``{"runtime": bool, "restrict": bool, "allow_dyld_env": bool,
    "disable_library_validation": bool}``. Source: codesign(1): the
    ``CodeDirectory ... flags=0x10000(runtime)`` line names the hardened
    runtime; entitlement keys appear verbatim.
    """
    flags = ""
    m = re.search(r"flags=0x[0-9a-fA-F]+\(([^)]*)\)", text)
    if m:
        flags = m.group(1)
    names = set(flags.split(","))
    return {
        "runtime": "runtime" in names,
        "restrict": "restrict" in names,
        "allow_dyld_env": "com.apple.security.cs.allow-dyld-environment-variables" in text,
        "disable_library_validation": "com.apple.security.cs.disable-library-validation" in text,
    }


def _resolve(program: str) -> str | None:
    if "/" in program:
        return str(Path(program).resolve()) if Path(program).exists() else None
    found = shutil.which(program)
    return str(Path(found).resolve()) if found else None


def _interpreter(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    parts = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not parts:
        return None
    if parts[0].endswith("/env") and len(parts) > 1:
        return _resolve(parts[1]) or parts[1]
    return parts[0]


def warn_target(argv: list[str]) -> list[str]:
    """Warnings when the injection would be dropped silently for ``argv``.

    Checks: the program (or the interpreter of a ``#!`` script, which is what
    dyld actually starts) lies under a SIP-protected path (/usr/bin, /bin,
    /System, ...); on macOS, ``codesign -d`` shows the hardened runtime
    without the allow-dyld-environment-variables entitlement, or the
    ``restrict`` flag; the program is setuid/setgid (dyld ignores DYLD_*
    then). Returns plain sentences; never raises.
    """
    if not argv:
        return []
    out: list[str] = []
    path = _resolve(argv[0])
    if path is None:
        return [f"{argv[0]}: not found, cannot check whether it accepts DYLD_INSERT_LIBRARIES"]
    targets = [path]
    interp = _interpreter(path)
    if interp:
        targets.append(interp)
    for t in targets:
        what = "the script's interpreter " if t != path else ""
        if sip_protected(t):
            out.append(f"{what}{t} is SIP-protected: macOS drops DYLD_INSERT_LIBRARIES for it, "
                       "the shim will not load (use a copy outside /usr/bin, /bin and /System, or "
                       "run the real program directly)")
        try:
            mode = os.stat(t).st_mode
        except OSError:
            mode = 0
        if mode & 0o6000:
            out.append(f"{what}{t} is setuid/setgid: dyld ignores DYLD_INSERT_LIBRARIES for it")
        if IS_MACOS and shutil.which("codesign"):
            r = subprocess.run(["codesign", "-d", "--verbose=2", "--entitlements", "-", t],
                               capture_output=True, text=True)
            facts = parse_codesign(r.stdout + r.stderr)
            if facts["restrict"]:
                out.append(f"{what}{t} is signed with the 'restrict' flag: dyld ignores DYLD_* for it")
            if facts["runtime"] and not facts["allow_dyld_env"]:
                out.append(f"{what}{t} uses the hardened runtime without the "
                           "com.apple.security.cs.allow-dyld-environment-variables entitlement: "
                           "dyld drops DYLD_INSERT_LIBRARIES")
            elif facts["runtime"] and not facts["disable_library_validation"]:
                out.append(f"{what}{t} uses the hardened runtime with library validation: an "
                           "ad-hoc signed shim may be refused")
    return out


# ---- verify ------------------------------------------------------------------------

def _check(name: str, status: str, detail: str) -> dict:
    return {"check": name, "status": status, "detail": detail}


def deny_list_hits(data: bytes) -> list[str]:
    """The DENY_LIST strings present in ``data`` (a binary's bytes)."""
    return [s for s in DENY_LIST if s.encode() in data]


def check_sums(root: Path) -> tuple[bool, str]:
    """Verify ``root/SHA256SUMS`` (:func:`capshim.paths.check_sums`): (ok, detail)."""
    try:
        listed, _ = paths.read_sums(root)
    except OSError:
        return False, f"{root / paths.SUMS_NAME} is missing"
    bad = paths.check_sums(root)
    if bad or not listed:
        return False, f"mismatch: {', '.join(bad) or 'empty SHA256SUMS'}"
    return True, f"{len(listed)} files match {root / paths.SUMS_NAME}"


def _functional_checks(arts: dict[str, Path], inject_var: str, framework: Path | None,
                       extra_env: dict[str, str] | None = None) -> list[dict]:
    from capshim.profiles import parse

    good = parse('name = "verify-apple9"\napi = "metal"\ndirection = "raise"\nversion = 1\n'
                 'description = "verify"\n[capabilities]\nappleFamilyMax = 1009\n'
                 'maxThreadgroupMemoryLength = 65536\n', "capshim-verify")
    out = []
    base = dict(os.environ)
    base.update(extra_env or {})
    name = "answers change with a profile"  # the check an error belongs to
    try:
        r = run_probe(arts["probe"], arts["shim"], good, compare=True, inject_var=inject_var,
                      framework=framework, base_env=base)
        fam = r["shimmed"]["families"]
        ok = (r["status"] == "active" and fam.get("1009") is True and fam.get("1010") is False
              and (r["shimmed"]["maxThreadgroupMemoryLength"] or 0) >= 65536
              and r["shimmed"]["highest"]["metal"] == r["stock"]["highest"]["metal"])
        out.append(_check("answers change with a profile", "passed" if ok else "failed",
                          f"status {r['status']}; {len(r['differences'])} answers changed; "
                          f"apple {r['stock']['highest']['apple']} -> {r['shimmed']['highest']['apple']}"))
        name = "answers stay stock with a broken configuration"
        # A broken configuration (the Lume spelling, not a whole number) must
        # leave the stock answers and say so in the status file.
        with tempfile.TemporaryDirectory(prefix="capshim-verify-") as td:
            status = Path(td) / "s.jsonl"
            env = {k: v for k, v in base.items() if k not in CONFIG_VARIABLES.values()}
            pre = base.get(inject_var) if inject_var == "LD_PRELOAD" else None
            env.update({inject_var: f"{pre}:{arts['shim']}" if pre else str(arts["shim"]),
                        LUME_VARIABLES["appleFamilyMax"]: "1009x",
                        "CAPSHIM_STATUS_FILE": str(status), "CAPSHIM_QUIET": "1"})
            broken = _probe_once(arts["probe"], env, framework)["answers"]
            verdict = summarize_status(read_status(status))
        same = broken == r["stock"]
        out.append(_check("answers stay stock with a broken configuration",
                          "passed" if same and verdict == "invalid" else "failed",
                          f"status {verdict}; answers {'unchanged' if same else 'CHANGED'}"))
    except UsageError as exc:
        out.append(_check(name, "failed", str(exc)))
    return out


def _expected_library(name: str) -> str:
    if name in MACHO_OBJC_IMPORTS:
        return OBJC_INSTALL_NAME
    return METAL_INSTALL_NAME if name in INTERPOSED else LIBSYSTEM_INSTALL_NAME


def _import_allowed(name: str) -> bool:
    if name in MACHO_OBJC_IMPORTS or name in MACHO_LIBC_IMPORTS or name in INTERPOSED:
        return True
    return name.startswith("__") and name.endswith("_chk") and name[2:-4] in MACHO_LIBC_IMPORTS


def inspect_macho(path: Path, kind: str = "shim") -> list[dict]:
    """Check a macOS shim (``kind="shim"``) or probe (``"probe"``) as ``verify``
    does on a Mac, by reading the file (``capshim.macho``, LIEF): on any OS.

    Per architecture slice: file type (dylib / executable), install name
    (``INSTALL_NAME``), exported symbols (only the linker's own,
    ``MACHO_LINKER_EXPORTS``: no test hooks), linked libraries (libSystem,
    libobjc, and Metal for the shim), imported symbols (every
    ``MACHO_OBJC_IMPORTS`` and ``INTERPOSED`` function, nothing outside
    those and ``MACHO_LIBC_IMPORTS``, each bound two-level to its library:
    libobjc, Metal, libSystem), the ``__DATA,__interpose`` tuples
    (replacing exactly ``INTERPOSED``, in that order: hook path 2), the
    minimum macOS, and a code signature load command on arm64 (Apple
    Silicon runs nothing unsigned; its validity is ``codesign``'s, on a
    Mac). For the file: the architectures (arm64e missing is a warning,
    ``ARM64E_NOTE``) and the ``DENY_LIST`` strings.

    Returns:
        checks ``{"check", "status": "passed" | "failed" | "warning", "detail"}``.

    Raises:
        UsageError: the file is missing or not Mach-O (named), or LIEF is
            not installed.
    """
    from capshim import macho

    slices = macho.read(path)
    checks: list[dict] = []
    archs = [s.arch for s in slices]
    checks.append(_check("architectures", "passed" if "arm64" in archs or "x86_64" in archs else "failed",
                         " ".join(archs)))
    if kind == "shim" and "arm64e" not in archs:
        checks.append(_check("arm64e slice", "warning", f"not in this file; {ARM64E_NOTE}"))
    want_type = "dylib" if kind == "shim" else "execute"
    want_min = tuple(int(x) for x in MACOS_MIN_VERSION.split("."))
    for sl in slices:
        a = sl.arch
        checks.append(_check(f"{a}: file type", "passed" if sl.file_type == want_type else "failed",
                             f"{sl.file_type} (want {want_type})"))
        exports = [macho.c_name(x) for x in sl.exports]
        extra = sorted(x for x in exports if x not in MACHO_LINKER_EXPORTS)
        if kind == "probe":
            extra = [x for x in extra if x != "main"]
        checks.append(_check(f"{a}: exported symbols", "failed" if extra else "passed",
                             f"unexpected: {', '.join(extra)}" if extra else
                             f"only the linker's ({', '.join(sorted(exports)) or 'none'})"))
        minos = tuple(int(x) for x in (sl.min_os or "0").split("."))
        checks.append(_check(f"{a}: minimum macOS",
                             "passed" if sl.min_os and minos[:2] <= want_min else "failed",
                             f"{sl.min_os or 'no LC_BUILD_VERSION'} (want <= {MACOS_MIN_VERSION})"))
        if a.startswith("arm64"):
            checks.append(_check(f"{a}: code signature", "passed" if sl.signed else "failed",
                                 "LC_CODE_SIGNATURE present (validity: codesign --verify on a Mac)"
                                 if sl.signed else "no LC_CODE_SIGNATURE: Apple Silicon will not load it"))
        want_libs = {LIBSYSTEM_INSTALL_NAME, OBJC_INSTALL_NAME} | ({METAL_INSTALL_NAME} if kind == "shim" else set())
        checks.append(_check(f"{a}: linked libraries", "passed" if set(sl.libraries) == want_libs else "failed",
                             ", ".join(sl.libraries) or "none"))
        if kind != "shim":
            continue
        checks.append(_check(f"{a}: install name", "passed" if sl.install_name == INSTALL_NAME else "failed",
                             f"{sl.install_name or 'none'} (want {INSTALL_NAME})"))
        imports = {macho.c_name(x) for x in sl.imports}
        unexpected = sorted(x for x in imports if not _import_allowed(x))
        lacking = sorted((MACHO_OBJC_IMPORTS | set(INTERPOSED)) - imports)
        misbound = sorted(f"{macho.c_name(x)} -> {lib}" for x, lib in sl.bound_to.items()
                          if lib != _expected_library(macho.c_name(x)))
        detail = (f"{len(imports)} imports; Objective-C runtime (from {OBJC_INSTALL_NAME}): "
                  f"{', '.join(sorted(imports & MACHO_OBJC_IMPORTS))}")
        for what, items in (("bound elsewhere", misbound), ("missing", lacking), ("unexpected", unexpected)):
            if items:
                detail = f"{what}: {', '.join(items)}; " + detail
        checks.append(_check(f"{a}: imported symbols",
                             "failed" if unexpected or lacking or misbound else "passed", detail))
        got = tuple(macho.c_name(x) for x in sl.interposed)
        has = "__DATA,__interpose" in sl.sections
        checks.append(_check(f"{a}: __DATA,__interpose", "passed" if has and got == INTERPOSED else "failed",
                             f"replaces {', '.join(got)}" if has else "section missing (hook path 2)"))
    if kind == "shim":
        hits = deny_list_hits(slices[0].data)
        checks.append(_check("deny-list strings", "failed" if hits else "passed",
                             f"found {', '.join(hits)}" if hits else f"none of {len(DENY_LIST)} present"))
    return checks


def _codesign_check(path: Path) -> dict:
    r = subprocess.run(["codesign", "--verify", "--strict", str(path)], capture_output=True, text=True)
    return _check("signature", "passed" if r.returncode == 0 else "failed",
                  "codesign --verify --strict " + ("ok" if r.returncode == 0 else r.stderr.strip()))


def verify(shim: Path | None = None) -> list[dict]:
    """Checks of the Metal shim for ``capshim verify``.

    Each check is ``{"check": name, "status": "passed" | "failed" |
    "warning" | "skipped (macOS only)", "detail": text}``. With ``shim`` (a
    Mach-O built elsewhere, ``--shim FILE``), on any OS: ``inspect_macho``
    (file type, architectures, install name, exports, imports,
    ``__DATA,__interpose``, deny-list), plus ``codesign --verify --strict``
    on a Mac (skipped elsewhere). Without it, the built shim: macOS: lipo
    architectures (arm64 and arm64e), ``codesign --verify --strict``,
    ``inspect_macho``, SHA256SUMS, and the probe stock vs shimmed vs a
    broken configuration against the real Metal.framework. Linux: the
    deny-list, the exported symbols (only the two LD_PRELOAD interposers),
    SHA256SUMS and the same behaviour checks against the GNU-runtime
    stand-in; the macOS-only checks are listed as skipped, never as passed.

    Raises:
        UsageError: ``shim`` is missing or not a Mach-O file.
        BuildError: the artifacts could not be built.
    """
    if shim is not None:
        try:
            found = inspect_macho(Path(shim))
        except UsageError as exc:
            raise UsageError(f"--shim {exc}") from None
        checks = [_check("file", "passed", str(shim)), *found]
        checks.append(_codesign_check(shim) if IS_MACOS else
                      _check("signature", SKIPPED, "codesign --verify --strict"))
        checks.append(_check("answers change on a real Metal device", SKIPPED,
                             "checked for the built shim: capshim verify (no --shim) on a Mac"))
        return checks
    arts = build(repair=False)  # report a damaged cache, do not hide it by rebuilding
    shim = arts["shim"]
    data = shim.read_bytes()
    checks: list[dict] = [_check("build", "passed", f"{shim}")]
    if IS_MACOS:
        r = subprocess.run(["lipo", "-archs", str(shim)], capture_output=True, text=True)
        archs = set(r.stdout.split())
        checks.append(_check("architectures", "passed" if {"arm64", "arm64e"} <= archs else "failed",
                             f"lipo -archs: {' '.join(sorted(archs)) or r.stderr.strip()}"))
        checks.append(_codesign_check(shim))
        checks += [c for c in inspect_macho(shim)
                   if c["check"] not in ("architectures", "arm64e slice", "deny-list strings")]
    else:
        checks.append(_check("architectures", SKIPPED, "lipo: arm64 + arm64e universal dylib"))
        checks.append(_check("signature", SKIPPED, "codesign --verify --strict"))
        r = subprocess.run(["nm", "-D", "--defined-only", str(shim)], capture_output=True, text=True)
        syms = sorted(ln.split()[-1] for ln in r.stdout.splitlines() if ln.strip())
        allowed = {"MTLCreateSystemDefaultDevice", "MTLCopyAllDevices"}
        ok = r.returncode == 0 and set(syms) == allowed
        checks.append(_check("exports only the interposers", "passed" if ok else "failed",
                             ", ".join(syms) or r.stderr.strip()))
    hits = deny_list_hits(data)
    checks.append(_check("deny-list strings", "failed" if hits else "passed",
                         f"found {', '.join(hits)}" if hits else f"none of {len(DENY_LIST)} present"))
    ok, detail = check_sums(shim.parent)
    checks.append(_check("SHA256SUMS", "passed" if ok else "failed", detail))
    if IS_MACOS:
        checks += _functional_checks(arts, "DYLD_INSERT_LIBRARIES", None)
    else:
        checks += [dict(c, check=c["check"] + " (GNU-runtime stand-in)")
                   for c in _functional_checks(arts, "LD_PRELOAD", arts["standin"])]
        checks.append(_check("answers change on a real Metal device", SKIPPED,
                             "run capshim verify on a Mac (the macOS workflow does)"))
    return checks


# ---- the Backend interface ---------------------------------------------------------

class MetalBackend(Backend):
    """The Metal shim behind the :class:`capshim.backends.Backend` interface.

    It runs on macOS; on Linux only its stand-in build (GNU Objective-C
    runtime, for the tests and ``capshim verify``) is built. No beyond-device
    check: inside a VM the probe sees the paravirtual device, whose answers
    are lower than the hardware's by design (the module docstring), so the
    guest cannot know what the hardware has.
    """

    name = "metal"
    shim_label = "the Metal shim"
    platforms = ("darwin",)
    cross_targets = ("macos",)
    verifies_files = True

    def unavailable(self) -> str | None:
        """macOS: the Xcode command line tools (``xcrun``); Linux: ``gcc`` compiling Objective-C
        against the GNU runtime (Debian package ``gobjc``)."""
        if IS_MACOS:
            return None if shutil.which("xcrun") else "no xcrun: install the Xcode command line tools"
        if shutil.which("gcc") is None:
            return "gcc not found: the Metal stand-in build needs gcc and gobjc"
        try:
            r = subprocess.run(["gcc", "-x", "objective-c", "-fsyntax-only", "-"], input="#include <objc/runtime.h>\n",
                               capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"gcc cannot compile Objective-C ({exc}); install gobjc"
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["no message"])[0]
            return f"no Objective-C compiler (gcc -x objective-c: {why}); install gobjc for the Metal stand-in"
        return None

    def build(self, force: bool = False) -> dict[str, Path]:
        """See :func:`build`."""
        return build(force=force)

    def launch_env(self, profile, simulate, status_file, run_dir, inherit=False, quiet=False):
        """See :func:`launch_env` (no device role: ``simulate`` is refused before this)."""
        return launch_env(profile, status_file, inherit=inherit, quiet=quiet)

    def requested_shims(self, profile, simulate):
        """``["metal"]`` when a profile is given."""
        return ["metal"] if profile is not None else []

    def probe(self, profile=None, simulate=None, device=0, compare=False):
        """See :func:`probe` (one device: ``device`` is ignored)."""
        return probe(profile, compare=compare)

    def verify(self, shim: Path | None = None) -> list[dict]:
        """See :func:`verify` (``shim``: a Mach-O dylib to check instead of the
        built shim); each check's name starts with ``metal: ``."""
        return [{**c, "check": f"metal: {c['check']}"} for c in verify(shim)]

    def cross_build(self, target: str, force: bool = False) -> tuple[list[str], bool]:
        """``macos``: :func:`build_cross`, then :func:`inspect_macho` on each artifact."""
        if target not in self.cross_targets:
            return super().cross_build(target, force)
        arts = build_cross(force=force)
        lines = [f"metal: {name}: {path}" for name, path in arts.items()]
        ok = True
        for name, path in arts.items():
            if name != "sums":
                checks = inspect_macho(path, name.split("-")[0])
                bad = [c for c in checks if c["status"] == "failed"]
                ok = ok and not bad
                lines.append(f"metal: {name}: " + ("; ".join(f"{c['check']}: {c['detail']}" for c in bad)
                                                   or f"{len(checks)} Mach-O checks passed"))
        lines.append(f"metal: note: {ARM64E_NOTE}")
        lines.append(f"metal: check a dylib before copying it into a guest: "
                     f"capshim verify --api metal --shim {arts['shim-arm64']}")
        return lines, ok

    def run_warnings(self, profile, simulate, argv):
        """The profile's warnings and the target's (:func:`profile_warnings`, :func:`warn_target`)."""
        return (profile_warnings(profile) if profile is not None else []) + warn_target(argv)


BACKEND = MetalBackend()
