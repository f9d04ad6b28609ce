"""The capability keys a profile may set, per API, under the API's own names.

Everything here is read from the capability table, ``capabilities.toml``
beside this file, with the Vulkan keys' registry facts, ``registry_facts.toml`` (see
:mod:`capshim.profiles.table` and :mod:`capshim.profiles.registry`; :mod:`capshim.profiles.generate`
writes the facts from vk.xml, the C side, ``native/vulkan/caps_table.h``, and ``docs/capabilities.md``).

Value types (``KEYS``):
    bool     VkBool32 answer; ``true``/``false`` in a profile.
    u32      unsigned 32-bit count or size (bytes where the name says Size).
    flags    a 32-bit mask; an integer, or a list of flag names (see FLAG_NAMES).
    version  a Vulkan version (``VK_MAKE_API_VERSION``); "1.3.230" or an integer.
    u64      unsigned 64-bit size in bytes.
    family   a Metal GPU family number (MTLGPUFamily enum value, e.g. 1009).
    families a list of Metal GPU family numbers.
    cc       a CUDA compute capability, major * 10 + minor (7.5 is 75); "7.5" or 75 in a profile.
    string   a device name (CUDA ``name``), text rather than a number.

Kinds (``KINDS``, the direction rules): feature (true is stronger), upper
(more is stronger), lower (less is stronger: ``minSubgroupSize``), exact (what
the hardware does: ``subgroupSize``; changed only with ``override_exact``),
version (higher is stronger).
"""

from __future__ import annotations

from capshim.profiles.table import load

_TABLE = load()

#: api -> key -> value type, in the probe's order.
KEYS: dict[str, dict[str, str]] = {api: {k.key: k.type for k in keys} for api, keys in _TABLE.keys.items()}
#: api -> key -> kind (direction rule).
KINDS: dict[str, dict[str, str]] = {api: {k.key: k.kind for k in keys} for api, keys in _TABLE.keys.items()}
VULKAN_KEYS: dict[str, str] = KEYS["vulkan"]
METAL_KEYS: dict[str, str] = KEYS["metal"]
#: flags key -> {flag name -> bit} (the Vulkan FlagBits the table names).
FLAG_NAMES: dict[str, dict[str, int]] = {k.key: _TABLE.flags[k.flag_names] for k in _TABLE.keys["vulkan"]
                                         if k.flag_names}
#: Limits shared with the layer's configuration parser (``[limits]``).
LIMITS: dict[str, int] = dict(_TABLE.limits)
#: Consistency rules (``[rules]``): key sequences that must be non-decreasing, keys that are powers of two.
ORDERED: tuple[tuple[str, ...], ...] = _TABLE.ordered
POWER_OF_TWO: tuple[str, ...] = _TABLE.power_of_two
#: api -> its device-name key of type "string" in the table (CUDA: ``name``); Vulkan's ``deviceName``
#: is outside the table (:data:`capshim.profiles.model.DEVICE_NAME_KEY`).
STRING_KEYS: dict[str, str] = {api: k.key for api, keys in _TABLE.keys.items() for k in keys if k.type == "string"}
#: api -> key -> the smallest value the Vulkan spec lets a device report ("Required Limits" table).
SPEC_MIN: dict[str, dict[str, int]] = {api: {k.key: k.spec_min for k in keys if k.spec_min is not None}
                                       for api, keys in _TABLE.keys.items()}
