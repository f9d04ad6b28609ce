"""Profile operations on a device's probe result: the restore profile, and what a
raise profile answers beyond the device.

Both take a capability-shaped probe result (``{"device": {"name": ...},
"capabilities": {key: answer}, "extensions": {name: spec version}}``, the
shape of :func:`capshim.backends.vulkan.probe` and of a backend's
``stock_answers``): answers in their JSON form (booleans, whole numbers,
versions as "MAJOR.MINOR.PATCH"), null when the device does not report a key.
"""

from __future__ import annotations

from dataclasses import dataclass

import tomli_w

from capshim.profiles.catalog import KEYS, KINDS
from capshim.profiles.language import parse
from capshim.profiles.model import Profile, format_version, parse_version

__all__ = ["Beyond", "beyond_device", "restore_profile", "GENERIC_EXTENSION_NOTE"]

GENERIC_EXTENSION_NOTE = "the device does not have it"


@dataclass(frozen=True)
class Beyond:
    """One answer a raise profile gives above what the device has.

    Attributes:
        key: the capability key, or the extension's name.
        what: "capability" or "extension".
        device: the device's answer (JSON form); None when it does not report
            the key or lacks the extension.
        reported: the profile's answer (JSON form; an extension's spec version).
        note: what becomes of it, in words.
    """

    key: str
    what: str
    device: object
    reported: object
    note: str

    def __str__(self) -> str:
        if self.what == "extension":
            seen = f"device: {self.device}" if self.device is not None else self.note
            return f"extension {self.key} {self.reported} ({seen})"
        if self.device is None:
            return f"{self.key} {_text(self.reported)} ({self.note})"
        return f"{self.key} {_text(self.reported)} (device: {_text(self.device)})"

    def event(self, shim: str, layer: str | None, pid: int) -> dict:
        """The ``beyond_device`` status event (JSON-lines fields as the shims write
        them: ``schema``, ``event``, ``shim``, ``layer`` when given, ``pid``, then
        ``key``, ``what``, ``device``, ``reported``, ``note``)."""
        ev: dict = {"schema": 1, "event": "beyond_device", "shim": shim}
        if layer is not None:
            ev["layer"] = layer
        ev.update({"pid": pid, "process": "capshim", "key": self.key, "what": self.what,
                   "device": self.device, "reported": self.reported, "note": self.note})
        return ev


def _text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _exceeds(kind: str, vtype: str, value: int, real: object) -> bool:
    """Whether a profile's resolved ``value`` claims more than the device's ``real``
    answer, by the key's kind (``catalog.KINDS``) and value type (``catalog.KEYS``).

    feature: true where the device says false; upper: more (flags: a bit the
    device lacks); lower: less (a smaller minimum is stronger); version:
    higher. An exact property is not "more" either way (its change is
    :func:`capshim.profiles.check_against_device`'s warning); lists have no order.
    """
    if kind == "feature":
        return bool(value) and real is False
    if kind == "version":
        return value > parse_version(real)
    if vtype == "families":
        return False
    if kind == "upper":
        return bool(value & ~int(real)) if vtype == "flags" else value > int(real)
    if kind == "lower":
        return value < int(real)
    return False


def beyond_device(profile: Profile, probe_result: dict,
                  extension_note: str = GENERIC_EXTENSION_NOTE) -> list[Beyond]:
    """Every answer a ``raise`` profile gives above what the device answers.

    A shim changes answers, not hardware: a size above the real one, a
    minimum below it, a feature or an extension the driver lacks fails, or is
    wrong, when the application uses it. A ``lower`` profile gives none;
    exact properties are :func:`capshim.profiles.check_against_device`'s.

    Args:
        profile: the profile (any API in the catalog).
        probe_result: the device's stock answers (module docstring).
        extension_note: what becomes of an added extension the device lacks
            (the backend's words, e.g. Vulkan's loader drops it at vkCreateDevice).

    Returns:
        One :class:`Beyond` per capability, then per extension, in profile order.
    """
    if profile.direction != "raise":
        return []
    kinds, types = KINDS[profile.api], KEYS[profile.api]
    shown = profile.to_dict()["capabilities"]
    caps = probe_result.get("capabilities", {})
    out = []
    for key, value in profile.capabilities.items():
        real = caps.get(key)
        if kinds[key] == "exact":
            continue
        if real is None:
            out.append(Beyond(key, "capability", None, shown[key], "the device does not report it"))
        elif _exceeds(kinds[key], types[key], value, real):
            out.append(Beyond(key, "capability", real, shown[key], "above the device"))
    have = probe_result.get("extensions", {})
    for ext, spec in profile.extensions.items():
        if spec and ext not in have:  # one the device lists keeps its own spec version (layer_answers.c)
            out.append(Beyond(ext, "extension", None, spec, extension_note))
    return out


def restore_profile(stock: dict, simulate: Profile, name: str | None = None) -> Profile:
    """A ``raise`` profile that answers, over ``simulate``, the stock values a probe saw.

    For each capability ``simulate`` lowers it restores the stock value (a
    feature only when the stock answer was true), and for each extension it
    hides that the stock device has, it re-adds it with the stock spec
    version. Together with ``--simulate`` this reproduces the seed's
    "unlocked guest" arm. The text is written with a TOML writer (tomli-w),
    so any device name is quoted correctly.

    Args:
        stock: a stock probe result of the device (module docstring).
        simulate: the device-role profile.
        name: the new profile's name (default ``unlock-<simulate's name>``).

    Raises:
        ProfileError: never for a valid ``simulate`` and probe result (the
            generated text is validated like any profile).
    """
    kinds = KEYS[simulate.api]
    caps: dict = {}
    for key in simulate.capabilities:
        val = stock["capabilities"].get(key)
        if val is None or (kinds[key] == "bool" and val is not True):
            continue
        if kinds[key] == "bool":
            caps[key] = True
        elif kinds[key] == "version":
            caps[key] = format_version(parse_version(val))
        else:
            caps[key] = int(val)
    exts = {ext: int(stock["extensions"][ext]) for ext in simulate.extensions if ext in stock.get("extensions", {})}
    pname = name or f"unlock-{simulate.name}"
    device = " ".join(str(stock["device"]["name"]).split())  # one line (the schema's description rule)
    doc = {"name": pname, "api": simulate.api, "direction": "raise", "version": 1,
           "description": f"Restore over {simulate.name} the stock answers of {device}"[:200],
           "capabilities": caps}
    if exts:
        doc["extensions"] = exts
    return parse(tomli_w.dumps(doc), f"generated:{pname}")
