"""What a profile will make the layer answer, and whether that answer is consistent.

The answer per key follows the key's kind (``capabilities.toml``,
``docs/capabilities.md``): ``feature`` and ``upper``/``version`` keys move only
in the profile's direction (a raise answers max(device, profile), a lower
min(device, profile); flags or/and), ``lower`` keys the other way round (less
is stronger), and an ``exact`` key, which the profile may set only with
``override_exact``, answers the profile's value. The layer applies the same
rules (``CAPSHIM_FIELDS_SEM`` in ``caps_table.h``).

Consistency rules (Vulkan specification):

* the table's ``[rules]``: ``minSubgroupSize <= subgroupSize <= maxSubgroupSize``
  (VkPhysicalDeviceSubgroupSizeControlProperties);
* a feature answered true needs a structure the application may query: its
  extension listed, or its core version (the guards of the table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capshim.profiles.catalog import KINDS, ORDERED
from capshim.profiles.model import Profile, escape, format_version, parse_version
from capshim.profiles.table import load as load_table


@dataclass(frozen=True)
class Finding:
    """One thing a profile does that a user must hear about.

    Attributes:
        key: the capability key (``subgroupSize``) or ``extension NAME``.
        device: the device's own answer (None when it has none).
        reported: what the layer will answer with the profile.
        severity: "refuse" (run, probe and bench stop, exit 2) or "warn".
        message: one line naming key and values; control characters escaped.
    """

    key: str
    device: Any
    reported: Any
    severity: str
    message: str

    def to_dict(self) -> dict:
        """The finding as JSON-ready data."""
        return {"key": self.key, "device": self.device, "reported": self.reported,
                "severity": self.severity, "message": self.message}


def _version_tuple(value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        major, minor = (int(p) for p in value.split(".")[:2])
        return major, minor
    return (value >> 22) & 0x7F, (value >> 12) & 0x3FF


def answer(kind: str, vtype: str, direction: str, device: Any, value: Any) -> Any:
    """What the layer answers for one key: the device's ``device`` under a profile's ``value``.

    Args:
        kind: the key's kind (feature, upper, lower, exact, version).
        vtype: the value type (bool, u32, flags, version, u64, family, families).
        direction: "raise" or "lower".
        device: the device's answer (bool, int; a version as int).
        value: the profile's value (bools as 0/1, versions packed).

    Returns:
        The answer, of the device's type (bool for bool keys).
    """
    raise_ = direction == "raise"
    if vtype == "bool":
        return bool(device or value) if raise_ else bool(device and value)
    if vtype == "flags":
        return device | value if raise_ else device & value
    if kind == "exact":
        return value
    if kind == "lower":
        raise_ = not raise_
    return max(device, value) if raise_ else min(device, value)


def reported_answers(profile: Profile, device_answers: dict) -> dict[str, Any]:
    """key -> the answer the layer will give under ``profile`` (keys the device reports; versions packed)."""
    kinds, types = KINDS[profile.api], load_table().keys[profile.api]
    vtypes = {k.key: k.type for k in types}
    out = {}
    for key, dev in device_answers.get("capabilities", {}).items():
        if dev is None or key not in kinds:
            continue
        if vtypes[key] == "version" and isinstance(dev, str):
            dev = parse_version(dev)
        out[key] = dev if key not in profile.capabilities else \
            answer(kinds[key], vtypes[key], profile.direction, dev, profile.capabilities[key])
    return out


def _extensions(profile: Profile, device_answers: dict) -> set[str]:
    exts = set(device_answers.get("extensions", {}))
    for name, spec in profile.extensions.items():
        (exts.add if spec else exts.discard)(name)
    return exts


def _available(key: str, api_version: tuple[int, int], exts: set[str]) -> bool:
    table = load_table()
    return any(table.structs[s].available(api_version, exts) for s, _ in table.entry("vulkan", key).structs)


def _feature_guards(key: str) -> str:
    table = load_table()
    names = []
    for s, _ in table.entry("vulkan", key).structs:
        st = table.structs[s]
        if st.extension:
            names.append(st.extension)
        elif st.core:
            names.append(f"Vulkan {st.core[0]}.{st.core[1]}")
    return " or ".join(dict.fromkeys(names))


def describe(profile: Profile) -> list[str]:
    """One line per key and extension: what the layer will answer with ``profile`` (for ``profile check``)."""
    vtypes = {k.key: k.type for k in load_table().keys[profile.api]}
    raise_ = profile.direction == "raise"
    out = []
    for key, value in profile.capabilities.items():
        kind, vtype = KINDS[profile.api][key], vtypes[key]
        shown = format_version(value) if vtype == "version" else value
        if vtype == "bool":
            text = "true (a feature the device lacks stays unusable)" if raise_ else "false"
        elif vtype == "flags":
            text = f"the device's bits {'plus' if raise_ else 'within'} {value:#x}"
        elif kind == "exact":
            text = f"{shown}, whatever the device does (override_exact)"
        else:
            stronger_up = (kind != "lower") == raise_
            text = f"{'at least' if stronger_up else 'at most'} {shown}, else the device's answer " \
                   f"({kind}: {'less' if kind == 'lower' else 'more'} is stronger)"
        out.append(f"{key}: {text}")
    for name, spec in profile.extensions.items():
        out.append(f"extension {name}: " + (
            "hidden" if spec == 0 else f"added with spec version {spec} where the device lacks it (a device "
                                       "that lists it keeps its own spec version; the loader drops an added "
                                       "one at vkCreateDevice when the driver lacks it)"))
    return [escape(line) for line in out]


def _hidden_features(profile: Profile) -> dict[str, list[str]]:
    """Hidden extension -> the features of its structures that a ``lower`` profile leaves alone."""
    if profile.api != "vulkan" or profile.direction != "lower":
        return {}
    table = load_table()
    hidden = {name for name, spec in profile.extensions.items() if spec == 0}
    out: dict[str, list[str]] = {}
    for k in table.keys["vulkan"]:
        guards = {table.structs[s].extension for s, _ in k.structs}
        if k.kind == "feature" and k.key not in profile.capabilities and guards <= hidden:
            out.setdefault(min(guards), []).append(k.key)
    return out


def _hidden_finding(ext: str, keys: list[str], device: Any) -> Finding:
    return Finding(f"extension {ext}", device, device, "warn",
                   f"extension {ext} is hidden but {', '.join(keys)} keep{'s' if len(keys) == 1 else ''} the "
                   f"device's answer: set {'it' if len(keys) == 1 else 'them'} false to hide "
                   f"{'it' if len(keys) == 1 else 'them'} too")


def _no_effect(profile: Profile, device_answers: dict) -> list[Finding]:
    """Keys of a ``lower`` profile whose value cannot lower the device's answer.

    The layer answers min(device, profile) (or the device's bits within the
    profile's, or false only where the profile says false), so a value beyond
    the device's answer (minSubgroupSize 4 on a device with 8, apiVersion
    1.3.999, a limit above the device's) is clamped to the device's answer.
    A value equal to the device's answer is taken as deliberate and not named.
    """
    if profile.direction != "lower":
        return []
    kinds = KINDS[profile.api]
    vtypes = {k.key: k.type for k in load_table().keys[profile.api]}
    dev_caps = device_answers.get("capabilities", {})
    out = []
    for key, value in profile.capabilities.items():
        dev = dev_caps.get(key)
        if dev is None or kinds[key] == "exact":
            continue
        if vtypes[key] == "version" and isinstance(dev, str):
            dev = parse_version(dev)
        if answer(kinds[key], vtypes[key], "lower", dev, value) != dev or value == dev:
            continue
        if vtypes[key] == "bool" and (bool(value) == bool(dev)):
            continue

        def show(v: Any) -> Any:
            if vtypes[key] == "version":
                return format_version(v)
            if vtypes[key] == "bool":
                return "true" if v else "false"
            return f"{v:#x}" if vtypes[key] == "flags" else v

        out.append(Finding(key, dev_caps.get(key), dev_caps.get(key), "warn",
                           f"{key} = {show(value)}: no effect: the device already answers {show(dev)}; "
                           f"a lower profile never raises"))
    return out


def check_alone(profile: Profile) -> list[Finding]:
    """Findings a profile has without a device (what ``profile check`` can say).

    The refusals a profile alone decides (an exact key without
    ``override_exact``, subgroup sizes out of order) are raised by
    :func:`capshim.profiles.parse`; this returns the warnings: a ``lower``
    profile that hides an extension but leaves features of that extension as
    the device answers them (one finding per extension, key ``extension NAME``).
    """
    return [_hidden_finding(ext, keys, None) for ext, keys in _hidden_features(profile).items()]


def check_against_device(profile: Profile, device_answers: dict) -> list[Finding]:
    """Findings of ``profile`` on one device: what ``run``, ``probe`` and ``bench`` must refuse or warn.

    Args:
        profile: a parsed profile (:func:`capshim.profiles.load`).
        device_answers: the device's stock answers, as ``capshim probe --json``
            prints them (``{"device": {"apiVersion": "1.3.230", ...},
            "capabilities": {key: value or None}, "extensions": {name: spec}}``).

    Returns:
        Findings, refusals first: ``refuse`` when the answers would break a
        consistency rule (subgroup sizes out of order; a feature turned on
        whose structure the device may not be queried for); ``warn`` when an
        exact property changes (``override_exact``), for a ``lower`` value
        with no effect, for a raise's extension spec version the layer does
        not report (the device lists the extension: the layer keeps the
        device's spec version, ``layer.c``) and for what :func:`check_alone`
        finds. Metal profiles: none.
    """
    if profile.api != "vulkan":
        return []
    dev_caps = device_answers.get("capabilities", {})
    reported = reported_answers(profile, device_answers)
    refuse: list[Finding] = []
    warn: list[Finding] = []
    for key in profile.capabilities:
        if KINDS["vulkan"][key] == "exact" and key in reported and reported[key] != dev_caps.get(key):
            warn.append(Finding(key, dev_caps.get(key), reported[key], "warn",
                                f"{key}: exact property answered {reported[key]}, the device does "
                                f"{dev_caps.get(key)} (override_exact): shaders still run as the device does"))
    warn += _no_effect(profile, device_answers)
    for seq in ORDERED:
        answers = [(k, reported[k]) for k in seq if k in reported]
        for (lo_key, lo), (hi_key, hi) in zip(answers, answers[1:]):
            if lo > hi:
                key = hi_key if hi_key in profile.capabilities else lo_key
                refuse.append(Finding(key, dev_caps.get(key), reported[key], "refuse",
                                      f"{lo_key} {lo} > {hi_key} {hi} after the profile (device: {lo_key} "
                                      f"{dev_caps.get(lo_key)}, {hi_key} {dev_caps.get(hi_key)}); the spec "
                                      f"requires {' <= '.join(seq)}"))
    exts = _extensions(profile, device_answers)
    api = reported.get("apiVersion")
    api_version = _version_tuple(api if api is not None else device_answers.get("device", {}).get("apiVersion", "1.0"))
    for key, value in profile.capabilities.items():
        if KINDS["vulkan"][key] != "feature" or not reported.get(key, bool(value)):
            continue
        if dev_caps.get(key) is True or _available(key, api_version, exts):
            continue
        refuse.append(Finding(key, dev_caps.get(key), True, "refuse",
                              f"{key} answered true, but no structure holding it can be queried on this device "
                              f"(Vulkan {format_version((api_version[0] << 22) | (api_version[1] << 12))}, needs "
                              f"{_feature_guards(key)}): add the extension or leave {key} out"))
    for name, spec in profile.extensions.items():
        have = device_answers.get("extensions", {}).get(name)
        if spec and have is not None and spec != int(have):
            warn.append(Finding(f"extension {name}", int(have), int(have), "warn",
                                f"extension {name} = {spec}: the device lists it with spec version {have}, "
                                f"which the layer keeps (a raise adds only extensions the device lacks)"))
    for ext, keys in _hidden_features(profile).items():
        on = [k for k in keys if dev_caps.get(k) is True]
        if on and ext in device_answers.get("extensions", {}):
            warn.append(_hidden_finding(ext, on, True))
    return [Finding(f.key, f.device, f.reported, f.severity, escape(f.message)) for f in refuse + warn]
