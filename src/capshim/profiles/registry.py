"""The Khronos registry as the source of the Vulkan keys' struct facts (issue 21, Deliver 3).

``capabilities.toml`` says what only capshim knows about a Vulkan key: its kind (the
direction rule), unit, description, source and spec minimum. Everything the Khronos
registry (``vk.xml``) knows comes from it, read through ``vulkan-object`` (PyPI, LunarG:
``vk.xml`` with the ``VulkanObject`` data model of the Vulkan-Headers generators):

* where the key lives: every structure of ``vkGetPhysicalDeviceProperties2`` /
  ``vkGetPhysicalDeviceFeatures2`` (the two base structs, nested members such as
  ``limits.maxComputeSharedMemorySize`` included, and each struct that ``structextends``
  ``VkPhysicalDeviceProperties2`` or ``VkPhysicalDeviceFeatures2``) with a member named as
  the key. One struct plus the ``VkPhysicalDeviceVulkanNN*`` structs that carry the same
  member (the promoted struct first, then the VulkanNN ones by version) is found alone; an
  entry names its ``structs`` only where vk.xml has several candidates
  (``cooperativeMatrix``: the KHR and the NV extension) or the member is renamed
  (``VkPhysicalDeviceSubgroupProperties:supportedStages``);
* its value type, from the member's C type (all places must agree): ``VkBool32`` -> bool;
  ``uint32_t`` -> u32, except :data:`VERSION_MEMBERS` -> version (vk.xml types them
  ``uint32_t``; the spec's prose, Devices chapter, says they hold a packed version, so the
  names are listed here); a 32-bit ``VkFlags`` type -> flags, its ``FlagBits`` naming the
  bits and its own name the unit. Anything else (floats, arrays, 64-bit masks) is refused:
  the layer carries 32-bit values only;
* per structure: the chain it belongs to, its sType (name and number), the probe's guards
  (see :func:`_guards`), and, for a struct the oldest headers capshim compiles against may
  lack (:data:`BASELINE_HEADERS`), the member declarations capshim declares itself;
* per FlagBits a key uses: the registry's bits, so the names capshim gives them
  (``[flags.*]`` in capabilities.toml) are checked against real bits.

The facts are generated once into ``registry_facts.toml`` beside this file (committed;
``table.load`` reads it at import, so capshim never needs vulkan-object at run time) by
``python -m capshim.profiles.generate --write``; without ``--write`` the same command, and a
test, fail when the committed facts differ from what the registry gives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources

from capshim.contracts import suggest, tomlread

FACTS_FILE = "registry_facts.toml"
#: The oldest Vulkan headers capshim compiles against (Debian 12: 1.3.239). A struct of a core
#: version up to this one is in them; one only in an extension or a later version may not be,
#: and is declared by capshim (a "mirror", with vk.xml's members and a numeric sType).
BASELINE_HEADERS = (1, 3)
#: uint32_t members that hold a packed version (Vulkan spec, Devices: VkPhysicalDeviceProperties;
#: apiVersion is VK_MAKE_API_VERSION-encoded, driverVersion is the vendor's own encoding).
VERSION_MEMBERS = ("apiVersion", "driverVersion")
#: The two base structs (no sType: the layer patches them where the app passes them).
BASE = {"VkPhysicalDeviceProperties": "base-properties", "VkPhysicalDeviceFeatures": "base-features"}
#: structextends target -> chain of the structs that extend it.
ROOTS = {"VkPhysicalDeviceProperties2": "properties", "VkPhysicalDeviceFeatures2": "features"}
_AGGREGATE = re.compile(r"VkPhysicalDeviceVulkan\d+(Features|Properties)$")
_QUERY = "a structure of vkGetPhysicalDeviceProperties2/Features2"
#: C types a mirrored struct may hold as they are (all in the baseline headers).
_C_SCALARS = ("VkBool32", "char", "uint8_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "float", "VkDeviceSize", "size_t")
FACTS_LIMITS = tomlread.Limits(max_bytes=1 << 20, max_depth=3, max_items=1024, max_keys=1024)
"""What ``registry_facts.toml`` may hold (:mod:`capshim.contracts.tomlread`)."""


#: The "Adding a Vulkan capability" section of docs/capabilities.md (render_docs): what a line says
#: and what the generator takes from vk.xml (this module's rules, in words).
ADDING_A_KEY = (
    "A member of a structure that `vkGetPhysicalDeviceProperties2` or `vkGetPhysicalDeviceFeatures2`",
    "fills, as vk.xml names it, is one line in the `vulkan` list of `capabilities.toml`:",
    "", "```toml",
    '  { key = "maxPushDescriptors", kind = "upper", unit = "descriptors", '
    'description = "descriptors in one push descriptor set layout" },',
    "```", "",
    "then `python -m capshim.profiles.generate --write` (it needs `vulkan-object`, in the test",
    "extra that `./setup.sh` installs) and a test (see `tests/profiles/test_added_key.py`). The line",
    "says only what the registry cannot: the kind (which answer is stronger), the unit, the",
    "description, a source or `spec_min` where there is one. The generator finds the structure",
    "that has the member and the `VkPhysicalDeviceVulkanNN*` structures that repeat it (lookup",
    "order: the promoted structure, then the VulkanNN ones), and takes from vk.xml:",
    "",
    "- the value type from the member's C type: `VkBool32` -> bool, `uint32_t` -> u32 (`apiVersion`,",
    "  `driverVersion` -> version: vk.xml types them `uint32_t`, the spec's prose says they are packed",
    "  versions, so `capshim.profiles.registry.VERSION_MEMBERS` names them), a 32-bit `VkFlags` type",
    "  -> flags (its `FlagBits` names the bits, its own name is the unit); anything else (floats,",
    "  arrays, 64-bit masks, strings) is refused, since the layer carries 32-bit values;",
    "- each structure's sType and the probe's guards: a core structure is linked from its version;",
    "  an extension's, while the device lists the extension; one promoted to core version V whose",
    "  members a VulkanNN structure of version U repeats, only below U (from version V when V < U,",
    "  else through its extension);",
    "- the members of a structure the oldest headers capshim builds against (Debian 12: 1.3.239)",
    "  may lack (an extension-only structure, or a core version above 1.3): capshim declares it",
    "  itself as `capshim_<name>` in `caps_table.h`, with vk.xml's members and sType number.",
    "",
    "Name the places with `structs = [\"Struct\", \"Struct:member\"]` only where vk.xml cannot",
    "decide: several structures have a member of that name (`cooperativeMatrix`: KHR and NV), or",
    "the member is renamed (`VkPhysicalDeviceSubgroupProperties:supportedStages`). A misspelt member",
    "or structure, a structure vk.xml's installed version does not have, or an unsupported type",
    "stops the generator (exit 2) with the closest name vk.xml has; nothing is written. The probe,",
    "the layer, the configuration parser, the profile schema and this page follow.",
)


class RegistryError(ValueError):
    """A Vulkan key the registry does not back (the message names the key, struct or member, and
    the closest name vk.xml has), or facts that are not what the generator writes."""


@dataclass(frozen=True)
class StructFacts:
    """What vk.xml says of one struct a key lives in.

    Attributes:
        name: the Vulkan type name.
        chain: "base-properties", "base-features", "properties" or "features".
        stype: the ``VK_STRUCTURE_TYPE_`` suffix, None for a base struct.
        stype_value: the sType's number (vk.xml), None for a base struct.
        core: (major, minor) from which the probe links it, or None.
        extension: the device extension it needs, or None.
        until: (major, minor) from which a VulkanNN struct replaces it, or None.
        mirror: C member declarations (``"VkBool32 cooperativeMatrix"``) of a struct capshim
            declares itself (the baseline headers may lack it); empty otherwise.
    """

    name: str
    chain: str
    stype: str | None = None
    stype_value: int | None = None
    core: tuple[int, int] | None = None
    extension: str | None = None
    until: tuple[int, int] | None = None
    mirror: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeyFacts:
    """What vk.xml says of one Vulkan key.

    Attributes:
        key: the key (the member's name in its last struct).
        ctype: the member's C type (``VkBool32``, ``uint32_t``, ``VkShaderStageFlags``).
        type: bool, u32, flags or version (module docstring).
        flag_bits: the FlagBits type naming a flags key's bits, or None.
        structs: (struct, member path) pairs, in lookup order.
    """

    key: str
    ctype: str
    type: str
    flag_bits: str | None
    structs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Facts:
    """The registry facts of the table's Vulkan keys.

    Attributes:
        registry: the vk.xml version they come from ("1.4.366").
        keys: key -> :class:`KeyFacts`, in the table's order.
        structs: struct name -> :class:`StructFacts`, in order of first use.
        flags: FlagBits name -> {registry bit name -> value}, single bits only.
    """

    registry: str
    keys: dict[str, KeyFacts]
    structs: dict[str, StructFacts]
    flags: dict[str, dict[str, int]]


# ---------- from vk.xml (generate time only) ----------

def registry_object():
    """The ``VulkanObject`` of the installed vulkan-object (parsing vk.xml takes about a second).

    Raises:
        RegistryError: vulkan-object is not installed (a test dependency: ``pip install -e '.[test]'``).
    """
    try:
        # optional: only the generator and its test need vk.xml; capshim reads the committed facts
        from vulkan_object import get_vulkan_object
    except ImportError as e:
        raise RegistryError("the Khronos registry is needed to (re)generate registry_facts.toml: "
                            "pip install vulkan-object (capshim's test extra)") from e
    return get_vulkan_object()


def _version(name: str | None) -> tuple[int, int] | None:
    """``VK_VERSION_1_3`` -> (1, 3)."""
    if name is None:
        return None
    major, minor = name.removeprefix("VK_VERSION_").split("_")
    return int(major), int(minor)


def _dotted(v: tuple[int, ...] | None) -> str | None:
    return None if v is None else ".".join(map(str, v))


def _release(text: str) -> tuple[int, ...]:
    """``"1.4.366"`` -> (1, 4, 366); () when it is not that shape."""
    parts = str(text).split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def query_structs(vk) -> dict[str, str]:
    """struct name -> chain, for every struct vkGetPhysicalDeviceProperties2/Features2 fills."""
    out = dict(BASE)
    for name, s in vk.structs.items():
        for root, chain in ROOTS.items():
            if root in s.extends:
                out[name] = chain
    return out


def members(vk, struct: str, prefix: str = "") -> dict:
    """member path -> vulkan-object Member of ``struct``, nested structs flattened (``limits.x``),
    sType and pNext left out."""
    out = {}
    for m in vk.structs[struct].members:
        if m.name in ("sType", "pNext"):
            continue
        if m.type in vk.structs and not m.pointer and not m.fixedSizeArray:
            out.update(members(vk, m.type, f"{prefix}{m.name}."))
        else:
            out[prefix + m.name] = m
    return out


class _Resolver:
    """Finds where keys live in one VulkanObject; errors name the closest name vk.xml has."""

    def __init__(self, vk, committed: str | None):
        self.vk = vk
        self.release = vk.headerVersionComplete
        self.query = query_structs(vk)
        self.aliases = {a: n for n, s in vk.structs.items() for a in s.aliases}
        self.members = {n: members(vk, n) for n in self.query}
        self.committed = committed

    def _older(self) -> str:
        """A hint when the installed registry is older than the one the facts came from."""
        if self.committed and _release(self.release) < _release(self.committed):
            return (f"; the committed facts come from vk.xml {self.committed}, newer than the installed "
                    f"vulkan-object's {self.release}: pip install 'vulkan-object>={self.committed}'")
        return ""

    def struct(self, name: str, where: str) -> str:
        if name in self.query:
            return name
        if name in self.aliases:
            raise RegistryError(f"{where}: {name} is vk.xml's alias of {self.aliases[name]}: name that")
        what = "not " + _QUERY if name in self.vk.structs else f"not in vk.xml {self.release}"
        raise RegistryError(f"{where}: struct {name} is {what}"
                            f"{suggest.did_you_mean(name, self.query)}{self._older()}")

    def member(self, struct: str, member: str, where: str) -> str:
        paths = self.members[struct]
        if member in paths:
            return member
        nested = [p for p in paths if p.endswith("." + member)]
        if len(nested) == 1:
            return nested[0]
        names = list(paths) + [p.rpartition(".")[2] for p in paths]
        raise RegistryError(f"{where}: {struct} (vk.xml {self.release}) has no member '{member}'"
                            f"{suggest.did_you_mean(member, names)}{self._older()}")

    def find(self, key: str, where: str) -> list[tuple[str, str]]:
        """Where ``key`` lives when the entry does not say: module docstring."""
        hits = [(s, p) for s, paths in self.members.items() for p in paths if p.rpartition(".")[2] == key]
        if not hits:
            names = {p.rpartition(".")[2] for paths in self.members.values() for p in paths}
            raise RegistryError(f"{where}: no structure of vkGetPhysicalDeviceProperties2/Features2 in vk.xml "
                                f"{self.release} has a member '{key}'"
                                f"{suggest.did_you_mean(key, names)}{self._older()}")
        own = [h for h in hits if not _AGGREGATE.match(h[0])]
        if len(own) > 1:
            raise RegistryError(f"{where}: vk.xml has '{key}' in several structures "
                                f"({', '.join(s for s, _ in own)}): say which with structs = [...]")
        aggregates = sorted((h for h in hits if _AGGREGATE.match(h[0])),
                            key=lambda h: _version(self.vk.structs[h[0]].version.name))
        return own + aggregates

    def locations(self, entry: dict, where: str) -> list[tuple[str, str]]:
        refs = entry.get("structs")
        if refs is None:
            return self.find(entry["key"], where)
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
            raise RegistryError(f"{where}: structs must be a non-empty list of \"Struct\" or \"Struct:member\"")
        out = []
        for ref in refs:
            sname, _, member = ref.partition(":")
            sname = self.struct(sname, where)
            out.append((sname, self.member(sname, member or entry["key"], where)))
        return out


def _value_type(vk, key: str, m, where: str) -> tuple[str, str | None]:
    """(type, FlagBits or None) of a member (module docstring)."""
    shape = m.type + "".join(f"[{d}]" for d in m.fixedSizeArray) + ("*" if m.pointer else "")
    if shape == "VkBool32":
        return "bool", None
    if shape == "uint32_t":
        return ("version" if m.name in VERSION_MEMBERS else "u32"), None
    flags = vk.flags.get(shape)
    if flags is not None and flags.bitWidth == 32:
        return "flags", flags.bitmaskName
    raise RegistryError(f"{where}: {key} is {shape} in vk.xml; the layer carries VkBool32, uint32_t and "
                        "32-bit VkFlags values only")


def _aggregate_of(vk, s) -> object | None:
    """The VkPhysicalDeviceVulkanNN struct of the same chain holding every member of ``s``, if any."""
    chain = next(iter(set(s.extends) & set(ROOTS)), None)
    mine = {m.name for m in s.members} - {"sType", "pNext"}
    for name, a in vk.structs.items():
        if _AGGREGATE.match(name) and chain in a.extends and mine <= {m.name for m in a.members}:
            return a
    return None


def _guards(vk, s) -> tuple[tuple[int, int] | None, str | None, tuple[int, int] | None]:
    """(core, extension, until) for the probe, which links a struct when the device's
    apiVersion >= core, < until, and it lists the extension (all that are set must hold).

    * a core struct (no extension in vk.xml): core = its version;
    * an extension struct never promoted: extension = the first extension vk.xml names;
    * an extension struct promoted to core version V whose members a VulkanNN struct (version
      U) also carries: until = U (from U the probe asks the VulkanNN struct); below U it is
      reached by core V when V < U (16-bit storage: 1.1 .. 1.2), else by its extension
      (subgroup size control: below 1.3 only through VK_EXT_subgroup_size_control);
    * promoted with no VulkanNN struct: core = V.
    """
    version = _version(s.version.name) if s.version else None
    if not s.extensions:
        return version, None, None
    if version is None:
        return None, s.extensions[0], None
    agg = _aggregate_of(vk, s)
    until = _version(agg.version.name) if agg is not None and agg.name != s.name else None
    if until is None:
        return version, None, None
    return (version, None, until) if version < until else (None, s.extensions[0], until)


def _in_baseline(vk, s) -> bool:
    """Whether the baseline headers declare struct ``s`` (core up to :data:`BASELINE_HEADERS`)."""
    version = _version(s.version.name) if s.version else None
    return version <= BASELINE_HEADERS if version else not s.extensions


def _c_decl(vk, struct: str, m) -> str:
    """The declaration of one member of a mirrored struct, in types the baseline headers have:
    a pointer as ``void *`` (same size), a VkFlags type as ``VkFlags``, an enum as ``int32_t``
    (a Vulkan enum is 32 bits: VK_..._MAX_ENUM = 0x7FFFFFFF), array sizes as numbers."""
    base = m.type
    if m.pointer:
        base, name = "void", "*" + m.name
    else:
        name = m.name
        if base in vk.flags:
            base = "VkFlags" if vk.flags[base].bitWidth == 32 else "VkFlags64"
        elif base in vk.enums:
            base = "int32_t"
        elif not (base in _C_SCALARS or (base in vk.structs and _in_baseline(vk, vk.structs[base]))):
            raise RegistryError(f"{struct}.{m.name}: capshim cannot declare a {m.type} member for headers "
                                f"that lack {struct}")
    dims = "".join(f"[{d if d.isdigit() else vk.constants[d].value}]" for d in m.fixedSizeArray)
    return f"{base} {name}{dims}"


def _struct_facts(vk, name: str, chain: str) -> StructFacts:
    if chain.startswith("base-"):
        return StructFacts(name, chain)
    s = vk.structs[name]
    stype = s.sType.removeprefix("VK_STRUCTURE_TYPE_")
    value = next(f.value for f in vk.enums["VkStructureType"].fields if f.name == s.sType)
    core, extension, until = _guards(vk, s)
    mirror = ()
    if not _in_baseline(vk, s):
        mirror = tuple(_c_decl(vk, name, m) for m in s.members if m.name not in ("sType", "pNext"))
    return StructFacts(name, chain, stype, value, core, extension, until, mirror)


def derive(vk, entries: Iterable[dict], flag_tables: Iterable[str] = (), committed: str | None = None) -> Facts:
    """The facts of the Vulkan ``entries`` (capabilities.toml's ``[[vulkan]]`` tables: ``key`` and
    an optional ``structs``) from the VulkanObject ``vk``; ``flag_tables`` are the FlagBits names
    capabilities.toml names bits of; ``committed`` the vk.xml version of the committed facts (for
    the hint when the installed registry is older).

    Raises:
        RegistryError: a struct or member vk.xml does not have (with the closest name), a key in
            several structures, a type the layer cannot carry, members of differing types.
    """
    r = _Resolver(vk, committed)
    keys: dict[str, KeyFacts] = {}
    structs: dict[str, StructFacts] = {}
    for e in entries:
        where = f"capabilities.toml: vulkan key {e.get('key')!r}"
        locs = r.locations(e, where)
        typed = {(r.members[s][p].type, tuple(r.members[s][p].fixedSizeArray)) for s, p in locs}
        if len(typed) > 1:
            raise RegistryError(f"{where}: its members differ in type in vk.xml ({sorted(typed)})")
        m = r.members[locs[0][0]][locs[0][1]]
        vtype, bits = _value_type(vk, e["key"], m, where)
        keys[e["key"]] = KeyFacts(e["key"], m.type, vtype, bits, tuple(locs))
        for s, _ in locs:
            if s not in structs:
                structs[s] = _struct_facts(vk, s, r.query[s])
    used = {k.flag_bits for k in keys.values()} & set(flag_tables)
    flags = {b: {f.name: f.value for f in vk.bitmasks[b].flags if not f.multiBit and not f.zero} for b in sorted(used)}
    return Facts(r.release, keys, structs, flags)


# ---------- the committed file ----------

def _s(text: str) -> str:
    return json.dumps(text)  # a TOML basic string for these ASCII names


def _inline(k: KeyFacts) -> str:
    parts = [f"type = {_s(k.type)}", f"ctype = {_s(k.ctype)}"]
    if k.flag_bits:
        parts.append(f"flag_bits = {_s(k.flag_bits)}")
    parts.append("structs = [" + ", ".join(_s(f"{s}:{m}") for s, m in k.structs) + "]")
    return f"{k.key} = {{ {', '.join(parts)} }}"


def render(facts: Facts) -> str:
    """The text of ``registry_facts.toml`` for ``facts``."""
    o = ["# GENERATED by `python -m capshim.profiles.generate --write` from the Khronos registry",
         "# (vk.xml, through vulkan-object) for the [[vulkan]] keys of capabilities.toml: do not",
         "# edit (a test fails when it differs from what the registry gives). capshim reads it at",
         "# import and never needs vulkan-object to run; see capshim/profiles/registry.py.",
         f"registry = {_s(facts.registry)}", "", "# key = where it lives (Struct:member, lookup order), C type, value type",
         "[keys]"]
    o += [_inline(k) for k in facts.keys.values()]
    for s in facts.structs.values():
        o += ["", f"[structs.{s.name}]", f"chain = {_s(s.chain)}"]
        if s.stype is not None:
            o += [f"stype = {_s(s.stype)}", f"stype_value = {s.stype_value}"]
        o += [f"{field} = {_s(_dotted(v) if isinstance(v, tuple) else v)}"
              for field, v in (("core", s.core), ("extension", s.extension), ("until", s.until)) if v is not None]
        if s.mirror:
            o += ["mirror = ["] + [f"  {_s(d)}," for d in s.mirror] + ["]"]
    for name, bits in facts.flags.items():
        o += ["", f"[flags.{name}]"] + [f"{b} = 0x{v:08X}" for b, v in bits.items()]
    return "\n".join(o) + "\n"


def _pair(v: str | None, where: str) -> tuple[int, int] | None:
    if v is None:
        return None
    major, _, minor = str(v).partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise RegistryError(f"{where}: '{v}' is not MAJOR.MINOR")
    return int(major), int(minor)


def parse(text: str, name: str = FACTS_FILE) -> Facts:
    """Read the facts file's text.

    Raises:
        RegistryError: a field missing or of the wrong shape (the file is generated: regenerate it).
        capshim.contracts.tomlread.TomlError: not TOML, or beyond :data:`FACTS_LIMITS`.
    """
    data = tomlread.loads(text, name, FACTS_LIMITS)
    try:
        keys = {}
        for key, k in data["keys"].items():
            locs = tuple(tuple(ref.split(":", 1)) for ref in k["structs"])
            if not locs or any(len(loc) != 2 for loc in locs):
                raise ValueError(f"keys.{key}.structs: not a list of Struct:member")
            keys[key] = KeyFacts(key, k["ctype"], k["type"], k.get("flag_bits"), locs)
        structs = {}
        for sname, s in data["structs"].items():
            where = f"{name}: structs.{sname}"
            structs[sname] = StructFacts(sname, s["chain"], s.get("stype"), s.get("stype_value"),
                                         _pair(s.get("core"), where), s.get("extension"),
                                         _pair(s.get("until"), where), tuple(s.get("mirror", ())))
        flags = {b: dict(bits) for b, bits in data.get("flags", {}).items()}
        return Facts(str(data["registry"]), keys, structs, flags)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise RegistryError(f"{name}: not what the generator writes ({e!r}): run "
                            "python -m capshim.profiles.generate --write") from e


@cache
def load() -> Facts:
    """The facts that ship in the package (``capshim/profiles/registry_facts.toml``).

    Raises:
        FileNotFoundError: the file is missing.
        RegistryError: it cannot be read (a folder, no permission), is not UTF-8, or is not
            what the generator writes; the message names the file (:func:`table.parse` adds the
            generator's command).
    """
    try:
        text = (resources.files("capshim.profiles") / FACTS_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except UnicodeDecodeError as e:
        raise RegistryError(f"{FACTS_FILE}: not UTF-8 ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise RegistryError(f"{FACTS_FILE}: cannot read: {e.strerror or e}") from None
    return parse(text)


def same(a: Facts, b: Facts) -> bool:
    """Whether two sets of facts agree on everything but the vk.xml version they were read from
    (a newer registry that changes none of the table's facts is no drift)."""
    return (a.keys, a.structs, a.flags) == (b.keys, b.structs, b.flags)
