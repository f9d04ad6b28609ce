"""Metal shim at run time: the environment of one shimmed process, its status events,
the probe, and warnings about targets that drop the injection (SIP, hardened runtime)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from capshim.contracts import bounded
from capshim import jsonread
from capshim import status as shim_status
from capshim.errors import EXIT_WORKLOAD, UsageError
from capshim.host import is_vm_guest
from capshim.profiles.metalhost import capture_of, host_os
from capshim.profiles.model import DEVICE_NAME_KEY, encode_device_name
from capshim.backends.metal.compile import (CONFIG_VARIABLES, IS_MACOS, LUME_VARIABLES, SIP_PREFIXES,
                                          build)


# ---- environment ---------------------------------------------------------------

def _check_metal(profile) -> None:
    if getattr(profile, "api", None) != "metal":
        raise UsageError(f"--profile {getattr(profile, 'name', profile)}: api is "
                         f"'{getattr(profile, 'api', '?')}', the Metal shim needs an api = \"metal\" profile")
    if not any(k in profile.capabilities for k in CONFIG_VARIABLES) and not profile.device_name:
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
        if key == DEVICE_NAME_KEY and profile.device_name:  # MTLDevice.name, percent-encoded
            env[var] = encode_device_name(profile.device_name)
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
    number; sizes in bytes; forceFamilies comma-separated; deviceName
    percent-encoded, :func:`capshim.profiles.model.encode_device_name`),
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
    r = bounded.run(cmd, env=env, timeout=120)
    try:
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        data = jsonread.loads(last, "the Metal probe's output") if last else {}
    except jsonread.JsonShapeError:
        data = {}
    if r.returncode != 0 or "answers" not in data:
        why = data.get("error") or (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"the Metal probe failed (exit {r.returncode}): {why}", exit_code=EXIT_WORKLOAD)
    data["stderr"] = r.stderr
    return data


def _differences(stock: dict, shimmed: dict) -> list[dict]:
    out = []
    for key in ("families", "highest", "llama_cpp"):
        for k, v in stock.get(key, {}).items():
            if shimmed.get(key, {}).get(k) != v:
                out.append({"answer": f"{key}.{k}", "stock": v, "shimmed": shimmed[key].get(k)})
    for k in ("device", "maxThreadgroupMemoryLength", "recommendedMaxWorkingSetSize", "hasUnifiedMemory"):
        if stock.get(k) != shimmed.get(k):
            out.append({"answer": k, "stock": stock.get(k), "shimmed": shimmed.get(k)})
    return out


def run_probe(probe_bin: Path, shim: Path, profile=None, compare: bool = False, *,
              inject_var: str = "DYLD_INSERT_LIBRARIES", framework: Path | None = None,
              base_env: dict[str, str] | None = None) -> dict:
    """Run the native probe stock and/or shimmed and return the answers.

    Without a profile: a host capture (:func:`capshim.profiles.metalhost.capture_of`:
    ``{"schema": 1, "api": "metal", "capshim_version", "os", "stock": answers}``), what
    ``capshim profile from-host`` and ``profile check --host`` read. With one:
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
        return capture_of(result["stock"], host_os(vm=is_vm_guest()))
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
            r = bounded.run(["codesign", "-d", "--verbose=2", "--entitlements", "-", t])
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


