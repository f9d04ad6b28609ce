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

from capshim.contracts import messages
from capshim.profiles.catalog import KINDS, ORDERED
from capshim.profiles.model import Profile, escape, format_value, format_version, name_key, parse_version
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
        noop: "" for a finding that is not a no-op; else what :func:`no_effect` found:
            "clamped" (the layer answers something other than the profile asks)
            or "same" (the answer below already is what the profile asks).
    """

    key: str
    device: Any
    reported: Any
    severity: str
    message: str
    noop: str = ""

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
        shown = _show(vtype, value) if vtype in ("version", "cc") else value
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
    if profile.device_name:
        out.append(f"{name_key(profile.api)}: \"{profile.device_name}\" instead of the device's own name: for applications "
                   "that key tuning tables or workarounds by device name (llama.cpp has begun to: its Metal "
                   "flash-attention tunings follow the chip the name says, ggml-org/llama.cpp pull request "
                   "26570); every other answer still comes from the device below")
    if profile.same_on_newer:
        vals = {k: profile.capabilities[k] for k in profile.same_on_newer}
        shown = ", ".join(f"{k} = {_show(vtypes[k], v) if vtypes[k] in ('version', 'cc') else v}" for k, v in vals.items())
        out.append(f"same on newer devices: {shown}: every newer device already answers these, so on one they "
                   "change nothing (said here once; run, probe and bench do not warn about them)")
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


def _show(vtype: str, v: Any) -> Any:
    if vtype == "bool":
        return "true" if v else "false"
    return format_value(vtype, v)


def no_effect(profile: Profile, base: dict, base_name: str = "the device") -> list[Finding]:
    """Every answer ``profile`` asks for that the layer will not give over ``base``: one warning each.

    The one rule behind the no-op warnings of ``profile check --device``, ``run``,
    ``probe`` and ``bench`` (:func:`check_against_device`), for both directions.
    The layer answers by the key's kind (:func:`answer`): a raise only raises
    and a lower only lowers, where for a ``lower`` kind (a minimum such as
    ``minSubgroupSize``) less is stronger; so a value the direction clamps
    (``minSubgroupSize = 16`` in a raise profile over a device answering 8), a
    value equal to the answer below (``shaderFloat16 = true`` in a raise over a
    device that has it, an exact key at the device's value), a key a ``lower``
    profile sets that the device does not report, an extension a raise adds
    that is already listed (the layer keeps the listed spec version), one a
    lower hides that is not listed, and a ``deviceName`` equal to the name below
    all change nothing. (A value below the
    Vulkan spec's minimum never gets here: :func:`capshim.profiles.parse`
    refuses it, exit 2.)

    Args:
        profile: the profile.
        base: the answers below its layer, in probe form (module docstring of
            :mod:`capshim.profiles.ondevice`): the device's stock answers, or
            :func:`answers_after` the ``--simulate`` profile for the app role.
        base_name: how to name ``base`` in the messages.

    Returns:
        :class:`Finding` objects, severity "warn", one per answer, capabilities in
        profile order, then extensions; ``noop`` "clamped" where the application
        will see another value than the profile's (named one line each by
        :func:`check_against_device`), "same" where it already sees the
        profile's value (grouped into one line: :func:`group_same`).
    """
    kinds = KINDS[profile.api]
    vtypes = {k.key: k.type for k in load_table().keys[profile.api]}
    caps = base.get("capabilities", {})
    raise_ = profile.direction == "raise"
    out = []
    for key, value in profile.capabilities.items():
        kind, vtype, dev = kinds[key], vtypes[key], caps.get(key)
        shown = f"{key} = {_show(vtype, value)}: no effect"
        if dev is None:
            if not raise_ and kind != "exact":  # a raise's unreported key is beyond_device's
                out.append(Finding(key, None, None, "warn", f"{shown}: {base_name} does not report it", "same"))
            continue
        if vtype == "version" and isinstance(dev, str):
            dev = parse_version(dev)
        got = answer(kind, vtype, profile.direction, dev, value)
        if (bool(got) != bool(dev)) if vtype == "bool" else got != dev:
            continue
        same = bool(value) == bool(dev) if vtype == "bool" else value == dev
        if same and key in profile.same_on_newer:  # the profile says so once (profile show, profile check)
            continue
        text = f"{shown}: {base_name} already answers {_show(vtype, dev)}"
        if not same and kind != "exact":
            text += f"; a {profile.direction} profile never {'lowers' if raise_ else 'raises'}"
            if kind == "lower":
                text += f" ({key} is a minimum: less is stronger)"
        out.append(Finding(key, caps.get(key), caps.get(key), "warn", text, "same" if same else "clamped"))
    listed = base.get("extensions", {})
    for name, spec in profile.extensions.items():
        have = listed.get(name)
        if spec and have is not None:
            text = (f"extension {name} = {spec}: no effect: {base_name} already lists it with spec version "
                    f"{have}" if spec == int(have) else
                    f"extension {name} = {spec}: {base_name} lists it with spec version {have}, which the layer "
                    "keeps (a raise adds only extensions the device lacks)")
            out.append(Finding(f"extension {name}", int(have), int(have), "warn", text,
                               "same" if spec == int(have) else "clamped"))
        elif not spec and have is None:
            out.append(Finding(f"extension {name}", None, None, "warn",
                               f"extension {name} = false: no effect: {base_name} does not list it", "same"))
    below = base.get("device", {}).get("name") if isinstance(base.get("device"), dict) else None
    if profile.device_name and profile.device_name == below:
        out.append(Finding("deviceName", below, below, "warn",
                           f"deviceName = {profile.device_name!r}: no effect: {base_name} already answers it",
                           "same"))
    return out


#: Answers a grouped "same" line names before "(+N more)".
SAME_SHOWN = 3


def group_same(findings: list[Finding], base_name: str = "the device") -> list[Finding]:
    """The ``noop == "same"`` findings of :func:`no_effect` as one line (none when there are none):
    ``N answer(s) change nothing: the device already gives them (or lacks what is hidden): K = V, ...``.

    A profile that describes a whole target device (``vulkan-paravirt``) asks for
    many answers some devices already give; one line keeps them visible without
    burying the answers the layer changes or clamps."""
    same = [f for f in findings if f.noop == "same"]
    if not same:
        return []
    parts = [f.message.split(": no effect", 1)[0] for f in same]
    shown = messages.summarise(parts, first=SAME_SHOWN)  # the first few; capshim --verbose: every one
    return [Finding("no effect", None, None, "warn",
                    f"{len(same)} answer{'s' if len(same) > 1 else ''} change{'' if len(same) > 1 else 's'} "
                    f"nothing: {base_name} already gives {'them' if len(same) > 1 else 'it'} (or does not report, "
                    f"or list, what is lowered or hidden): {shown}", "same")]


def answers_after(profile: Profile, device_answers: dict) -> dict:
    """The answers an application sees through ``profile`` alone, in the same probe form as
    ``device_answers`` (versions as "MAJOR.MINOR.PATCH" where the device gave a string; an
    extension added by a raise with the profile's spec version): what the app role sees
    over ``--simulate``."""
    reported = reported_answers(profile, device_answers)
    caps = dict(device_answers.get("capabilities", {}))
    for key, value in reported.items():
        caps[key] = format_version(value) if isinstance(caps.get(key), str) else value
    exts = {n: v for n, v in device_answers.get("extensions", {}).items()}
    for name, spec in profile.extensions.items():
        if not spec:
            exts.pop(name, None)
        elif name not in exts and profile.direction == "raise":
            exts[name] = spec
    out = {**device_answers, "capabilities": caps, "extensions": exts}
    if profile.device_name and isinstance(device_answers.get("device"), dict):
        out["device"] = {**device_answers["device"], "name": profile.device_name}
    return out


def _cuda_order(profile: Profile, device_answers: dict) -> list[Finding]:
    """Warnings where the CUDA answers after the profile (min(device, profile) per key, the shim's
    rule) break a ``[rules] ordered`` sequence: a key the profile lowers below a related key it
    leaves at the device's value (``maxThreadsPerMultiProcessor = 512`` alone, on a device whose
    blocks take 1024 threads). A warning, not a refusal: the device still runs what the larger
    answer allows, and an ablation lowers keys one at a time on purpose (a profile that sets both
    keys out of order is refused by :func:`capshim.profiles.parse`)."""
    dev = device_answers.get("capabilities", {})
    after = {k: min(v, profile.capabilities[k]) if k in profile.capabilities and isinstance(v, int) else v
             for k, v in dev.items()}
    after.update({k: v for k, v in profile.capabilities.items() if k not in after})
    out = []
    for seq in ORDERED:
        answers = [(k, after[k]) for k in seq if isinstance(after.get(k), int)]
        for (lo_key, lo), (hi_key, hi) in zip(answers, answers[1:]):
            if lo > hi:
                key = hi_key if hi_key in profile.capabilities else lo_key
                out.append(Finding(key, dev.get(key), after[key], "warn",
                                   f"{lo_key} {lo} > {hi_key} {hi} after the profile (device: {lo_key} "
                                   f"{dev.get(lo_key)}, {hi_key} {dev.get(hi_key)}); every CUDA device has "
                                   f"{' <= '.join(seq)}: an application may size work by one and fail by the other; lower {lo_key} too"))
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


def check_against_device(profile: Profile, device_answers: dict, base: dict | None = None,
                         base_name: str = "the device") -> list[Finding]:
    """Findings of ``profile`` on one device: what ``profile check --device``, ``run``, ``probe``
    and ``bench`` must refuse or warn.

    Args:
        profile: a parsed profile (:func:`capshim.profiles.load`).
        device_answers: the device's stock answers, as ``capshim probe --json``
            prints them (``{"device": {"apiVersion": "1.3.230", ...},
            "capabilities": {key: value or None}, "extensions": {name: spec}}``).
        base: the answers below the profile's layer when they are not the
            device's (the app role over ``--simulate``: :func:`answers_after`);
            only the no-effect rule reads it.
        base_name: how the no-effect warnings name ``base``.

    Returns:
        Findings, refusals first: ``refuse`` when the answers would break a
        consistency rule (subgroup sizes out of order; a feature turned on
        whose structure the device may not be queried for); ``warn`` when an
        exact property changes (``override_exact``), for every answer that
        changes nothing (:func:`no_effect`, both directions, extensions
        included; the layer keeps a listed extension's spec version,
        ``layer_answers.c``) and for what :func:`check_alone` finds. Metal profiles: none;
        CUDA profiles: the no-effect warnings and answers after the profile that break a consistency
        rule (:func:`_cuda_order`, warnings: lower-only).
    """
    if profile.api == "cuda":  # lower-only: the consistency rules after min(device, profile), what changes nothing
        noops = no_effect(profile, device_answers if base is None else base, base_name)
        return [Finding(f.key, f.device, f.reported, f.severity, escape(f.message), f.noop)
                for f in _cuda_order(profile, device_answers) + [f for f in noops if f.noop == "clamped"]
                + group_same(noops, base_name)]
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
    noops = no_effect(profile, device_answers if base is None else base, base_name)
    warn += [f for f in noops if f.noop == "clamped"] + group_same(noops, base_name)
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
    for ext, keys in _hidden_features(profile).items():
        on = [k for k in keys if dev_caps.get(k) is True]
        if on and ext in device_answers.get("extensions", {}):
            warn.append(_hidden_finding(ext, on, True))
    return [Finding(f.key, f.device, f.reported, f.severity, escape(f.message), f.noop) for f in refuse + warn]
