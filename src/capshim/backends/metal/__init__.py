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

import shutil
import subprocess
from pathlib import Path

from capshim.contracts import bounded
from capshim.contracts.pasteable import command as pasteable
from capshim.backends import Backend
from capshim.backends.metal.compile import (ARM64E_NOTE, CONFIG_VARIABLES, DENY_LIST, DYLIB_NAME, IS_MACOS,
                                          LUME_VARIABLES,
                                          NATIVE_DIR, SKIPPED, SO_NAME, build, build_cross, cache_dir,
                                          compile_into, cross_dir)
from capshim.backends.metal.runtime import (launch_env, parse_codesign, probe, profile_warnings,
                                            read_status, run_probe, shim_env, sip_protected, summarize_status,
                                            warn_target)
from capshim.backends.metal.checks import check_sums, deny_list_hits, inspect_macho, verify

__all__ = [
    "NATIVE_DIR", "CONFIG_VARIABLES", "LUME_VARIABLES", "DENY_LIST", "DYLIB_NAME", "SO_NAME", "SKIPPED",
    "cache_dir", "cross_dir", "build", "build_cross", "compile_into", "inspect_macho", "launch_env",
    "shim_env", "profile_warnings", "probe", "run_probe", "read_status", "summarize_status", "sip_protected",
    "parse_codesign", "check_sums", "deny_list_hits", "warn_target", "verify", "MetalBackend", "BACKEND",
]


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
            r = bounded.run(["gcc", "-x", "objective-c", "-fsyntax-only", "-"], input="#include <objc/runtime.h>\n",
                              timeout=60)
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
        lines.append("metal: check a dylib before copying it into a guest: "
                     + pasteable("capshim", "verify", "--api", "metal", "--shim", arts["shim-arm64"]))
        return lines, ok

    def run_warnings(self, profile, simulate, argv):
        """The profile's warnings and the target's (:func:`profile_warnings`, :func:`warn_target`)."""
        return (profile_warnings(profile) if profile is not None else []) + warn_target(argv)


BACKEND = MetalBackend()
