"""Metal backend: build the shim, give the environment of one shimmed process,
probe the answers a process sees, warn about targets that drop the
injection, and verify the built artifacts.

What is verified where: on Linux the shim's logic is built against the GNU
Objective-C runtime (``gobjc``) and tested with stand-in device classes
(``native/metal/standin_metal.m``), injected with ``LD_PRELOAD``; on macOS the
same source is built as a universal (arm64, arm64e) dylib, ad-hoc signed,
and injected with ``DYLD_INSERT_LIBRARIES``; only there does it meet the real
``Metal.framework`` (the macOS CI workflow, ``.github/workflows/macos.yml``).

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

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from capshim.errors import UsageError
from capshim.native.build import cache_root, run_compiler

__all__ = [
    "NATIVE_DIR", "CONFIG_VARIABLES", "DENY_LIST", "cache_dir", "build", "launch_env",
    "shim_env", "profile_warnings", "probe", "run_probe", "summarize_status",
    "warn_target", "verify",
]

NATIVE_DIR = Path(__file__).resolve().parent.parent / "native" / "metal"
SHIM_SOURCES = ("metal_shim.c", "metal_config.c")
PROBE_SOURCES = ("metal_probe.c",)
STANDIN_SOURCE = "standin_metal.m"
IS_MACOS = sys.platform == "darwin"

DYLIB_NAME = "libcapshim-metal.dylib"
SO_NAME = "libcapshim-metal.so"
PROBE_NAME = "capshim-metal-probe"
STANDIN_NAME = "libcapshim_metal_standin.so"

# Flags shared by every native build: C (GNU dialect for dladdr, getprogname,
# program_invocation_short_name), all warnings as errors.
WARN_FLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror"]
MACOS_MIN = "-mmacosx-version-min=13.0"
MACOS_ARCHS = ["-arch", "arm64", "-arch", "arm64e"]

# Profile key -> the shim's variable (native/metal/metal_config.h).
CONFIG_VARIABLES = {
    "appleFamilyMax": "CAPSHIM_METAL_APPLE_FAMILY_MAX",
    "maxThreadgroupMemoryLength": "CAPSHIM_METAL_MAX_THREADGROUP_MEMORY",
    "recommendedMaxWorkingSetSize": "CAPSHIM_METAL_RECOMMENDED_WORKING_SET_SIZE",
    "forceFamilies": "CAPSHIM_METAL_FORCE_FAMILIES",
}

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


# ---- build ------------------------------------------------------------------

def _sources_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(NATIVE_DIR.iterdir()):
        if p.is_file() and p.suffix in (".c", ".h", ".m"):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def cache_dir() -> Path:
    """Where ``build`` puts the artifacts of the current sources.

    ``$XDG_CACHE_HOME`` (or ``~/.cache``) + ``/capshim/native/metal-<12 hex>``,
    the hex being the start of the SHA-256 of the sources in ``native/metal``.
    Computing it builds nothing.
    """
    return cache_root() / "native" / f"metal-{_sources_digest()}"


def _src(names) -> list[str]:
    return [str(NATIVE_DIR / n) for n in names]


def _macos_commands(out: Path) -> list[list[str]]:
    dylib, probe_bin = out / DYLIB_NAME, out / PROBE_NAME
    return [
        ["xcrun", "clang", *MACOS_ARCHS, MACOS_MIN, *WARN_FLAGS, "-O2", "-fvisibility=hidden",
         "-dynamiclib", "-install_name", f"@rpath/{DYLIB_NAME}", *_src(SHIM_SOURCES),
         "-lobjc", "-framework", "Metal", "-o", str(dylib)],
        ["codesign", "--force", "--sign", "-", str(dylib)],
        ["xcrun", "clang", "-arch", "arm64", MACOS_MIN, *WARN_FLAGS, "-O2", *_src(PROBE_SOURCES),
         "-lobjc", "-o", str(probe_bin)],
        ["codesign", "--force", "--sign", "-", str(probe_bin)],
    ]


def _linux_commands(out: Path, cc: str = "gcc", extra: list[str] | None = None) -> list[list[str]]:
    extra = extra or ["-O2"]
    full, nopriv = out / "standin" / "full", out / "standin" / "noprivate"
    return [
        [cc, *WARN_FLAGS, *extra, "-fPIC", "-shared", "-fvisibility=hidden", *_src(SHIM_SOURCES),
         "-lobjc", "-ldl", "-lpthread", "-o", str(out / SO_NAME)],
        [cc, *WARN_FLAGS, *extra, *_src(PROBE_SOURCES), "-lobjc", "-ldl", "-o", str(out / PROBE_NAME)],
        [cc, *WARN_FLAGS, *extra, "-fPIC", "-shared", "-fvisibility=hidden",
         *_src([STANDIN_SOURCE]), "-lobjc", "-lpthread", "-o", str(full / STANDIN_NAME)],
        [cc, *WARN_FLAGS, *extra, "-DSTANDIN_NO_PRIVATE", "-fPIC", "-shared", "-fvisibility=hidden",
         *_src([STANDIN_SOURCE]), "-lobjc", "-lpthread", "-o", str(nopriv / STANDIN_NAME)],
    ]


def _artifacts(root: Path) -> dict[str, Path]:
    if IS_MACOS:
        return {"shim": root / DYLIB_NAME, "probe": root / PROBE_NAME, "sums": root / "SHA256SUMS"}
    return {"shim": root / SO_NAME, "probe": root / PROBE_NAME,
            "standin": root / "standin" / "full" / STANDIN_NAME,
            "standin_noprivate": root / "standin" / "noprivate" / STANDIN_NAME,
            "sums": root / "SHA256SUMS"}


def _write_sums(root: Path, files: list[Path]) -> None:
    lines = [f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.relative_to(root).as_posix()}"
             for f in files]
    (root / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def build(force: bool = False) -> dict[str, Path]:
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
    Both write ``SHA256SUMS``. Warnings are errors.

    Args:
        force: rebuild even when the artifacts of these sources exist.

    Returns:
        name -> path: "shim", "probe", "sums" (and on Linux "standin",
        "standin_noprivate").

    Raises:
        BuildError: naming the failing command (compiler missing: on Debian
            ``apt-get install gcc gobjc``; on macOS the Xcode command line tools).
    """
    root = cache_dir()
    arts = _artifacts(root)
    if not force and all(p.is_file() for p in arts.values()):
        return arts
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=root.name + ".tmp-", dir=root.parent))
    try:
        (tmp / "standin" / "full").mkdir(parents=True)
        (tmp / "standin" / "noprivate").mkdir(parents=True)
        for cmd in (_macos_commands(tmp) if IS_MACOS else _linux_commands(tmp)):
            run_compiler(cmd)
        built = [p for k, p in _artifacts(tmp).items() if k != "sums"]
        _write_sums(tmp, built)
        if root.exists():
            shutil.rmtree(root)
        os.replace(tmp, root)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return arts


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
    events = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return events
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(ev, dict) and ev.get("shim") == "metal":
            events.append(ev)
    return events


def summarize_status(events: list[dict]) -> str:
    """"active", "invalid" or "inert" for the Metal shim's events of one run.

    invalid: a config event with accepted false; active: loaded, config
    accepted and a hooks event whose ``installed`` list is not empty (the
    Metal shim lists hooks there only once a device class answers through
    them); inert: anything else.
    """
    if any(e.get("event") == "config" and e.get("accepted") is False for e in events):
        return "invalid"
    loaded = any(e.get("event") == "loaded" for e in events)
    accepted = any(e.get("event") == "config" and e.get("accepted") is True for e in events)
    hooked = any(e.get("event") == "hooks" and e.get("installed") for e in events)
    return "active" if loaded and accepted and hooked else "inert"


# ---- probe ---------------------------------------------------------------------

def _probe_once(probe_bin: Path, env: dict[str, str], framework: Path | None) -> dict:
    cmd = [str(probe_bin)] + (["--framework", str(framework)] if framework else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    try:
        data = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}
    except json.JSONDecodeError:
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
    for var in [inject_var, *CONFIG_VARIABLES.values(), "LUME_METAL_APPLE_FAMILY_MAX",
                "LUME_METAL_MAX_THREADGROUP_MEMORY", "LUME_METAL_RECOMMENDED_WORKING_SET_SIZE",
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
    """Verify ``root/SHA256SUMS`` (``HEX  relative/path`` lines): (ok, detail)."""
    sums = root / "SHA256SUMS"
    if not sums.is_file():
        return False, f"{sums} is missing"
    bad = []
    lines = [ln for ln in sums.read_text().splitlines() if ln.strip()]
    for ln in lines:
        digest, _, rel = ln.partition("  ")
        f = root / rel
        if not f.is_file() or hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            bad.append(rel)
    if bad or not lines:
        return False, f"mismatch: {', '.join(bad) or 'empty SHA256SUMS'}"
    return True, f"{len(lines)} files match {sums}"


def _functional_checks(arts: dict[str, Path], inject_var: str, framework: Path | None,
                       extra_env: dict[str, str] | None = None) -> list[dict]:
    from capshim.profiles import parse

    good = parse('name = "verify-apple9"\napi = "metal"\ndirection = "raise"\nversion = 1\n'
                 'description = "verify"\n[capabilities]\nappleFamilyMax = 1009\n'
                 'maxThreadgroupMemoryLength = 65536\n', "capshim-verify")
    out = []
    base = dict(os.environ)
    base.update(extra_env or {})
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
        # A broken configuration (the Lume spelling, not a whole number) must
        # leave the stock answers and say so in the status file.
        with tempfile.TemporaryDirectory(prefix="capshim-verify-") as td:
            status = Path(td) / "s.jsonl"
            env = {k: v for k, v in base.items() if k not in CONFIG_VARIABLES.values()}
            pre = base.get(inject_var) if inject_var == "LD_PRELOAD" else None
            env.update({inject_var: f"{pre}:{arts['shim']}" if pre else str(arts["shim"]),
                        "LUME_METAL_APPLE_FAMILY_MAX": "1009x",
                        "CAPSHIM_STATUS_FILE": str(status), "CAPSHIM_QUIET": "1"})
            broken = _probe_once(arts["probe"], env, framework)["answers"]
            verdict = summarize_status(read_status(status))
        same = broken == r["stock"]
        out.append(_check("answers stay stock with a broken configuration",
                          "passed" if same and verdict == "invalid" else "failed",
                          f"status {verdict}; answers {'unchanged' if same else 'CHANGED'}"))
    except UsageError as exc:
        out.append(_check("answers change with a profile", "failed", str(exc)))
    return out


def verify() -> list[dict]:
    """Checks of the built Metal shim for ``capshim verify``.

    Each check is ``{"check": name, "status": "passed" | "failed" |
    "skipped (macOS only)", "detail": text}``. macOS: lipo architectures
    (arm64 and arm64e), ``codesign --verify --strict``, no exported symbols,
    the deny-list of strings, SHA256SUMS, and the probe stock vs shimmed vs a
    broken configuration against the real Metal.framework. Linux: the
    deny-list, the exported symbols (only the two LD_PRELOAD interposers),
    SHA256SUMS and the same behaviour checks against the GNU-runtime
    stand-in; the macOS-only checks are listed as skipped, never as passed.

    Raises:
        BuildError: the artifacts could not be built.
    """
    arts = build()
    shim = arts["shim"]
    data = shim.read_bytes()
    checks: list[dict] = [_check("build", "passed", f"{shim}")]
    if IS_MACOS:
        r = subprocess.run(["lipo", "-archs", str(shim)], capture_output=True, text=True)
        archs = set(r.stdout.split())
        checks.append(_check("architectures", "passed" if {"arm64", "arm64e"} <= archs else "failed",
                             f"lipo -archs: {' '.join(sorted(archs)) or r.stderr.strip()}"))
        r = subprocess.run(["codesign", "--verify", "--strict", str(shim)], capture_output=True, text=True)
        checks.append(_check("signature", "passed" if r.returncode == 0 else "failed",
                             "codesign --verify --strict " + ("ok" if r.returncode == 0 else r.stderr.strip())))
        r = subprocess.run(["nm", "-gU", str(shim)], capture_output=True, text=True)
        syms = [ln.split()[-1] for ln in r.stdout.splitlines() if ln.strip() and not ln.endswith(":")]
        checks.append(_check("exports nothing", "passed" if r.returncode == 0 and not syms else "failed",
                             ", ".join(syms) or "no exported symbols"))
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
