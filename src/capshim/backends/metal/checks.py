"""Metal shim checks for ``capshim verify``: Mach-O inspection (LIEF), signature,
exports, deny-list, checksums and behaviour."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from capshim.contracts import bounded
from capshim import macho, paths
from capshim.errors import UsageError
from capshim.profiles import parse
from capshim.backends.metal.compile import (ARM64E_NOTE, CONFIG_VARIABLES, DENY_LIST, INSTALL_NAME, INTERPOSED,
                                          IS_MACOS, LIBSYSTEM_INSTALL_NAME, LUME_VARIABLES, MACHO_LIBC_IMPORTS,
                                          MACHO_LINKER_EXPORTS, MACHO_OBJC_IMPORTS, MACOS_MIN_VERSION,
                                          METAL_INSTALL_NAME, OBJC_INSTALL_NAME, SKIPPED, build)
from capshim.backends.metal.runtime import _probe_once, read_status, run_probe, summarize_status


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
    r = bounded.run(["codesign", "--verify", "--strict", str(path)])
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
        r = bounded.run(["lipo", "-archs", str(shim)])
        archs = set(r.stdout.split())
        checks.append(_check("architectures", "passed" if {"arm64", "arm64e"} <= archs else "failed",
                             f"lipo -archs: {' '.join(sorted(archs)) or r.stderr.strip()}"))
        checks.append(_codesign_check(shim))
        checks += [c for c in inspect_macho(shim)
                   if c["check"] not in ("architectures", "arm64e slice", "deny-list strings")]
    else:
        checks.append(_check("architectures", SKIPPED, "lipo: arm64 + arm64e universal dylib"))
        checks.append(_check("signature", SKIPPED, "codesign --verify --strict"))
        r = bounded.run(["nm", "-D", "--defined-only", str(shim)])
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


