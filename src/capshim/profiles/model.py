"""The profile model: :class:`Profile`, :class:`ProfileError`, Vulkan version packing, escaping.

Nothing here reads or validates a profile (that is :mod:`capshim.profiles.language`);
these are the values every other profile module passes around.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from capshim.contracts.names import escape
from capshim.errors import CapshimError
from capshim.profiles.catalog import KEYS, STRING_KEYS

U32_MAX = 0xFFFFFFFF
U64_MAX = 0xFFFFFFFFFFFFFFFF
# VK_MAKE_API_VERSION (Vulkan specification): major 7 bits, minor 10, patch 12.
VERSION_FIELDS = (("major", 0x7F), ("minor", 0x3FF), ("patch", 0xFFF))
#: The profile key of the device-identity answer (a string, so outside the numeric table); the
#: same key in every API that takes it (Vulkan ``deviceName``, Metal ``MTLDevice.name``).
DEVICE_NAME_KEY = "deviceName"
#: The APIs whose shims answer :data:`DEVICE_NAME_KEY`.
DEVICE_NAME_APIS = ("vulkan", "metal")
#: VK_MAX_PHYSICAL_DEVICE_NAME_SIZE (vulkan_core.h) less the NUL: the longest name, in UTF-8 bytes,
#: in both APIs (native/common/devname.h, the C side of the same rule).
DEVICE_NAME_MAX_BYTES = 255
#: A device name's text: no C0, DEL or C1 controls (devname.h refuses them too).
DEVICE_NAME_TEXT_RE = r"\A[^\x00-\x1f\x7f-\x9f]*\Z"
#: CUDA's cudaDeviceProp.name is char[256] too (CUDA 13.0 driver_types.h): the same limit.


def name_key(api: str) -> str:
    """The profile key of the device-name answer for ``api``: CUDA's ``name`` (the table's string
    key), else ``deviceName``."""
    return STRING_KEYS.get(api, DEVICE_NAME_KEY)


_VERSION_TEXT = re.compile(r"[0-9]{1,9}\.[0-9]{1,9}(\.[0-9]{1,9})?")


def encode_device_name(name: str) -> str:
    """``name`` as a shim's configuration carries it (Vulkan ``deviceName=``, Metal
    ``CAPSHIM_METAL_DEVICE_NAME``): UTF-8, percent-encoded, only RFC 3986's unreserved bytes
    (``A-Z a-z 0-9 - . _ ~``) kept, as ``native/common/devname.h`` decodes it
    ("Apple M1 Ultra" -> "Apple%20M1%20Ultra")."""
    return urllib.parse.quote(name, safe="")


def device_name_problem(name: object) -> str | None:
    """Why ``name`` is not a device name capshim answers or records, or None when it is: a
    string of 1..:data:`DEVICE_NAME_MAX_BYTES` UTF-8 bytes matching :data:`DEVICE_NAME_TEXT_RE`."""
    if not isinstance(name, str) or not name or not re.match(DEVICE_NAME_TEXT_RE, name):
        return (f"expected a device name: a string of 1..{DEVICE_NAME_MAX_BYTES} UTF-8 bytes without "
                "control characters")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "not UTF-8 (a lone surrogate)"
    if size > DEVICE_NAME_MAX_BYTES:
        return (f"{size} bytes in UTF-8: longer than {DEVICE_NAME_MAX_BYTES} (capshim's limit in every API: "
                "VkPhysicalDeviceProperties::deviceName holds VK_MAX_PHYSICAL_DEVICE_NAME_SIZE = 256 with the NUL)")
    return None


def _show(value: Any, limit: int = 80) -> str:
    """A value as the profile (TOML) spells it: true/false, integers, quoted strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 1000 else f"<{value.bit_length()}-bit integer>"
    return text if len(text) <= limit else text[:limit] + "..."


class ProfileError(CapshimError):
    """An invalid profile (exit 2).

    Attributes:
        source: the file path or ``builtin:NAME``.
        key: the dotted key at fault (``capabilities.shaderFloat16``), or None.
        value: the offending value as written, or None.
        reason: why it is rejected.
    """

    def __init__(self, source: str, key: str | None, value: Any, reason: str):
        self.source, self.key, self.value, self.reason = source, key, value, reason
        parts = [f"profile {source}"]
        if key is not None:
            parts.append(f"key '{key}'")
        if value is not None:
            parts.append(f"value {_show(value)}")
        parts.append(reason)
        super().__init__(escape(": ".join(parts)))




def parse_version(text: str | int) -> int:
    """A Vulkan version "MAJOR.MINOR[.PATCH]" or an integer, as VK_MAKE_API_VERSION(0, ...).

    Source: Vulkan specification, VK_MAKE_API_VERSION (variant 0, major << 22,
    minor << 12, patch).

    Raises:
        ValueError: a component does not fit its field (major 0..127, minor
            0..1023, patch 0..4095), the text is not MAJOR.MINOR[.PATCH] of ASCII
            digits (``1.-3``, ``1.3_0``, `` 1.3`` are not), or an integer (packed, as
            vulkaninfo writes ``apiVersion``) is not a 32-bit unsigned value.
    """
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ValueError(f"{text!r} is not a version (\"MAJOR.MINOR[.PATCH]\" or a packed integer)")
    if isinstance(text, int):
        if not 0 <= text <= 0xFFFFFFFF:
            raise ValueError(f"{text} does not fit a packed 32-bit Vulkan version (0..{0xFFFFFFFF})")
        return text
    if not _VERSION_TEXT.fullmatch(text):
        raise ValueError(f"{escape(repr(text))} is not MAJOR.MINOR[.PATCH] (ASCII digits)")
    parts = [int(p) for p in text.split(".")] + [0]
    for (name, top), part in zip(VERSION_FIELDS, parts):
        if part > top:
            raise ValueError(f"{name} {part} does not fit VK_MAKE_API_VERSION (0..{top})")
    return (parts[0] << 22) | (parts[1] << 12) | parts[2]


def parse_cc(value: str | int) -> int:
    """A CUDA compute capability "MAJOR.MINOR" (one digit of minor) or ``major * 10 + minor`` as
    the one integer the CUDA shim takes (7.5 -> 75; 10.0 -> 100).

    Raises:
        ValueError: not MAJOR.MINOR with a one-digit minor, or outside 1.0..99.9 (10..999).
    """
    if isinstance(value, str):
        major, dot, minor = value.partition(".")
        if not (dot and major.isdigit() and minor.isdigit() and len(minor) == 1 and len(major) <= 2):
            raise ValueError(f"'{value}' is not a compute capability MAJOR.MINOR (7.5)")
        value = int(major) * 10 + int(minor)
    if not 10 <= value <= 999:
        raise ValueError(f"{value} is not a compute capability 1.0..99.9 (10..999: major * 10 + minor)")
    return value


def format_cc(value: int) -> str:
    """``major * 10 + minor`` as "MAJOR.MINOR" (75 -> "7.5")."""
    return f"{value // 10}.{value % 10}"


def format_value(vtype: str, value: Any) -> Any:
    """A capability value of type ``vtype`` (``catalog.KEYS``) in the profiles' notation: a compute
    capability "7.5" (not 75), a version "1.3.280", a boolean true/false, flags in hex; other values
    as they are. A value of another shape (text a probe already formatted) is returned unchanged."""
    if isinstance(value, bool) or not isinstance(value, int):
        return ("true" if value else "false") if isinstance(value, bool) else value
    if vtype == "cc":
        return format_cc(value)
    if vtype == "version":
        return format_version(value)
    if vtype == "bool":
        return "true" if value else "false"
    return f"{value:#x}" if vtype == "flags" else value


def format_answer(api: str, key: str, value: Any) -> Any:
    """One answer of ``api``'s capability ``key`` in the profiles' notation (:func:`format_value`;
    an unknown key or API: the value unchanged). Every message and table that shows an answer
    (``computeCapability 7.5``, ``shaderFloat16 false``) formats it here."""
    return format_value(KEYS.get(api, {}).get(key, ""), value)


def format_version(v: int) -> str:
    """VK_API_VERSION_MAJOR.MINOR.PATCH of a packed Vulkan version."""
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


@dataclass(frozen=True)
class Profile:
    """A resolved, valid profile.

    Attributes:
        name, api, direction, version, description: as in the file.
        capabilities: key -> int (booleans as 0/1, versions packed, flag lists
            or'ed into a mask); units as the API defines them (bytes for sizes).
        extensions: Vulkan extension name -> spec version to report (0: hide).
        override_exact: the exact keys (``subgroupSize``) the profile may change.
        device_name: the device name to answer (Vulkan ``deviceName``, Metal ``MTLDevice.name``;
            ``[capabilities] deviceName``), or "" to keep the device's own; off by default, the
            built-in profiles leave it out.
        source: the file path, or ``builtin:NAME``.
        text: the file's text exactly as read (what the evidence bundle keeps).
        same_on_newer: keys the profile sets at the value every newer device of its API already
            answers (set so the profile describes its whole class): said once by ``profile show``
            and ``profile check``, never a no-effect warning on each run where the device agrees.
    """

    name: str
    api: str
    direction: str
    version: int
    description: str
    capabilities: dict[str, int] = field(default_factory=dict)
    extensions: dict[str, int] = field(default_factory=dict)
    override_exact: tuple[str, ...] = ()
    device_name: str = ""
    source: str = ""
    text: str = ""
    same_on_newer: tuple[str, ...] = ()

    @property
    def sha256(self) -> str:
        """SHA-256 (hex) of the profile's text."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    def to_dict(self) -> dict:
        """The resolved profile as plain JSON-ready data (booleans as true/false, versions as "1.3.280";
        ``override_exact`` and ``same_on_newer`` only when the profile has them)."""
        kinds = KEYS[self.api]
        caps = {}
        for key, value in self.capabilities.items():
            kind = kinds[key]
            caps[key] = bool(value) if kind == "bool" else format_version(value) if kind == "version" \
                else format_cc(value) if kind == "cc" else value
        if self.device_name:
            caps[name_key(self.api)] = self.device_name
        out = {
            "name": self.name, "api": self.api, "direction": self.direction,
            "version": self.version, "description": self.description,
            "capabilities": caps, "extensions": dict(self.extensions),
            "source": self.source, "sha256": self.sha256,
        }
        if self.override_exact:
            out["override_exact"] = list(self.override_exact)
        if self.same_on_newer:
            out["same_on_newer"] = list(self.same_on_newer)
        return out
