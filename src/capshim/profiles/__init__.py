"""Profiles: named, versioned, schema-checked sets of capability answers.

A profile is a TOML file::

    name = "vulkan-paravirt"      # [a-z0-9][a-z0-9._-]*
    api = "vulkan"                # "vulkan", "metal" or "cuda"
    direction = "lower"           # "raise" answers, or "lower" them
    version = 1                   # the profile's own version, 1..4294967295
    description = "one line: what this profile is for"
    override_exact = []           # exact keys (subgroupSize) this profile may change
    same_on_newer = []            # keys set at the value every newer device answers (said once,
                                  # never warned about as "no effect" on each run)


    [capabilities]                # keys under the API's own names (catalog.py)
    maxComputeSharedMemorySize = 16384
    shaderFloat16 = false

    [extensions]                  # Vulkan only: false hides, true or a spec
    VK_KHR_cooperative_matrix = false   # version (>= 1) adds

Modules: :mod:`.model` (the :class:`Profile` value, :class:`ProfileError`,
version packing), :mod:`.language` (TOML text -> Profile: the schema and the
direction and consistency rules), :mod:`.checks` (what the layer answers,
findings against a device), :mod:`.ondevice` (restore and beyond-device
profiles), :mod:`.catalog` and :mod:`.table` (the capability table),
:mod:`.khronos` (Khronos Vulkan Profiles files) and :mod:`.roles` (the one loader
that places any reference, TOML or Khronos, in the layer's roles). This module
loads TOML profiles by built-in name or path and re-exports the public names.
"""

from __future__ import annotations

import re

from importlib import resources
from pathlib import Path

import tomli_w

from capshim import paths
from capshim.contracts.suggest import did_you_mean
from capshim.profiles.catalog import KEYS
from capshim.profiles.checks import Finding, answers_after, check_against_device, check_alone, describe, no_effect
from capshim.profiles import khronos
from capshim.profiles.language import MAX_PROFILE_BYTES, parse
from capshim.profiles.model import Profile, ProfileError, escape, format_version, parse_version

__all__ = ["Profile", "ProfileError", "load", "parse", "builtin_names", "parse_version", "format_version",
           "check_against_device", "check_alone", "describe", "Finding", "escape", "to_toml", "no_effect",
           "answers_after"]


def _builtin_dir():
    return resources.files("capshim.profiles") / "builtin"


def builtin_names() -> list[str]:
    """Names of the profiles that ship in the package, sorted."""
    return sorted(p.name[:-5] for p in _builtin_dir().iterdir() if p.name.endswith(".toml"))


def load(ref: str | Path) -> Profile:
    """Load a profile by built-in name or by file path.

    A reference that names an existing file (or contains a path separator or
    ends in ``.toml``) is a file; otherwise it is a built-in name.

    Raises:
        ProfileError: unknown built-in name, a folder, unreadable file, or invalid profile.
    """
    ref_s = str(ref)
    path = Path(ref_s)
    if khronos.is_khronos_ref(ref_s):
        raise ProfileError(ref_s, None, None, "a Khronos Vulkan Profiles file is split per answer against the "
                           "device: give it to run or probe (--profile/--simulate) or to a bench arm "
                           "(--arm NAME=simulate:FILE.json#PROFILE), or write a TOML profile with "
                           "'capshim profile import'")
    if path.is_dir() and ("/" in ref_s or ref_s not in builtin_names()):
        raise ProfileError(ref_s, None, None, "is a folder, not a profile file")
    if path.is_file() or "/" in ref_s or ref_s.endswith(".toml"):
        try:  # bounded, regular files only: /dev/zero or a FIFO is refused at once
            raw = paths.read_limited(path, MAX_PROFILE_BYTES)
        except OSError as exc:
            raise ProfileError(ref_s, None, None, f"cannot read: {exc.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _not_utf8(ref_s, raw, exc) from None
        return parse(text, ref_s)
    if ref_s in builtin_names():
        text = (_builtin_dir() / f"{ref_s}.toml").read_text(encoding="utf-8")
        return parse(text, f"builtin:{ref_s}")
    raise ProfileError(ref_s, None, None,
                       f"no such profile file or built-in profile{did_you_mean(ref_s, builtin_names())} "
                       f"(built-in: {', '.join(builtin_names())})")


def to_toml(profile: Profile) -> str:
    """Write a profile back as TOML text (used for generated profiles), with the tomli-w writer."""
    kinds = KEYS[profile.api]
    caps = {}
    for key, value in profile.capabilities.items():
        kind = kinds[key]
        caps[key] = (bool(value) if kind == "bool" else [int(v) for v in value] if kind == "families"
                     else format_version(value) if kind == "version" else value)
    doc = {"name": profile.name, "api": profile.api, "direction": profile.direction, "version": profile.version,
           "description": profile.description}
    if profile.override_exact:
        doc["override_exact"] = list(profile.override_exact)
    if profile.same_on_newer:
        doc["same_on_newer"] = list(profile.same_on_newer)
    doc["capabilities"] = caps
    if profile.extensions:
        doc["extensions"] = {name: (spec if spec else False) for name, spec in profile.extensions.items()}
    return tomli_w.dumps(doc)


_BARE_KEY = re.compile(rb"\s*([A-Za-z0-9_-]+)\s*=")
_TABLE = re.compile(rb"^\s*\[([A-Za-z0-9_.-]+)\]", re.MULTILINE)


def _not_utf8(source: str, raw: bytes, exc: UnicodeDecodeError) -> ProfileError:
    """The error for a profile file that is not UTF-8: the line, and the key on it when the
    line starts with one (a ``deviceName`` pasted from another encoding is the likely case)."""
    line_no = raw.count(b"\n", 0, exc.start) + 1
    start = raw.rfind(b"\n", 0, exc.start) + 1
    m = _BARE_KEY.match(raw, start)
    tables = _TABLE.findall(raw, 0, start)
    key = None if m is None else (f"{tables[-1].decode('ascii')}." if tables else "") + m[1].decode("ascii")
    return ProfileError(source, key, None, f"not UTF-8: byte 0x{raw[exc.start]:02x} on line {line_no} "
                                           "(TOML files are UTF-8)")
