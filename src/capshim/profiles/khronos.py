"""Khronos Vulkan Profiles JSON files -> capshim profiles, and device answers -> such a file.

The format is the Khronos Vulkan Profiles schema (``profiles-0.8-latest.json``
of KhronosGroup/Vulkan-Profiles; ``vulkaninfo --json`` writes one per device,
``VP_VULKANINFO_<device>_<driver>.json``). A file holds named capability blocks
(``capabilities``: ``extensions``, ``features``, ``properties``, ``formats``,
``queueFamiliesProperties``) and named profiles (``profiles``); a profile lists
the blocks it needs (``capabilities``: a name, or a list of alternatives of which
the first is taken here), the profiles it requires (``profiles``; ``requires``
read as the same), its ``api-version``, and ``optionals`` (capabilities a
device may have: not required, so not answered).

A required profile is looked up in the file, then in the profile folder: the
other ``*.json`` Vulkan Profiles files of the file's own folder (or the folders
given as ``profile_dirs``), as the Khronos Profiles layer reads every file of
its ``profile_dirs`` setting. Found, its capabilities are folded in (the note
names the file); found nowhere, it is named once ("requires X, not found in
FILE or folder DIR") and not answered. A structure given under two names that
are one structure (``VkPhysicalDeviceFooFeatures`` and its ``...KHR`` alias)
is named in the notes, as the Khronos layer warns of it.

Every capability a profile states becomes one of: a capshim answer (a key of
the capability table reached through its struct and member, ``limits.x``
included; a ``KHR``/``EXT`` suffix of a struct promoted to core is read as the
core name), or an entry of :attr:`Reading.unsupported` that names it (formats,
queue families, video, a struct or member capshim has no key for, a value the
layer cannot take). Nothing is dropped silently.

A capshim profile has one direction (:mod:`capshim.profiles.language`), so
:func:`derive` compares each answer with the device's and splits them: answers
weaker than the device's (and those equal) into a ``lower`` profile, stronger
ones into a ``raise`` profile; the layer takes the first as the device role
(``--simulate``) and the second as the application role (``--profile``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from capshim import jsonread
from capshim.contracts import messages
from capshim.contracts.suggest import did_you_mean
from capshim.profiles.catalog import FLAG_NAMES, KEYS, KINDS, LIMITS, ORDERED, SPEC_MIN
from capshim.profiles.checks import answer, check_against_device
from capshim.profiles.language import parse
from capshim.profiles.model import Profile, ProfileError, escape, format_version, parse_version
from capshim.profiles.table import load as load_table

__all__ = ["Reading", "is_khronos_ref", "read", "derive", "one_direction", "capture_reading", "split_ref", "reading_of_probe"]

API = "vulkan"
"""The API of every Khronos Vulkan Profiles file (the backend whose device splits it)."""
MAX_FILE_BYTES = 16 << 20
"""Largest Khronos profile file read (a vulkaninfo export is about 100 KiB; gpuinfo.org's under 1 MiB)."""
MAX_FOLDER_FILES = 256
"""Most ``*.json`` files of a profile folder read to find required profiles (the Khronos repository's
own profiles folder holds a few dozen); the rest are named in a note, not read."""
MAX_REQUIRES_DEPTH = 64
"""Deepest chain of required profiles read (Khronos' own tiers nest a few deep; a deeper chain is
refused before Python's recursion limit)."""
NOT_ANSWERED = ("formats", "queueFamiliesProperties", "videoProfiles")
"""Capability sections the layer does not answer (it hooks features, properties and extensions)."""
_VENDOR = re.compile(r"(KHR|EXT|NV|AMD|INTEL|ARM|QCOM|VALVE|MESA)$")
_BIT_VENDOR = {"task": "EXT", "mesh": "EXT"}
"""Flag bits whose Vulkan name carries a vendor suffix after BIT (VK_SHADER_STAGE_TASK_BIT_EXT,
vulkan_core.h); the table's other vendor bits spell it in their name (partitioned_nv)."""


@dataclass
class Reading:
    """One profile of a Khronos file, read into capshim's keys.

    Attributes:
        name: the Khronos profile name (``VP_KHR_roadmap_2022``).
        source: the reference as given (``FILE.json#NAME``).
        label: the file's label or description of the profile (one line).
        capabilities: capshim key -> value (bools as bool, versions packed, flags as masks).
        extensions: device extension -> spec version the profile states.
        unsupported: one line per capability not answered, naming it and why.
        notes: how the profile was resolved (required profiles, alternatives chosen).
    """

    name: str
    source: str
    label: str = ""
    capabilities: dict = field(default_factory=dict)
    extensions: dict = field(default_factory=dict)
    unsupported: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    spellings: dict = field(default_factory=dict, repr=False)  # core struct name -> (first spelling, block)
    aliases_named: set = field(default_factory=set, repr=False)


def _json_name(path: str) -> bool:
    return path.lower().endswith(".json")


def split_ref(ref: str) -> tuple[str, str | None]:
    """``FILE.json#PROFILE`` -> (FILE.json, PROFILE); without a profile: (ref, None).

    A reference ending in ``.json`` (any case) is the file whole, ``#`` in its folders included
    (``runs#1/x.json``); otherwise the file ends at the rightmost ``#`` whose left side ends in
    ``.json`` (``runs#1/x.json#VP_A``), and the rest is the profile name (``x.json#`` names none)."""
    ref = str(ref)
    if _json_name(ref):
        return ref, None
    for at in [i for i, c in enumerate(ref) if c == "#"][::-1]:
        if _json_name(ref[:at]):
            return ref[:at], ref[at + 1:] or None
    return ref, None


def is_khronos_ref(ref: str) -> bool:
    """Whether a profile reference names a JSON file (``FILE.json`` or ``FILE.json#PROFILE``)."""
    return _json_name(split_ref(str(ref))[0])


def _index() -> dict[tuple[str, str], str]:
    """(struct, member path) -> capshim key, for every Vulkan key of the table."""
    out = {}
    for k in load_table().keys["vulkan"]:
        for struct, member in k.structs:
            out.setdefault((struct, member), k.key)
    return out


def _core_name(struct: str, known: set[str]) -> str:
    """``VkPhysicalDeviceFooFeaturesKHR`` -> ``VkPhysicalDeviceFooFeatures`` when only the latter is known;
    the ``Features2``/``Properties2`` wrappers are unwrapped by the caller."""
    if struct in known:
        return struct
    bare = _VENDOR.sub("", struct)
    return bare if bare in known else struct


def _flag_mask(key: str, value, where: str, unsupported: list) -> int | None:
    """A list of FlagBits names (``VK_SUBGROUP_FEATURE_BASIC_BIT``, whole: ``..._XBASIC_BIT`` is no
    bit; a vendor suffix after ``BIT`` is an alias) or an integer -> the mask."""
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value <= 0xFFFFFFFF:
            return value
        unsupported.append(f"{where}: {value} is not a 32-bit mask of flag bits")
        return None
    if not isinstance(value, list):
        unsupported.append(f"{where}: {value!r} is not a list of flag names")
        return None
    bits, mask = FLAG_NAMES[key], 0
    known = {_no_vendor(_flag_names(key, bit)[0]): bit for bit in bits.values()}
    for name in value:
        bit = known.get(_no_vendor(str(name)))
        if bit is None:
            unsupported.append(f"{where}: flag {name} (capshim knows {', '.join(bits)})")
            continue
        mask |= bit
    return mask


def _no_vendor(name: str) -> str:
    """A FlagBits name without its vendor suffix: ``VK_SHADER_STAGE_MESH_BIT_NV`` and ``..._EXT`` are one
    bit (aliases in vulkan_core.h), as are ``VK_SUBGROUP_FEATURE_ROTATE_BIT_KHR`` and ``..._ROTATE_BIT``."""
    return re.sub(r"_BIT_[A-Z]+$", "_BIT", name)


def _value(key: str, value, where: str, unsupported: list):
    """A JSON value as the capshim value of ``key`` (None, with a line in ``unsupported``, when it cannot be)."""
    vtype = KEYS["vulkan"][key]
    if vtype == "bool":
        if isinstance(value, bool):
            return value
    elif vtype == "flags":
        return _flag_mask(key, value, where, unsupported)
    elif vtype == "version":
        try:
            return parse_version(value)
        except ValueError as exc:  # a float, a bool, a negative, "1.3_0": listed, never dropped
            unsupported.append(f"{where}: {escape(repr(value))}: {exc}")
            return None
    elif isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFFFFFF:
        floor = SPEC_MIN.get("vulkan", {}).get(key)
        if floor is not None and value < floor:
            unsupported.append(f"{where}: {value} is below the Vulkan spec's required minimum {floor}")
            return None
        return value
    unsupported.append(f"{where}: {value!r} is not a {vtype} value")
    return None


def _members(value: dict, prefix: str = ""):
    """(member path, value) of a struct's JSON, nested structs (``limits``) flattened to ``limits.x``."""
    for name, v in value.items():
        if isinstance(v, dict):
            yield from _members(v, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", v


def _read_structs(section: str, structs: dict, block: str, out: Reading) -> None:
    """Map one block's ``features`` or ``properties`` onto capshim keys (unknown ones listed)."""
    index = _index()
    known = {s for s, _ in index}
    for struct, body in structs.items():
        if struct in ("VkPhysicalDeviceFeatures2", "VkPhysicalDeviceProperties2") and isinstance(body, dict):
            member = "features" if "Features" in struct else "properties"
            for other in sorted(set(body) - {member}):  # its one member is the wrapped struct
                out.unsupported.append(f"{struct}.{other}: not a member of {struct} (its {member} member "
                                       f"holds the {struct[:-1]} values)")
            body, struct = body.get(member, {}), struct[:-1]
        if not isinstance(body, dict):
            out.unsupported.append(f"{block}.{section}.{struct}: not an object")
            continue
        name = _core_name(struct, known)
        _note_alias(out, name, struct, block)
        missing = []
        for member, value in _members(body):
            key = index.get((name, member))
            if key is None:
                missing.append(member)
                continue
            if KINDS["vulkan"][key] == "exact":
                out.unsupported.append(f"{struct}.{member} = {value!r}: an exact property (what the hardware "
                                       "does) is not simulated; set it in a TOML profile with override_exact")
                continue
            got = _value(key, value, f"{struct}.{member}", out.unsupported)
            if got is not None:
                _state(out, key, got, f"{struct}.{member}")
        if missing:
            what = "struct not in capshim's table" if name not in known else "no capshim key"
            out.unsupported.append(f"{struct} ({what}; block {block}): {len(missing)} member(s): {', '.join(missing)}")


def _note_alias(out: Reading, name: str, struct: str, block: str) -> None:
    """Name a structure given under two spellings of one structure (``VkPhysicalDeviceFooFeatures`` in
    one place, its ``...KHR`` alias in another), once: the values of both are read, and a member stated
    twice keeps the stronger value (:func:`_state`). The Khronos Profiles layer warns of the same case."""
    first, first_block = out.spellings.setdefault(name, (struct, block))
    if first == struct or (name, struct) in out.aliases_named:
        return
    out.aliases_named.add((name, struct))
    alias = ", ".join(s for s in (first, struct) if s != name)
    out.notes.append(f"{first} (block {first_block}) and {struct} (block {block}) are one structure "
                     f"({alias}: the alias of {name}): both are read; a member stated in both keeps the "
                     "stronger value")


def _state(out: Reading, key: str, value, where: str) -> None:
    """Record ``key`` = ``value``; a key already stated (a required profile, another block, another
    structure) keeps the stronger of the two, as the layer compares them (:func:`checks.answer`):
    a device that meets the profile meets both statements."""
    old = out.capabilities.get(key)
    if old is None or old == value:
        out.capabilities[key] = value
        return
    strong = answer(KINDS["vulkan"][key], KEYS["vulkan"][key], "raise", old, value)
    out.capabilities[key] = strong
    out.notes.append(f"{key} stated twice ({old!r}, then {value!r} at {where}): the stronger, {strong!r}, "
                     "is answered (a device meeting the profile meets both)")


def _read_block(name: str, block, out: Reading) -> None:
    if not isinstance(block, dict):
        out.unsupported.append(f"capability block {name}: not an object")
        return
    for section, body in block.items():
        if section == "extensions" and isinstance(body, dict):
            for ext, spec in body.items():
                ok = re.fullmatch(r"VK_[A-Za-z0-9_]+", str(ext)) and len(ext) <= LIMITS["extension_name_max"]
                if ok and isinstance(spec, int) and not isinstance(spec, bool) and 0 < spec <= 0xFFFFFFFF:
                    out.extensions[ext] = max(spec, out.extensions.get(ext, 0))  # stated twice: the newer
                else:
                    out.unsupported.append(f"{name}.extensions.{ext} = {spec!r}: not an extension and spec version")
        elif section in ("features", "properties") and isinstance(body, dict):
            _read_structs(section, body, name, out)
        elif section in ("extensions", "features", "properties"):
            out.unsupported.append(f"{name}.{section}: not an object")
        elif section in NOT_ANSWERED:
            count = len(body) if isinstance(body, (dict, list)) else 1
            out.unsupported.append(f"{name}.{section}: {count} entr{'y' if count == 1 else 'ies'} "
                                   "(capshim's layer does not answer formats, queue families or video)")
        else:
            out.unsupported.append(f"{name}.{section}: unknown section (not in the Vulkan Profiles schema)")


_NAMES = {"type": "array", "items": {"type": "string"}}
_ENTRIES = {"type": "array", "items": {"anyOf": [{"type": "string"}, _NAMES]}}
SHAPE = {"type": "object", "properties": {"profiles": {"type": "object", "additionalProperties": {
    "type": "object", "properties": {"capabilities": _ENTRIES, "optionals": _ENTRIES,
                                     "profiles": _NAMES, "requires": _NAMES}}}}}
"""The parts of the Khronos profiles schema (profiles-0.8) that reading relies on: each profile an
object whose ``capabilities``/``optionals`` are names or lists of alternative names and whose
``profiles``/``requires`` are names. Values inside blocks are checked one by one (listed, not refused)."""


def _some(names: list[str], shown: int = 10) -> str:
    """The first ``shown`` names and how many more: a file may hold thousands."""
    more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more or "none"


def _pick(profiles: dict, wanted: str | None, source: str) -> str:
    names = sorted(profiles)
    if wanted is not None:
        if wanted not in profiles:
            raise ProfileError(source, f"profiles.{wanted[:80]}", None, "no such profile in the file"
                               + did_you_mean(wanted, names) + f"; it has: {_some(names)}")
        return wanted
    if len(names) != 1:
        raise ProfileError(source, "profiles", None, f"the file has {len(names)} profiles; pick one with "
                           f"FILE.json#NAME: {_some(names)}")
    return names[0]


class _Folder:
    """The profile folder of one read: the other Vulkan Profiles files of ``dirs``, indexed by profile
    name on first use (bounded: :data:`MAX_FOLDER_FILES` files, each :data:`MAX_FILE_BYTES`). A file
    that is not a Vulkan Profiles file (another JSON) is passed over; the first file holding a name wins."""

    def __init__(self, dirs: list[Path], own: Path):
        self.dirs, self.own, self.index = dirs, own, None
        self.notes: list[str] = []

    def describe(self) -> str:
        return " or ".join(f"folder {d}" for d in self.dirs) or "no folder"

    def find(self, name: str) -> tuple[dict, str] | None:
        if self.index is None:
            self.index = {}
            own = self.own.resolve()
            files = sorted(p for d in self.dirs if d.is_dir() for p in d.glob("*.json") if p.resolve() != own)
            if len(files) > MAX_FOLDER_FILES:
                self.notes.append(f"profile folder: {len(files)} JSON files, the first {MAX_FOLDER_FILES} read")
            for path in files[:MAX_FOLDER_FILES]:
                try:
                    other = jsonread.load(path, limit=MAX_FILE_BYTES, unique_keys=True)
                    jsonread.check(other, SHAPE, str(path))
                except (jsonread.JsonShapeError, OSError):
                    continue
                if isinstance(other, dict) and isinstance(other.get("profiles"), dict) \
                        and isinstance(other.get("capabilities", {}), dict):
                    for prof in other["profiles"]:
                        self.index.setdefault(prof, (other, str(path)))
        return self.index.get(name)


def _resolve(doc: dict, name: str, out: Reading, seen: tuple[str, ...], done: set[str],
             where: str, folder: _Folder) -> None:
    """Fold profile ``name`` of ``doc`` (the file ``where``; its required profiles first, as the schema
    orders them, each from ``doc`` or else the profile ``folder``) into ``out``; a profile already folded
    (``done``: required twice, or by two others) is folded once."""
    profiles, blocks = doc.get("profiles", {}), doc.get("capabilities", {})
    if name in seen:
        raise ProfileError(where, f"profiles.{name}", None, f"requires itself ({' -> '.join(seen + (name,))})")
    if name in done:
        return
    if len(seen) > MAX_REQUIRES_DEPTH:
        chain = " -> ".join(seen[:3] + ("...",) + seen[-2:])
        raise ProfileError(where, f"profiles.{seen[0]}", None, f"requires profiles nested deeper than "
                           f"{MAX_REQUIRES_DEPTH} ({chain})")
    done.add(name)
    prof = profiles[name]
    for req in prof.get("profiles", []) + prof.get("requires", []):
        if req in profiles:
            req_doc, req_where, note = doc, where, f"{name} requires {req}: its capabilities are included"
        elif (found := folder.find(req)) is not None:
            (req_doc, req_where), note = found, None
            note = f"{name} requires {req}, found in {req_where}: its capabilities are included"
        else:
            if req not in done:
                done.add(req)
                out.unsupported.append(f"{name} requires {req}, not found in {where} or {folder.describe()} "
                                       "(not answered)")
            continue
        if req not in done:
            out.notes.append(note)
        _resolve(req_doc, req, out, seen + (name,), done, req_where, folder)
    api = prof.get("api-version")
    if api is not None:
        got = _value("apiVersion", api, f"{name}.api-version", out.unsupported)
        if got is not None:
            out.capabilities["apiVersion"] = max(got, out.capabilities.get("apiVersion", 0))
    for entry in prof.get("capabilities", []):
        if isinstance(entry, list):
            if not entry:
                continue
            out.notes.append(f"{name}: alternatives {', '.join(map(str, entry))}: the first, {entry[0]}, is used")
            entry = entry[0]
        if entry not in blocks:
            raise ProfileError(where, f"profiles.{name}.capabilities", entry, "names no capability block")
        _read_block(str(entry), blocks[entry], out)
    for entry in prof.get("optionals", []):
        out.unsupported.append(f"{name}: optional capabilities {entry}: optional, so not answered")


def read(ref: str, profile_dirs: list[str | Path] | None = None) -> Reading:
    """Read ``FILE.json`` or ``FILE.json#PROFILE`` (bounded, strict JSON: :mod:`capshim.jsonread`).

    Args:
        ref: the reference.
        profile_dirs: the folders whose other Vulkan Profiles files hold the profiles the chosen one
            requires (the Khronos layer's ``profile_dirs``); None: the file's own folder.

    Raises:
        ProfileError: unreadable or not a Vulkan Profiles file, no such or no single profile,
            a profile that requires itself, a capability name with no block.
    """
    path, wanted = split_ref(ref)
    try:
        doc = jsonread.load(Path(path), limit=MAX_FILE_BYTES, unique_keys=True)
    except jsonread.JsonShapeError as exc:
        raise ProfileError(ref, None, None, str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("profiles"), dict) \
            or not isinstance(doc.get("capabilities", {}), dict):
        raise ProfileError(ref, None, None, "not a Vulkan Profiles file (a JSON object with \"profiles\" and "
                           "\"capabilities\" objects: the Khronos profiles schema)")
    try:
        jsonread.check(doc, SHAPE, path)
    except jsonread.JsonShapeError as exc:
        raise ProfileError(ref, None, None, str(exc)) from None
    name = _pick(doc["profiles"], wanted, ref)
    prof = doc["profiles"][name]
    label = prof.get("label") or prof.get("description") or name
    out = Reading(name=name, source=ref, label=escape(" ".join(str(label).split())))
    folder = _Folder([Path(path).parent] if profile_dirs is None else [Path(d) for d in profile_dirs],
                     Path(path))
    _resolve(doc, name, out, (), set(), ref, folder)
    out.notes += folder.notes
    out.unsupported = [escape(u) for u in out.unsupported]  # names from the file, safe to print
    out.notes = [escape(n) for n in out.notes]
    return out


def _profile_name(reading: Reading, direction: str) -> str:
    base = re.sub(r"[^a-z0-9._-]+", "-", reading.name.lower()).strip("-._") or "khronos"
    return f"{base[:55]}-{direction}"


def _build(reading: Reading, direction: str, caps: dict, exts: dict) -> Profile:
    """A validated capshim profile of ``caps`` and ``exts`` (TOML written with tomli-w, parsed back)."""
    types = KEYS["vulkan"]
    doc = {"name": _profile_name(reading, direction), "api": "vulkan", "direction": direction, "version": 1,
           "description": f"{direction} to Khronos profile {escape(reading.name)} ({escape(reading.label)})"[:200],
           "capabilities": {k: (format_version(v) if types[k] == "version" else bool(v) if types[k] == "bool" else v)
                            for k, v in caps.items()}}
    if exts:
        doc["extensions"] = exts
    return parse(tomli_w.dumps(doc), f"{reading.source} ({direction})")


def _limit_extensions(exts: dict, reading: Reading, what: str) -> dict:
    cap = LIMITS["extensions_max"]
    if len(exts) > cap:
        left = sorted(exts)[cap:]
        reading.unsupported.append(f"{len(left)} extension(s) to {what} beyond the layer's {cap} per profile "
                                   f"(extensions_max): {', '.join(left)}")
    return {k: exts[k] for k in sorted(exts)[:cap]}


def one_direction(reading: Reading, direction: str) -> Profile:
    """The whole reading as one profile of ``direction`` (``import --direction``): answers the direction
    cannot give (a feature on in a lower profile, off in a raise one) are listed in ``unsupported``."""
    caps = {}
    for key, value in reading.capabilities.items():
        if KEYS["vulkan"][key] == "bool" and value != (direction == "raise"):
            reading.unsupported.append(f"{key} = {str(value).lower()}: a {direction} profile cannot say it "
                                       "(derive the direction per answer: leave --direction out)")
        else:
            caps[key] = value
    exts = {e: s for e, s in reading.extensions.items()} if direction == "raise" else {}
    return _build(reading, direction, caps, _limit_extensions(exts, reading, "add"))


def _split(reading: Reading, device: dict) -> tuple[dict, dict]:
    """key -> value of the lower part (weaker than or equal to the device) and of the raise part."""
    kinds, types = KINDS["vulkan"], KEYS["vulkan"]
    dev_caps = device.get("capabilities", {})
    lower, raise_, same = {}, {}, []
    for key, value in reading.capabilities.items():
        dev = dev_caps.get(key)
        if dev is None:
            (raise_ if types[key] != "bool" or value else lower)[key] = value
            continue
        dev = parse_version(dev) if types[key] == "version" and isinstance(dev, str) else dev
        if types[key] == "bool":
            if value and dev:
                same.append(key)  # a lower profile cannot say "on"; the device already answers it
            else:
                (raise_ if value else lower)[key] = value
        elif types[key] == "flags":
            if value & ~int(dev):
                raise_[key] = value
            if ~value & int(dev) or not value & ~int(dev):
                lower[key] = value
        else:
            stronger = answer(kinds[key], types[key], "raise", dev, value) != dev
            (raise_ if stronger else lower)[key] = value
    if same:
        reading.notes.append(f"{len(same)} feature(s) on in the file and on the device, answered by the device "
                             "itself: " + messages.summarise(same))
    return lower, raise_


def _drop_refused(profile: Profile, reading: Reading, device: dict, rebuild) -> Profile:
    """Leave out (and list) what the layer would refuse on this device: subgroup sizes out of order
    against the device's exact answers, a feature whose structure the device cannot be queried for."""
    for _ in range(8):
        refused = [f for f in check_against_device(profile, device) if f.severity == "refuse"]
        if not refused:
            return profile
        caps = dict(profile.capabilities)
        for f in refused:
            drop = [f.key] + [k for seq in ORDERED if f.key in seq for k in seq]
            for key in drop:
                if caps.pop(key, None) is not None:
                    reading.unsupported.append(f"{key}: not answered on this device: {f.message}")
        profile = rebuild(caps)
    return profile


def derive(reading: Reading, device: dict) -> tuple[Profile | None, Profile | None]:
    """Split a reading per answer against ``device`` (a stock probe, :meth:`Backend.stock_answers` form).

    Returns:
        (lower, raise): the ``lower`` profile (answers weaker than or equal to the device's;
        extensions the device lists and the file does not stay listed, said in ``reading.notes``),
        the ``raise`` profile
        (stronger answers; extensions the file states and the device lacks), each None when
        empty. Versions and flags are compared as the layer does (:func:`checks.answer`).
    """
    lo, hi = _split(reading, device)
    listed = device.get("extensions", {})
    unstated = sorted(set(listed) - set(reading.extensions))
    if unstated and reading.extensions:
        reading.notes.append(f"{len(unstated)} extension(s) the device lists and the file does not are left "
                             "listed (a profile states what must be there): " + messages.summarise(unstated))
    add = _limit_extensions({e: s for e, s in reading.extensions.items() if e not in listed}, reading, "add")

    def rebuild(direction, extensions):
        return lambda caps: _build(reading, direction, caps, extensions)
    low = _drop_refused(rebuild("lower", {})(lo), reading, device, rebuild("lower", {})) if lo else None
    high = _drop_refused(rebuild("raise", add)(hi), reading, device, rebuild("raise", add)) if hi or add else None
    if low is not None and not low.capabilities:
        low = None
    return low, high


def _flag_names(key: str, mask: int) -> list[str]:
    """A mask as Vulkan FlagBits names (``VK_SUBGROUP_FEATURE_BASIC_BIT``, ``..._PARTITIONED_BIT_NV``)."""
    bits_type = load_table().entry("vulkan", key).flag_names.removeprefix("Vk").removesuffix("FlagBits")
    prefix = re.sub(r"([a-z])([A-Z])", r"\1_\2", bits_type).upper()
    out = []
    for name, bit in FLAG_NAMES[key].items():
        if mask & bit:
            m = re.fullmatch(r"(.*?)_(NV|EXT|KHR|AMD)", name.upper())
            stem, vendor = (m[1], m[2]) if m else (name.upper(), _BIT_VENDOR.get(name))
            out.append(f"VK_{prefix}_{stem}_BIT" + (f"_{vendor}" if vendor else ""))
    return out


def reading_of_probe(probe: dict, source: str) -> Reading:
    """A probe result (``capshim probe --json`` form) as a :class:`Reading` of its answers."""
    dev = probe.get("device", {})
    out = Reading(name="VP_CAPSHIM_" + (re.sub(r"[^A-Za-z0-9]+", "_", str(dev.get("name", ""))).strip("_") or "device"),
                  source=source, label=escape(" ".join(str(dev.get("name", "device")).split())))
    for key, value in probe.get("capabilities", {}).items():
        if value is None or key not in KEYS["vulkan"] or KINDS["vulkan"][key] == "exact":
            continue
        out.capabilities[key] = parse_version(value) if KEYS["vulkan"][key] == "version" else value
    out.extensions = {e: int(s) for e, s in probe.get("extensions", {}).items()}
    return out


def capture_reading(reading: Reading) -> dict:
    """A Vulkan Profiles document (schema 0.8) of a reading's answers (:func:`reading_of_probe` for a
    device's stock probe, :func:`read` for another file).

    Each key is written under the first struct the capability table names for it (``limits.x``
    nested), flags as FlagBits names, apiVersion packed (as vulkaninfo writes it); the one
    profile, ``reading.name``, has ``api-version`` = the apiVersion answer. A reading with no
    apiVersion (a file that states none) gets no ``api-version`` (any would be an answer the
    source never gave; read back, none is answered), said in ``reading.unsupported``.
    """
    table = load_table()
    features, properties = {}, {}
    for key, value in reading.capabilities.items():
        struct, member = table.entry("vulkan", key).structs[0]
        where = features if "features" in table.structs[struct].chain else properties
        node = where.setdefault(struct, {})
        *outer, last = member.split(".")
        for part in outer:
            node = node.setdefault(part, {})
        node[last] = _flag_names(key, value) if KEYS["vulkan"][key] == "flags" else value
    api = reading.capabilities.get("apiVersion")
    block = {"extensions": dict(reading.extensions), "features": features, "properties": properties}
    prof = {"version": 1, "api-version": format_version(api) if api else None, "label": reading.label,
            "description": "Captured by capshim profile capture", "contributors": {}, "history": [],
            "capabilities": ["device"]}
    if not api:
        del prof["api-version"]
        reading.unsupported.append("apiVersion: the source states none, so the capture states none (the "
                                   "Khronos schema asks for an api-version: add the device's by hand)")
    return {"$schema": "https://schema.khronos.org/vulkan/profiles-0.8-latest.json#",
            "capabilities": {"device": block}, "profiles": {reading.name: prof}}
