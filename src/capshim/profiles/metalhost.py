"""Host ceilings for Metal (issue 21, item 6): a capture of the Mac host's Metal answers, the
guest raise profile it allows, and a profile checked against it.

A guest sees Apple's paravirtual device and cannot know what the host's GPU has; the host can.
``capshim probe --api metal --json`` (no profile) on the host prints a **capture**: the probe's
stock answers plus what is needed to read them later. Its shape (schema 1)::

    {"schema": 1, "api": "metal", "capshim_version": "<capshim.__version__>",
     "os": {"system": "Darwin", "release": "25.6.0", "version": "26.6.1", "machine": "arm64",
            "vm": false},                                   # kern.hv_vmm_present (null: unknown)
     "stock": {"device": "Apple M1 Ultra",                  # MTLDevice.name
               "highest": {"apple": 1007, "mac": null,      # highest MTLGPUFamily of each range
                           "common": 3003, "metal": 5002},  # the device answers YES for
               "maxThreadgroupMemoryLength": 32768,         # bytes
               "recommendedMaxWorkingSetSize": 115448730000,  # bytes
               ...},                                        # the rest of the probe's answers
     "note": "optional free text (where the values come from)"}

It is read through the one bounded JSON reader (:mod:`capshim.jsonread`) and checked against
:data:`CAPTURE_SCHEMA`; the device name follows the profiles' device-name rule
(:func:`capshim.profiles.model.device_name_problem`). Family numbers are MTLGPUFamily values
(Metal API reference): Apple 1001..1999, Mac 2001.., Common 3001.., Metal 5001...

:func:`profile_from_host` writes the raise profile that answers exactly the host's Apple family
and threadgroup memory (never more; the working set is left out: a guest has less memory than
its host). :func:`above_host` lists each answer of a Metal profile above the capture, and by how
much.
"""

from __future__ import annotations

import json
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

from capshim import __version__, jsonread
from capshim.profiles.language import parse
from capshim.profiles.model import (DEVICE_NAME_KEY, U64_MAX, Profile, ProfileError, device_name_problem,
                                    escape)

#: The capture's schema number; a change of meaning bumps it.
CAPTURE_SCHEMA_VERSION = 1
#: The most bytes a capture file may have (a real one is about 2 KiB).
CAPTURE_MAX_BYTES = 1 << 20

#: MTLGPUFamily ranges (Metal API reference): capture key -> (first, last) family number.
FAMILY_RANGES = {"apple": (1001, 1999), "mac": (2001, 2999), "common": (3001, 3999), "metal": (5001, 5999)}

_SIZE = {"type": ["integer", "null"], "minimum": 0, "maximum": U64_MAX}
_TEXT = {"type": "string", "maxLength": 256}

#: The JSON Schema (Draft 2020-12) of a capture; other probe answers may be present and are kept.
CAPTURE_SCHEMA: dict = {
    "type": "object",
    "required": ["schema", "api", "capshim_version", "os", "stock"],
    "properties": {
        "schema": {"const": CAPTURE_SCHEMA_VERSION},
        "api": {"const": "metal"},
        "capshim_version": {"type": "string", "minLength": 1, "maxLength": 64},
        "os": {"type": "object", "required": ["system"],
               "properties": {**{k: _TEXT for k in ("system", "release", "version", "machine")},
                              "vm": {"type": ["boolean", "null"]}}},
        "note": {"type": "string", "maxLength": 4096},
        "stock": {
            "type": "object",
            "required": ["device", "highest", "maxThreadgroupMemoryLength", "recommendedMaxWorkingSetSize"],
            "properties": {
                "device": {"type": ["string", "null"]},
                "highest": {"type": "object", "required": ["apple"],
                            "properties": {k: {"type": ["integer", "null"], "minimum": lo, "maximum": hi}
                                           for k, (lo, hi) in FAMILY_RANGES.items()}},
                "maxThreadgroupMemoryLength": _SIZE,
                "recommendedMaxWorkingSetSize": _SIZE,
            },
        },
    },
}


@dataclass(frozen=True)
class HostCapture:
    """One capture, read and checked.

    Attributes:
        source: the file it was read from.
        device: the host's device name (MTLDevice.name), or None when the probe had none.
        highest: capture key ("apple", "mac", "common", "metal") -> highest family number, or None.
        threadgroup: maxThreadgroupMemoryLength in bytes, or None.
        working_set: recommendedMaxWorkingSetSize in bytes, or None.
        os: the host's ``os`` block (system, release, version, machine, vm).
        capshim_version: the capshim that made it.
    """

    source: str
    device: str | None
    highest: dict[str, int | None]
    threadgroup: int | None
    working_set: int | None
    os: dict[str, str] = field(default_factory=dict)
    capshim_version: str = ""

    @property
    def apple_family(self) -> int | None:
        """The host's Apple family ceiling (1007 for Apple7), or None."""
        return self.highest.get("apple")

    def label(self) -> str:
        """"Apple M1 Ultra (macOS 26.6.1)": how messages name the host (the system as
        platform.system names it where it is not macOS: "... (Linux)"); control characters and
        bidi overrides of the capture's text escaped (:func:`escape`), safe to print."""
        system = self.os.get("system") or ""
        version = self.os.get("version") or ""
        where = f"macOS {version}" if system == "Darwin" and version else " ".join(v for v in (system, version) if v)
        return escape(f"{self.device or 'the host'}" + (f" ({where})" if where else ""))


@dataclass(frozen=True)
class AboveHost:
    """One answer a profile gives above the host's.

    Attributes:
        key: the profile key (``appleFamilyMax``, ``maxThreadgroupMemoryLength``, ...).
        profile: the profile's value; host: the host's (None: the host answers none).
        over: by how much (families, or bytes); None when the host has none.
        unit: "families" or "bytes".
        message: one sentence for stderr.
    """

    key: str
    profile: int
    host: int | None
    over: int | None
    unit: str
    message: str

    def to_dict(self) -> dict:
        """The JSON form (``profile check --host --json``)."""
        return {"key": self.key, "profile": self.profile, "host": self.host, "over": self.over,
                "unit": self.unit, "message": self.message}


def host_os(vm: bool | None = None) -> dict:
    """This machine's ``os`` block: platform.system/release/machine, on macOS the product
    version (platform.mac_ver: "26.6.1"; empty strings where Python cannot tell), and ``vm``
    as given (whether it is a VM guest: :func:`capshim.host.is_vm_guest`; None unknown)."""
    return {"system": platform.system(), "release": platform.release(),
            "version": platform.mac_ver()[0] if platform.system() == "Darwin" else "",
            "machine": platform.machine(), "vm": vm}


def capture_of(stock: dict, os_info: dict[str, str] | None = None) -> dict:
    """The capture of a stock probe's answers (the probe's ``answers`` object): the module
    docstring's shape, ``os`` from :func:`host_os` unless given."""
    return {"schema": CAPTURE_SCHEMA_VERSION, "api": "metal", "capshim_version": __version__,
            "os": os_info if os_info is not None else host_os(), "stock": stock}


def require_host(cap: HostCapture) -> None:
    """Refuse a capture made inside a VM guest: its answers are the paravirtual device's, not
    the host's ceiling.

    Raises:
        JsonShapeError: (exit 2) ``os.vm`` is true, naming the file and ``$.os.vm``.
    """
    if cap.os.get("vm") is True:
        raise jsonread.JsonShapeError(f"{cap.source}: $.os.vm: made inside a VM guest: it holds the "
                                      "paravirtual device's answers, not the host's; run capshim probe "
                                      "--api metal --json on the Mac that runs the VM")


def read_capture(path: str | Path) -> HostCapture:
    """Read a capture file.

    Raises:
        JsonShapeError: (exit 2) not readable, not strict JSON, larger than
            :data:`CAPTURE_MAX_BYTES`, or not of :data:`CAPTURE_SCHEMA` (a capture of another
            API, a family number outside its range, a size that is not a u64); the message
            names the file and the JSON path; a key twice in one object is refused.
            The device name must follow the profiles' device-name rule (no control
            characters, at most 255 bytes): ``$.stock.device`` otherwise.
    """
    data = jsonread.load(path, limit=CAPTURE_MAX_BYTES, unique_keys=True)
    if isinstance(data, dict) and isinstance(data.get("api"), str) and data["api"] != "metal":
        raise jsonread.JsonShapeError(f"{path}: $.api: a capture of {escape(data['api'][:40])!r}, not of a "
                                      "Metal host")
    jsonread.check(data, CAPTURE_SCHEMA, str(path))
    stock = data["stock"]
    device = stock["device"]
    why = device_name_problem(device) if device is not None else None
    if why:
        shown = escape(device[:40]) + ("..." if len(device) > 40 else "")
        raise jsonread.JsonShapeError(f"{path}: $.stock.device: '{shown}': {why}")
    highest = {k: stock["highest"].get(k) for k in FAMILY_RANGES}
    return HostCapture(source=str(path), device=device, highest=highest,
                       threadgroup=stock["maxThreadgroupMemoryLength"],
                       working_set=stock["recommendedMaxWorkingSetSize"], os=dict(data["os"]),
                       capshim_version=data["capshim_version"])


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48] or "metal"


def profile_from_host(cap: HostCapture, name: str | None = None, with_name: bool = False) -> Profile:
    """The guest raise profile the host allows: ``appleFamilyMax`` = the host's Apple family and
    ``maxThreadgroupMemoryLength`` = the host's (each only where the capture has it), and with
    ``with_name`` the host's device name (``deviceName``, off by default). Nothing above the host;
    no working set (a guest has less memory than its host); no Mac, Common or Metal families.

    Returns:
        The profile, parsed from the TOML it is written as (``profile.text``), so it passes the
        same checks as a file.

    Raises:
        ProfileError: (exit 2) the capture has neither an Apple family nor threadgroup memory
            (nothing to answer), or ``name`` is not a profile name.
    """
    lines = []
    if cap.apple_family is not None:
        lines.append(f"appleFamilyMax = {cap.apple_family}")
    if cap.threadgroup is not None:
        lines.append(f"maxThreadgroupMemoryLength = {cap.threadgroup}")
    if not lines:
        raise ProfileError(cap.source, "$.stock", None, "the capture has no Apple family and no threadgroup "
                           "memory: no ceiling to answer")
    if with_name and cap.device:
        lines.append(f"{DEVICE_NAME_KEY} = {_toml_string(cap.device)}")
    name = name or f"host-{_slug(cap.device or 'metal')}"
    family = f"Apple{cap.apple_family - 1000}" if cap.apple_family else "no Apple family"
    tg = f"{cap.threadgroup} bytes" if cap.threadgroup is not None else "no threadgroup memory"
    desc = escape(f"Host ceiling of {cap.label()}: {family}, {tg} of threadgroup memory")[:200]
    text = (f"# Written by capshim profile from-host from {escape(cap.source)} (capture schema "
            f"{CAPTURE_SCHEMA_VERSION}, capshim {escape(cap.capshim_version)}).\n"
            f"# Answers exactly the host's ceilings, never more: check others with\n"
            f"# capshim profile check --host CAPTURE.json PROFILE\n"
            f"name = {_toml_string(name)}\napi = \"metal\"\ndirection = \"raise\"\nversion = 1\n"
            f"description = {_toml_string(desc)}\n\n[capabilities]\n" + "\n".join(lines) + "\n")
    return parse(text, f"from-host:{cap.source}")


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escaping is valid TOML for the characters a name may hold)."""
    return json.dumps(text, ensure_ascii=False)


#: The number of each range's first family's name (MTLGPUFamilyMetal3 = 5001, the others start at 1).
_FIRST_NAME = {"apple": 1, "mac": 1, "common": 1, "metal": 3}


def _family_name(key: str, family: int | None) -> str:
    """"Apple7 (1007)", "Metal4 (5002)", or "no Apple family"."""
    if family is None:
        return f"no {key.capitalize()} family"
    return f"{key.capitalize()}{family - FAMILY_RANGES[key][0] + _FIRST_NAME[key]} ({family})"


def above_host(profile: Profile, cap: HostCapture) -> tuple[list[AboveHost], list[str]]:
    """Each answer of the Metal ``profile`` above the host's in ``cap``, and notes.

    Compared: ``appleFamilyMax`` with the host's Apple family (over: in families),
    ``maxThreadgroupMemoryLength`` and ``recommendedMaxWorkingSetSize`` with the host's (over:
    in bytes), each of ``forceFamilies`` with the host's highest family of its range. Notes: an
    answer the capture cannot check (the host's value is null), a ``deviceName`` other than the
    host's (not above: a name has no order, but tunings keyed by it follow it).

    Raises:
        ProfileError: (exit 2) ``profile`` is not a Metal profile.
    """
    if profile.api != "metal":
        raise ProfileError(profile.source, "api", profile.api, "a host capture is a Metal host's: "
                           "check an api = \"metal\" profile against it")
    found: list[AboveHost] = []
    notes: list[str] = []
    caps = profile.capabilities
    if "appleFamilyMax" in caps:
        want, have = caps["appleFamilyMax"], cap.apple_family
        if have is None or want > have:
            over = None if have is None else want - have
            by = "" if over is None else f" by {over} famil{'y' if over == 1 else 'ies'}"
            found.append(AboveHost("appleFamilyMax", want, have, over, "families",
                                   f"appleFamilyMax = {_family_name('apple', want)} is above "
                                   f"the host's {_family_name('apple', have)}{by}: llama.cpp gates kernels on "
                                   "the family and may pick tunings for a newer chip than the host's GPU"))
    for key, have in (("maxThreadgroupMemoryLength", cap.threadgroup),
                      ("recommendedMaxWorkingSetSize", cap.working_set)):
        if key not in caps:
            continue
        want = caps[key]
        if have is None:
            notes.append(f"{key} = {want}: not checked, the capture has no {key}")
        elif want > have:
            found.append(AboveHost(key, want, have, want - have, "bytes",
                                   f"{key} = {want} bytes is above the host's {have} by {want - have} bytes "
                                   f"({want / have:.2f}x)" if have else
                                   f"{key} = {want} bytes is above the host's 0 by {want} bytes"))
    for fam in caps.get("forceFamilies") or []:
        rng = next((k for k, (lo, hi) in FAMILY_RANGES.items() if lo <= fam <= hi), None)
        if rng is None:  # the profile's own checks keep forceFamilies to these ranges
            continue
        have = cap.highest.get(rng)
        if have is None or fam > have:
            over = None if have is None else fam - have
            by = "" if over is None else f" by {over}"
            found.append(AboveHost("forceFamilies", fam, have, over, "families",
                                   f"forceFamilies {_family_name(rng, fam)} is above the host's "
                                   f"{_family_name(rng, have)}{by}"))
    if profile.device_name and profile.device_name != cap.device:
        notes.append(f"{DEVICE_NAME_KEY} = {profile.device_name!r} is not the host's name "
                     f"({cap.device!r}): applications that key tunings by name take that device's")
    return found, notes
