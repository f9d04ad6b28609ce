"""The capability table (``profiles/capabilities.toml``) and what is generated from it.

``capabilities.toml`` is the one place a capability key is declared: its API,
its kind (the direction rule), unit, description and source, and for Metal
its value type and selector. What the Khronos registry knows of a Vulkan key
(the structures and members that hold it, its value type, each structure's
sType and the extension or core version that guards it) comes from
``registry_facts.toml``, generated from vk.xml (:mod:`capshim.profiles.registry`).
From the two:

* :mod:`capshim.profiles.catalog` builds the profile schema (at import);
* :func:`render_caps_table_h` writes ``native/vulkan/caps_table.h`` (the
  layer's and the probe's key table, the probe's pNext chain and guards);
* :func:`render_config_limits_h` writes ``native/common/config_limits.h`` (the
  configuration parser's value types, kinds and limits, shared by the shims);
* :func:`render_docs` writes ``docs/capabilities.md``.

The generated files (and ``registry_facts.toml``) are checked in; ``python -m capshim.profiles.generate
--write`` rewrites them; without ``--write`` it exits 1 when one differs (a
test runs that check).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from capshim.contracts import tomlread
from capshim.profiles import registry
from capshim.contracts import messages

KINDS = ("feature", "upper", "lower", "exact", "version")
VULKAN_TYPES = ("bool", "u32", "flags", "version")
METAL_TYPES = ("u64", "family", "families")
CUDA_TYPES = ("cc", "u32", "u64", "string")
CHAINS = ("base-properties", "base-features", "properties", "features")
_C_KIND = {"bool": "CAPSHIM_BOOL", "u32": "CAPSHIM_U32", "flags": "CAPSHIM_FLAGS", "version": "CAPSHIM_VERSION"}
_C_SEM = {k: f"CAPSHIM_SEM_{k.upper()}" for k in KINDS}


@dataclass(frozen=True)
class Struct:
    """One Vulkan structure of the table.

    Attributes:
        name: the Vulkan type name (``VkPhysicalDeviceVulkan12Features``).
        chain: "base-properties", "base-features", "properties" or "features".
        stype: the ``VK_STRUCTURE_TYPE_`` suffix, or None for a base struct.
        core: (major, minor) from which the probe links it, or None.
        extension: the device extension it needs, or None.
        until: (major, minor) from which a VulkanNN struct replaces it, or None.
        ctype: the C type (the Vulkan name, or ``capshim_`` + it for a mirror).
        mirror: C member declarations of a struct capshim declares itself (older headers lack it).
        source: where its definition comes from.
        stype_value: the sType's number (vk.xml), or None for a base struct.

    All but ``source`` and ``ctype`` come from vk.xml (:class:`capshim.profiles.registry.StructFacts`).
    """

    name: str
    chain: str
    stype: str | None
    core: tuple[int, int] | None
    extension: str | None
    until: tuple[int, int] | None
    ctype: str
    mirror: tuple[str, ...]
    source: str
    stype_value: int | None = None

    def available(self, api_version: tuple[int, int], extensions) -> bool:
        """Whether the device may be queried for this struct at all (its guard holds; ``until`` ignored)."""
        return (self.core is None or api_version >= self.core) and \
            (self.extension is None or self.extension in extensions)


@dataclass(frozen=True)
class CudaPlace:
    """Where the CUDA shim finds one key (a ``[[cuda]]`` entry of the table).

    Attributes:
        attributes: cudaDeviceAttr numbers, equal to the CUdevice_attribute numbers
            (computeCapability: major, minor); empty when no attribute answers it.
        members: cudaDeviceProp members, in the order of ``attributes``.
        ctype: the members' C type ("int", "size_t", "char[256]").
        offsets13: byte offsets of ``members`` in CUDA 13's cudaDeviceProp.
        offsets12: byte offsets in CUDA 12's cudaDeviceProp (``_v2``).
        offsets11: byte offsets in the pre-12 cudaDeviceProp (CUDA 11.8; a CUDA 12 runtime's
            plain ``cudaGetDeviceProperties``).
        devprop: byte offset in the driver's CUdevprop, or None when it lacks the key.
    """

    attributes: tuple[int, ...]
    members: tuple[str, ...]
    ctype: str
    offsets13: tuple[int, ...]
    offsets12: tuple[int, ...]
    offsets11: tuple[int, ...]
    devprop: int | None


@dataclass(frozen=True)
class Key:
    """One capability key.

    Attributes:
        api: "vulkan" or "metal".
        key: the API's own name.
        kind: the direction rule, one of :data:`KINDS`.
        type: the value type (:data:`VULKAN_TYPES` or :data:`METAL_TYPES`).
        unit: what a number counts ("" for booleans).
        description: one line.
        source: where the fact comes from.
        structs: (struct name, member path) pairs, Vulkan only, in lookup order.
        flag_names: the FlagBits table naming this mask's bits, or None.
        selector: the Metal selector, or None.
        spec_min: the smallest value the Vulkan spec allows a device to report
            (Limits, "Required Limits" table), or None; profiles may not go below.
        cuda: CUDA only, where the shim finds the key (:class:`CudaPlace`), else None.
    """

    api: str
    key: str
    kind: str
    type: str
    unit: str
    description: str
    source: str
    structs: tuple[tuple[str, str], ...] = ()
    flag_names: str | None = None
    selector: str | None = None
    spec_min: int | None = None
    cuda: CudaPlace | None = None


@dataclass(frozen=True)
class Table:
    """The parsed capability table.

    Attributes:
        limits: name -> int (see ``[limits]`` in the TOML).
        ordered: key sequences whose answers must be non-decreasing (``[rules]``).
        power_of_two: keys whose answers must be powers of two (``[rules]``).
        structs: name -> :class:`Struct`.
        flags: FlagBits name -> {bit name -> value}.
        keys: api -> list of :class:`Key`, in probe order.
        registry: the vk.xml version the Vulkan struct facts come from ("1.4.366").
    """

    limits: dict[str, int]
    ordered: tuple[tuple[str, ...], ...]
    power_of_two: tuple[str, ...]
    structs: dict[str, Struct]
    flags: dict[str, dict[str, int]]
    keys: dict[str, list[Key]]
    registry: str = ""
    cuda_layouts: dict[str, int] = field(default_factory=dict)

    def entry(self, api: str, key: str) -> Key:
        """The :class:`Key` named ``key`` of ``api``. Raises KeyError when there is none."""
        for k in self.keys[api]:
            if k.key == key:
                return k
        raise KeyError(f"{api} key {key}")


TOML_LIMITS = tomlread.Limits(max_bytes=1 << 20, max_depth=3, max_items=1024, max_keys=1024)
"""What ``capabilities.toml`` may hold (:mod:`capshim.contracts.tomlread`): ``[[vulkan]]`` entries'
``structs`` lists are 3 levels deep; a thousand keys per API is far beyond the layer's ``values_max``."""


class TableError(ValueError):
    """capabilities.toml breaks its own rules (a programming error: the message names the entry)."""


class StaleFacts(TableError):
    """registry_facts.toml does not answer capabilities.toml's Vulkan keys as they are (regenerate it)."""


#: [[vulkan]] fields the registry answers (registry_facts.toml); an entry may not set them.
REGISTRY_FIELDS = ("type", "flag_names")


def _struct_source(s: registry.StructFacts) -> str:
    """Where a struct's definition is read: the spec's chapter, or vk.xml for a mirror."""
    if s.mirror:
        return f"Vulkan registry vk.xml: {s.name}"
    chapter = {"base-properties": "Devices", "properties": "Limits"}.get(s.chain, "Features")
    return f"Vulkan spec, {chapter}: {s.name}"


def _struct(s: registry.StructFacts) -> Struct:
    return Struct(s.name, s.chain, s.stype, s.core, s.extension, s.until,
                  f"capshim_{s.name}" if s.mirror else s.name, s.mirror, _struct_source(s), s.stype_value)


def _vulkan_facts(e: dict, facts: registry.Facts, structs: dict[str, Struct], flags: dict, where: str):
    """(entry with type, unit and flag_names from the registry, its (struct, member) pairs) of one
    [[vulkan]] entry; the structs it uses are added to ``structs`` (first use first)."""
    for name in REGISTRY_FIELDS:
        if name in e:
            raise TableError(f"{where}: {name} comes from the Vulkan registry (registry_facts.toml): remove it")
    kf = facts.keys.get(e["key"])
    stale = (f"{where}: registry_facts.toml (vk.xml {facts.registry}) {{}}: "
             "run python -m capshim.profiles.generate --write")
    if kf is None:
        raise StaleFacts(stale.format("does not have it"))
    given = e.get("structs")
    if given is not None:
        listed = isinstance(given, list) and all(isinstance(ref, str) for ref in given)
        pairs = [ref.partition(":") for ref in given] if listed else None
        if pairs is None or [s for s, _, _ in pairs] != [s for s, _ in kf.structs] or any(
                m and m != path and not path.endswith("." + m) for (_, _, m), (_, path) in zip(pairs, kf.structs)):
            raise StaleFacts(stale.format(f"places it in {[f'{s}:{m}' for s, m in kf.structs]}"))
    for s, _ in kf.structs:
        if s not in facts.structs:
            raise StaleFacts(stale.format(f"lacks struct {s}"))
        structs.setdefault(s, _struct(facts.structs[s]))
    unit = e.get("unit", kf.ctype if kf.type == "flags" else "")
    names = kf.flag_bits if kf.flag_bits in flags else None
    return dict(e, type=kf.type, unit=unit, flag_names=names), list(kf.structs)


def _check_flags(flags: dict[str, dict[str, int]], facts: registry.Facts) -> None:
    """Each bit capabilities.toml names is a bit of that FlagBits in vk.xml."""
    for name, bits in flags.items():
        known = facts.flags.get(name)
        for bit, value in bits.items() if known is not None else ():
            if value not in known.values():
                raise TableError(f"flags.{name}.{bit} = {value:#x}: not a bit of {name} in vk.xml {facts.registry}")


def parse(text: str, facts: registry.Facts | None = None) -> Table:
    """Parse and check the table's TOML text, with the registry's ``facts`` of its Vulkan keys
    (default: the committed ``registry_facts.toml``).

    Raises:
        TableError: an unknown kind or type, a duplicate key, a key longer than
            ``limits.key_max``, a Vulkan entry that sets what the registry says
            (:data:`REGISTRY_FIELDS`) or that the facts do not have (stale: regenerate),
            a flag bit vk.xml does not have.
        capshim.contracts.tomlread.TomlError: not TOML, or beyond :data:`TOML_LIMITS`.
    """
    data = tomlread.loads(text, "capabilities.toml", TOML_LIMITS)
    if facts is None:
        try:
            facts = registry.load()
        except (FileNotFoundError, registry.RegistryError, tomlread.TomlError) as e:
            raise StaleFacts(f"registry_facts.toml cannot be read ({e}): "
                             "run python -m capshim.profiles.generate --write") from e
    limits = dict(data["limits"])
    structs: dict[str, Struct] = {}
    flags = {name: dict(bits) for name, bits in data.get("flags", {}).items()}
    _check_flags(flags, facts)
    keys: dict[str, list[Key]] = {}
    for api, types in (("vulkan", VULKAN_TYPES), ("metal", METAL_TYPES)):
        seen: set[str] = set()
        keys[api] = []
        for e in data[api]:
            where = f"{api} key {e.get('key')!r}"
            if e["key"] in seen or len(e["key"]) > limits["key_max"]:
                raise TableError(f"{where}: duplicate, or longer than key_max")
            seen.add(e["key"])
            locs = []
            if api == "vulkan":
                e, locs = _vulkan_facts(e, facts, structs, flags, where)
            if e["kind"] not in KINDS or e["type"] not in types:
                raise TableError(f"{where}: kind must be one of {KINDS}, type one of {types}")
            if api == "vulkan" and ((e["kind"] == "feature") != (e["type"] == "bool")
                                    or (e["kind"] == "version") != (e["type"] == "version")):
                raise TableError(f"{where}: a feature is a bool, a bool is a feature (in vk.xml: {e['type']}); "
                                 "a version kind is a version")
            if e.get("flag_names") is not None and e["flag_names"] not in flags:
                raise TableError(f"{where}: unknown flags {e['flag_names']}")
            source = e.get("source") or (structs[locs[0][0]].source if locs else "")
            spec_min = e.get("spec_min")
            if spec_min is not None and (e["type"] != "u32" or not isinstance(spec_min, int)
                                         or isinstance(spec_min, bool) or not 0 < spec_min <= 0xFFFFFFFF):
                raise TableError(f"{where}: spec_min must be a whole number 1..4294967295 on a u32 key")
            keys[api].append(Key(api, e["key"], e["kind"], e["type"], e.get("unit", ""), e["description"],
                                 source, tuple(locs), e.get("flag_names"), e.get("selector"), spec_min))
    extra = set(facts.keys) - {k.key for k in keys["vulkan"]}
    if extra:
        raise StaleFacts(f"registry_facts.toml has keys capabilities.toml does not ({', '.join(sorted(extra))}): "
                         "run python -m capshim.profiles.generate --write")
    keys["cuda"] = _cuda_keys(data.get("cuda", []), limits)
    rules = data.get("rules", {})
    ordered = tuple(tuple(seq) for seq in rules.get("ordered", ()))
    power_of_two = tuple(rules.get("power_of_two", ()))
    for seq in ordered:  # a sequence relates the keys of one API
        if not any({k for k in seq} <= {k.key for k in keys[api]} for api in ("vulkan", "cuda")):
            raise TableError(f"rules: ordered {list(seq)}: not all keys of one API (vulkan or cuda)")
    for name in set(power_of_two):
        if name not in {k.key for k in keys["vulkan"]}:
            raise TableError(f"rules: unknown key {name}")
    return Table(limits, ordered, power_of_two, _probe_order(structs), flags, keys, facts.registry,
                 dict(data.get("cuda_layouts", {})))


def _probe_order(structs: dict[str, Struct]) -> dict[str, Struct]:
    """Structs in the probe's chain order: properties, then features; in each, the structs a core
    version holds for good before those an extension or a later VulkanNN struct bounds, each
    group in the order the keys first use them."""
    chains = {"base-properties": 0, "properties": 1, "base-features": 2, "features": 3}
    return dict(sorted(structs.items(), key=lambda kv: (chains[kv[1].chain],
                                                        kv[1].extension is not None or kv[1].until is not None)))


def shipped_text() -> str:
    """The text of the ``capabilities.toml`` that ships in the package."""
    return (resources.files("capshim.profiles") / "capabilities.toml").read_text(encoding="utf-8")


def registry_facts(text: str, committed: str | None = None) -> registry.Facts:
    """The facts of ``text``'s Vulkan keys read afresh from vk.xml (needs vulkan-object);
    ``committed`` is the vk.xml version of the committed facts (for the older-registry hint).

    Raises:
        TableError: what :func:`capshim.profiles.registry.derive` refuses, or no vulkan-object.
    """
    data = tomlread.loads(text, "capabilities.toml", TOML_LIMITS)
    try:
        return registry.derive(registry.registry_object(), data["vulkan"], data.get("flags", {}), committed)
    except registry.RegistryError as e:
        raise TableError(str(e)) from e


def _cuda_keys(entries: list[dict], limits: dict[str, int]) -> list[Key]:
    """The ``[[cuda]]`` entries as :class:`Key` values with their :class:`CudaPlace`.

    Raises:
        TableError: a duplicate key, an unknown kind or type, or places that disagree
            (as many members as offsets, as many attributes as members when there are any).
    """
    out: list[Key] = []
    for e in entries:
        where = f"cuda key {e.get('key')!r}"
        if e["key"] in {k.key for k in out} or len(e["key"]) > limits["key_max"]:
            raise TableError(f"{where}: duplicate, or longer than key_max")
        if e["kind"] not in KINDS or e["type"] not in CUDA_TYPES:
            raise TableError(f"{where}: kind must be one of {KINDS}, type one of {CUDA_TYPES}")
        members = tuple(e["members"])
        place = CudaPlace(tuple(e.get("attributes", ())), members, e["ctype"], tuple(e["offsets13"]),
                          tuple(e["offsets12"]), tuple(e["offsets11"]), e.get("devprop"))
        if not (len(place.offsets13) == len(place.offsets12) == len(place.offsets11) == len(members)) or \
                (place.attributes and len(place.attributes) != len(members)):
            raise TableError(f"{where}: members, offsets13, offsets12, offsets11 and attributes must pair up")
        out.append(Key("cuda", e["key"], e["kind"], e["type"], e.get("unit", ""), e["description"],
                       e["source"], cuda=place))
    return out


@cache
def load() -> Table:
    """The table that ships in the package (``capshim/profiles/capabilities.toml`` with
    ``registry_facts.toml``). When the facts are stale (a key added, not yet regenerated) and
    vulkan-object is installed, the facts are read from vk.xml instead, with a warning, so that
    ``python -m capshim.profiles.generate --write`` (which imports this package) can run.

    Raises:
        TableError: the table breaks a rule, or its facts are stale and vk.xml cannot be read.
    """
    text = shipped_text()
    try:
        return parse(text)
    except StaleFacts as stale:
        facts = registry_facts(text)
        messages.emit(f"{stale}; meanwhile the facts come from vk.xml {facts.registry} (vulkan-object)", "warning")
        return parse(text, facts)


# ---------- C header ----------

def _stype_expr(s: Struct) -> str:
    if s.chain == "base-properties":
        return "CAPSHIM_BP"
    if s.chain == "base-features":
        return "CAPSHIM_BF"
    if s.mirror:
        return f"CAPSHIM_STYPE_{s.stype}"
    return f"CAPSHIM_ST({s.stype})"


def _vk_version(v: tuple[int, int] | None) -> str:
    return "0" if v is None else f"VK_API_VERSION_{v[0]}_{v[1]}"


def _macro(name: str, comment: str, rows: list[str]) -> list[str]:
    out = [f"/* {comment} */", f"#define {name}(X) \\"]
    out += [f"    {r} \\" for r in rows[:-1]] + [f"    {rows[-1]}", ""]
    return out


def render_config_limits_h(table: Table) -> str:
    """The text of ``native/common/config_limits.h`` for ``table``: the value types, the kinds
    and the configuration limits (``[limits]``) that the shared parser (``native/common/config.h``)
    and every shim's key table use, and the Vulkan spec minimums the parser checks by key name; it
    includes no API's header, so the common base includes no API's file."""
    lim = table.limits
    o = [
        "/* capshim native shims: the configuration's value types, kinds and limits.",
        " *",
        " * GENERATED from src/capshim/profiles/capabilities.toml by",
        " * `python -m capshim.profiles.generate --write`: edit the table, not this file",
        " * (a test fails when they differ). Shared by the parser (config.h) and the",
        " * key tables of the shims (vulkan/caps_table.h, cuda/cuda_table.h).",
        " */",
        "#ifndef CAPSHIM_CONFIG_LIMITS_H",
        "#define CAPSHIM_CONFIG_LIMITS_H",
        "",
        "/* Value types (how a configuration value is stored and clamped). */",
        "enum capshim_kind { CAPSHIM_BOOL = 1, CAPSHIM_U32 = 2, CAPSHIM_FLAGS = 3, CAPSHIM_VERSION = 4, CAPSHIM_U64 = 5 };",
        "",
        "/* Kinds (direction rules): FEATURE true is stronger; UPPER more is stronger; LOWER less is",
        " * stronger (minSubgroupSize); EXACT what the hardware does (subgroupSize); VERSION higher is",
        " * stronger. */",
        "enum capshim_sem {",
        "    " + ", ".join(f"{_C_SEM[k]} = {i + 1}" for i, k in enumerate(KINDS)),
        "};",
        "",
        "/* Configuration limits ([limits] in capabilities.toml); buffer sizes include the NUL. */",
        f"#define CAPSHIM_MAX_VALUES {lim['values_max']}",
        f"#define CAPSHIM_MAX_EXTENSIONS {lim['extensions_max']}",
        f"#define CAPSHIM_KEY_MAX {lim['key_max'] + 1}",
        f"#define CAPSHIM_EXT_NAME_MAX {lim['extension_name_max'] + 1}",
        f"#define CAPSHIM_LINE_MAX {lim['line_max']}",
        f"#define CAPSHIM_CONFIG_MAX_BYTES {lim['config_max_bytes']}",
        "",
    ]
    o += _macro("CAPSHIM_SPEC_MINIMUMS",
                "X(key, min): the smallest value the Vulkan spec lets a device report (Limits, \"Required\n"
                " * Limits\" table); a configuration below it is invalid (the parser checks it by name).",
                [f"X({k.key}, {k.spec_min}u)" for k in table.keys["vulkan"] if k.spec_min is not None])
    o += ["#endif"]
    return "\n".join(o) + "\n"


def render_caps_table_h(table: Table) -> str:
    """The text of ``native/vulkan/caps_table.h`` for ``table``.

    The header has two parts. The first (no Vulkan dependency, so the fuzz
    driver's keyspec uses it alone: define ``CAPSHIM_KEYS_ONLY`` first) holds
    ``CAPSHIM_KEYS(X)`` with ``X(key, type, kind)``; the value types, kinds,
    limits and spec minimums come from ``config_limits.h``
    (:func:`render_config_limits_h`, native/common). The second holds the
    mirrored structs, ``CAPSHIM_FIELDS(X)`` with ``X(key, type, ctype, stype,
    member)`` (one line per place a key lives), ``CAPSHIM_FIELDS_SEM(X)`` (the
    same with the kind appended), ``capshim_fields[]`` and
    ``CAPSHIM_CHAIN(X)`` with ``X(ctype, stype, features, core, until,
    extension)``: the probe's pNext chain and its guards.
    """
    keys = table.keys["vulkan"]
    o = [
        "/* capshim Vulkan layer: the capability keys it knows and where they live.",
        " *",
        " * GENERATED from src/capshim/profiles/capabilities.toml and registry_facts.toml",
        f" * (the Khronos registry, vk.xml {table.registry}) by",
        " * `python -m capshim.profiles.generate --write`: edit the table, not this file",
        " * (a test fails when they differ). Kinds, types and structures are explained",
        " * there and in docs/capabilities.md.",
        " */",
        "#ifndef CAPSHIM_CAPS_KEYS_H",
        "#define CAPSHIM_CAPS_KEYS_H",
        "",
        "/* Value types, kinds and configuration limits (native/common, generated with this file). */",
        '#include "config_limits.h"',
        "",
    ]
    o += _macro("CAPSHIM_KEYS", "X(key, type, kind): each key once, in the probe's order.",
                [f"X({k.key}, {_C_KIND[k.type]}, {_C_SEM[k.kind]})" for k in keys])
    o += ["#endif", "", "#if !defined(CAPSHIM_KEYS_ONLY) && !defined(CAPSHIM_CAPS_TABLE_H)",
          "#define CAPSHIM_CAPS_TABLE_H", "", "#include <stddef.h>", "#include <stdint.h>",
          "#include <vulkan/vulkan.h>", "",
          "/* Pseudo sType values for the two base structures (no pNext of their own). */",
          "#define CAPSHIM_STYPE_BASE_PROPERTIES 0x7FFF0001u",
          "#define CAPSHIM_STYPE_BASE_FEATURES 0x7FFF0002u",
          "#define CAPSHIM_BP CAPSHIM_STYPE_BASE_PROPERTIES",
          "#define CAPSHIM_BF CAPSHIM_STYPE_BASE_FEATURES",
          "#define CAPSHIM_ST(x) ((uint32_t)VK_STRUCTURE_TYPE_##x)", ""]
    for s in table.structs.values():
        if not s.mirror:
            continue
        o += [f"/* {s.name}: mirrored because older headers (Debian 12: 1.3.239) lack it; {s.source}. */",
              f"#define {_stype_expr(s)} {s.stype_value}u",
              f"typedef struct {s.ctype} {{", "    VkStructureType sType;", "    void *pNext;"]
        o += [f"    {m};" for m in s.mirror]
        o += [f"}} {s.ctype};", ""]
    rows = [(k, table.structs[sn], member) for k in keys for sn, member in k.structs]
    o += _macro("CAPSHIM_FIELDS", "X(key, type, ctype, stype, member): every place a key lives, lookup order first.",
                [f"X({k.key}, {_C_KIND[k.type]}, {s.ctype}, {_stype_expr(s)}, {m})" for k, s, m in rows])
    o += _macro("CAPSHIM_FIELDS_SEM", "CAPSHIM_FIELDS with the key's kind appended: X(key, type, ctype, stype, member, kind).",
                [f"X({k.key}, {_C_KIND[k.type]}, {s.ctype}, {_stype_expr(s)}, {m}, {_C_SEM[k.kind]})"
                 for k, s, m in rows])
    o += ["struct capshim_field {", "    const char *key;", "    int kind; /* enum capshim_kind */",
          "    uint32_t stype;", "    size_t offset;", "    int sem; /* enum capshim_sem */", "};", "",
          "#define CAPSHIM_FIELD_ENTRY(key, kind, ctype, stype, member, sem) \\",
          "    {#key, kind, (uint32_t)(stype), offsetof(ctype, member), sem},", "",
          "static const struct capshim_field capshim_fields[] = {CAPSHIM_FIELDS_SEM(CAPSHIM_FIELD_ENTRY)};",
          "#define CAPSHIM_NUM_FIELDS (sizeof(capshim_fields) / sizeof(capshim_fields[0]))", ""]
    chained = [s for s in table.structs.values() if not s.chain.startswith("base-")]
    o += _macro("CAPSHIM_CHAIN",
                "The probe's pNext chain: X(ctype, stype, features, core, until, extension). Linked when the\n"
                " * device's apiVersion >= core, < until (0: no bound) and it lists the extension (NULL: none).",
                [f"X({s.ctype}, {_stype_expr(s)}, {int(s.chain == 'features')}, {_vk_version(s.core)}, "
                 f"{_vk_version(s.until)}, {_c_str(s.extension)})" for s in chained])
    o += ["#endif", ""]
    return "\n".join(o)


def _c_str(s: str | None) -> str:
    return "NULL" if s is None else f'"{s}"'


# ---------- docs ----------

def _guard(s: Struct) -> str:
    parts = []
    if s.chain.startswith("base-"):
        return "Vulkan 1.0"
    if s.core:
        parts.append(f"Vulkan {s.core[0]}.{s.core[1]}")
    if s.extension:
        parts.append(s.extension)
    text = " + ".join(parts)
    if s.until:
        text += f" (below {s.until[0]}.{s.until[1]})"
    return text


def render_docs(table: Table) -> str:
    """The text of ``docs/capabilities.md``: kinds, limits and one row per key."""
    lim = table.limits
    o = [
        "# Capability keys",
        "",
        "Generated from `src/capshim/profiles/capabilities.toml` and, for each Vulkan key's",
        f"structures, member, value type, sType and guards, from the Khronos registry (vk.xml {table.registry},",
        "through the `vulkan-object` package, kept in `registry_facts.toml`) by",
        "`python -m capshim.profiles.generate --write`; edit the table, not this page.",
        "",
        "## Kinds: what is stronger",
        "",
        "| kind | stronger answer | `raise` profile | `lower` profile |",
        "|---|---|---|---|",
        "| feature | true | may only turn on | may only turn off |",
        "| upper | more (sizes, counts, flag bits) | the layer answers max(device, profile) | min(device, profile) |",
        "| lower | less (`minSubgroupSize`) | min(device, profile) | max(device, profile) |",
        "| exact | none: what the hardware does (`subgroupSize`) | the profile's value, only with `override_exact` | the same |",
        "| version | higher | max(device, profile) | min(device, profile) |",
        "",
        "A profile changes an `exact` key only when it opts in for that key, at the top level:",
        "",
        "```toml",
        'override_exact = ["subgroupSize"]',
        "```",
        "",
        "and then `capshim.profiles.check_against_device` (for `run`, `probe`, `bench`) warns",
        "when the answer differs from the device's.",
        "",
        "Consistency rules, checked by `capshim profile check` where the profile alone decides",
        "them and against the device otherwise (`capshim.profiles.check_against_device`):",
        *[f"`{' <= '.join(seq)}`;" for seq in table.ordered],
        f"powers of two: {', '.join(f'`{k}`' for k in table.power_of_two)}; a feature",
        "answered true needs a structure the device may be queried for (its extension present,",
        "or its core version); a `lower` profile that hides an extension should also turn off",
        "the features of its structures (a warning otherwise). An answer the layer will not give",
        "on the device is a warning in `profile check --device`, `run`, `probe` and `bench`, for",
        "both directions (`capshim.profiles.checks.no_effect`): a value the direction clamps",
        "(`minSubgroupSize = 16` in a raise, or 4 in a lower, on a device with 8; an `apiVersion`",
        "or a limit above the device's in a lower) one line each, and the answers the device",
        "already gives (a feature it has in a raise, a limit equal to its own) one line together.",
        "",
        "Values no conformant device reports are refused by `capshim profile check` (exit 2,",
        "naming key, value and bound) and by the layer's configuration parser alike: a limit below",
        "its spec minimum (the table's `spec_min`, from the Vulkan spec's \"Required Limits\" table:",
        *[f"`{k.key}` {k.spec_min}," for k in table.keys["vulkan"] if k.spec_min is not None],
        "shown in the source column below), an `apiVersion` of 0, and an `apiVersion` whose",
        "variant (bits 29..31 of `VK_MAKE_API_VERSION`) is not 0.",
        "",
        "The layer computes each answer with `capshim_answer` (`native/common/config.c`); Python's",
        "twin is `capshim.profiles.checks.answer`, and a test compares them.",
        "",
        "## Limits shared by the profile schema and the layer's configuration parser",
        "",
        "| limit | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in lim.items()],
        "",
        "Version strings `MAJOR.MINOR[.PATCH]` must fit `VK_MAKE_API_VERSION`: major <= 127,",
        "minor <= 1023, patch <= 4095. Numbers are TOML integers: `24576.0` is a float, refused",
        "by `capshim profile check` as by the layer's parser. Names, keys and values hold no",
        "control characters; messages escape any they quote. A profile's TOML is read within",
        "the bounds of `profiles.language.TOML_LIMITS` (size, nesting, array length, table",
        "size) before any validation.",
        "",
        "## Vulkan",
        "",
        "| key | kind | type | unit | structures (guard) | description | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in table.keys["vulkan"]:
        where = "<br>".join(
            f"`{sn}`{'' if m == k.key else f'.{m}'} ({_guard(table.structs[sn])})" for sn, m in k.structs)
        floor = f"; spec minimum {k.spec_min} (Required Limits table)" if k.spec_min is not None else ""
        o.append(f"| `{k.key}` | {k.kind} | {k.type} | {k.unit} | {where} | {k.description} | {k.source}{floor} |")
    o += ["", "## Adding a Vulkan capability", "", *registry.ADDING_A_KEY,
          "", "## Metal", "", "| key | kind | type | unit | selector | description | source |", "|---|---|---|---|---|---|---|"]
    for k in table.keys["metal"]:
        o.append(f"| `{k.key}` | {k.kind} | {k.type} | {k.unit} | `{k.selector}` | {k.description} | {k.source} |")
    return "\n".join(o) + "\n"
