"""The profile language: a profile's TOML text -> a valid :class:`Profile`, or a :class:`ProfileError`.

The schema (built from ``catalog.py`` and checked with ``jsonschema``) rejects
unknown keys, wrong types and numbers written as strings; its limits are the
layer configuration parser's (``[limits]`` of ``capabilities.toml``), so a
profile that passes here is one the layer takes as written. Then the rules of
each key's kind (``docs/capabilities.md``): a ``raise`` profile may not turn a
feature off or hide an extension, a ``lower`` profile may not turn one on or
add one, an ``exact`` key changes only when ``override_exact`` names it,
``minSubgroupSize <= subgroupSize <= maxSubgroupSize`` among the keys the
profile sets, Metal profiles are raise-only (the Metal shim never lowers
an answer) and CUDA profiles lower-only (the device's real kernels must still
run); a CUDA ``computeCapability`` is "7.5" or 75 (major * 10 + minor).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from capshim.contracts import numbers, tomlread
from capshim.contracts.suggest import did_you_mean
from capshim.profiles.catalog import FLAG_NAMES, KEYS, KINDS, LIMITS, ORDERED, POWER_OF_TWO, SPEC_MIN
from capshim.profiles.model import (DEVICE_NAME_APIS, DEVICE_NAME_KEY, DEVICE_NAME_MAX_BYTES, DEVICE_NAME_TEXT_RE,
                                    U32_MAX, U64_MAX, Profile, ProfileError, device_name_problem, name_key,
                                    parse_cc, parse_version)

if TYPE_CHECKING:
    import jsonschema

__all__ = ["parse", "schema"]

# Patterns are whole-string matches: jsonschema searches with re.search, where
# "$" also matches before a final newline, so they end in \Z.
NAME_RE = r"\A[a-z0-9][a-z0-9._-]{0,63}\Z"
EXTENSION_RE = r"\AVK_[A-Za-z0-9_]+\Z"
CC_RE = r"\A[1-9][0-9]?\.[0-9]\Z"
VERSION_RE = r"\A(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,3})(\.(0|[1-9][0-9]{0,3}))?\Z"
LINE_RE = r"\A[^\x00-\x1f\x7f]*\Z"
# deviceName: no C0, DEL or C1 controls (the shims' configuration parsers refuse them too).
NAME_TEXT_RE = DEVICE_NAME_TEXT_RE


def _kind_schema(api: str, kind: str, key: str) -> dict:
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "u32":
        return {"type": "integer", "minimum": 0, "maximum": U32_MAX}
    if kind == "u64":
        return {"type": "integer", "minimum": 0, "maximum": U64_MAX}
    if kind == "version":
        return {"anyOf": [{"type": "integer", "minimum": 0, "maximum": U32_MAX},
                          {"type": "string", "pattern": VERSION_RE}]}
    if kind == "flags":
        names = sorted(FLAG_NAMES.get(key, {}))
        return {"anyOf": [{"type": "integer", "minimum": 0, "maximum": U32_MAX},
                          {"type": "array", "items": {"enum": names}, "uniqueItems": True}]}
    if kind == "family":
        return {"type": "integer", "minimum": 1001, "maximum": 1999}
    if kind == "cc":
        return {"anyOf": [{"type": "integer", "minimum": 10, "maximum": 999}, {"type": "string", "pattern": CC_RE}]}
    if kind == "string":
        return {"type": "string", "minLength": 1, "pattern": NAME_TEXT_RE}
    if kind == "families":
        fam = {"type": "integer", "anyOf": [{"minimum": 2001, "maximum": 2999},
                                            {"minimum": 3001, "maximum": 3999},
                                            {"minimum": 5001, "maximum": 5999}]}
        return {"type": "array", "items": fam, "uniqueItems": True}
    raise AssertionError(f"unknown kind {kind} for {api}.{key}")


def schema(api: str) -> dict:
    """The JSON Schema (draft 2020-12) of a profile for ``api``.

    Raises:
        KeyError: when ``api`` is not "vulkan", "metal" or "cuda".
    """
    caps = {k: _kind_schema(api, kind, k) for k, kind in KEYS[api].items()}
    if api in DEVICE_NAME_APIS or name_key(api) != DEVICE_NAME_KEY:  # a string answer (issue 21): the
        caps[name_key(api)] = {"type": "string", "minLength": 1, "pattern": NAME_TEXT_RE}  # bytes: _resolve
    exact = [k for k, kind in KINDS[api].items() if kind == "exact"]
    props: dict[str, Any] = {
        "name": {"type": "string", "pattern": NAME_RE},
        "api": {"enum": sorted(KEYS)},
        "direction": {"enum": ["raise", "lower"]},
        "version": {"type": "integer", "minimum": 1, "maximum": LIMITS["profile_version_max"]},
        "description": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": LINE_RE},
        "capabilities": {"type": "object", "properties": caps, "additionalProperties": False},
        "override_exact": {"type": "array", "items": {"enum": exact}, "uniqueItems": True},
        "same_on_newer": {"type": "array", "items": {"enum": sorted(KEYS[api])}, "uniqueItems": True},
    }
    if api == "vulkan":
        props["extensions"] = {
            "type": "object",
            "maxProperties": LIMITS["extensions_max"],
            "propertyNames": {"pattern": EXTENSION_RE, "maxLength": LIMITS["extension_name_max"]},
            "additionalProperties": {"anyOf": [{"type": "boolean"},
                                               {"type": "integer", "minimum": 1, "maximum": U32_MAX}]},
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": props,
        "required": ["name", "api", "direction", "version", "description"],
        "additionalProperties": False,
    }


def _first_error(errors) -> jsonschema.ValidationError:
    """The error to report: the first by path; at one path an unknown key before a missing
    one (a misspelt ``descripton`` is both, and its name says more)."""
    return min(errors, key=lambda e: ([str(p) for p in e.absolute_path], e.validator != "additionalProperties",
                                      e.message))


@functools.cache
def _validator_class():
    """Draft 2020-12 with the layer's idea of an integer (:func:`capshim.contracts.numbers.is_integer`):
    JSON Schema counts ``24576.0`` as an integer, the layer's parser does not. Built on first use, so
    that importing the profiles (every command does) does not import jsonschema (0.1-0.2 s)."""
    import jsonschema

    return jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
            "integer", lambda _checker, value: numbers.is_integer(value)))


def _unknown_key(api: str, path: list[str], err: jsonschema.ValidationError) -> tuple[str, str]:
    """The dotted key and the reason for an ``additionalProperties`` error (an unknown key)."""
    known = err.schema.get("properties", {})
    name = sorted(set(err.instance) - set(known))[0]
    key = tomlread.dotted(path + [name])
    if path != ["capabilities"]:
        table, dot, rest = name.partition(".")
        if dot and table in known:  # "capabilities.shaderFloat16" = false: a quoted key is one key
            return key, f"unknown key: quoted, it is one key, dot included (write {table}.{rest} unquoted, " \
                        f"or {rest} under [{table}])"
        return key, "unknown key" + did_you_mean(name, known)
    if name == "name" and name_key(api) in known:  # CUDA's spelling until issue 22 settled on deviceName
        return key, f"unknown capability for api '{api}' (did you mean '{name_key(api)}'? the device name " \
                    "is deviceName in every API's profile)"
    others = [other for other in KEYS if other != api and name in KEYS[other]]
    if others:
        return key, f"a capability of api '{others[0]}'; this profile's api is '{api}'"
    return key, f"unknown capability for api '{api}'" + did_you_mean(name, known)


def _check_schema(data: dict, source: str) -> None:
    api = data.get("api")
    if api is None:
        raise ProfileError(source, "api", None, "required key is missing (" + ", ".join(f'"{a}"' for a in KEYS) + ")")
    if not isinstance(api, str) or api not in KEYS:
        raise ProfileError(source, "api", api, f"must be one of {', '.join(sorted(KEYS))}")
    errors = list(_validator_class()(schema(api)).iter_errors(data))
    if not errors:
        return
    err = _first_error(errors)
    path = list(err.absolute_path)
    if err.validator == "additionalProperties":
        key, reason = _unknown_key(api, path, err)
        raise ProfileError(source, key, None, reason)
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        raise ProfileError(source, missing, None, "required key is missing")
    if "propertyNames" in err.schema_path:
        name_max = LIMITS["extension_name_max"]
        raise ProfileError(source, tomlread.dotted(path + [str(err.instance)]), None,
                           f"longer than {name_max} characters (VK_MAX_EXTENSION_NAME_SIZE)"
                           if len(err.instance) > name_max else
                           "not an extension name (VK_ followed by letters, digits and _)")
    if err.validator == "maxProperties":
        raise ProfileError(source, tomlread.dotted(path), None, f"more than {err.validator_value} extensions")
    key = tomlread.dotted(path) or None
    value = err.instance
    kind = None
    if path == ["capabilities", name_key(api)]:
        kind = "device-name"
    elif len(path) == 2 and path[0] == "capabilities":
        kind = KEYS[api].get(path[1])
    elif path == ["version"]:
        kind = "profile-version"
    elif len(path) == 2 and path[0] == "extensions":
        kind = "extension"
    elif path in (["override_exact"], ["same_on_newer"]):
        kind = "override-exact"
    elif path in (["capabilities"], ["extensions"]):
        kind = "table"
    reason = _reason(err, kind)
    if isinstance(value, float) and value.is_integer() and kind not in (None, "bool"):
        reason += f" (write {int(value)}: a whole number has no decimal point)"
    elif kind == "cc" and isinstance(value, float):
        reason += f" (write \"{value}\" in quotes: a TOML float is no compute capability)"
    raise ProfileError(source, key, value, reason)


def _reason(err: jsonschema.ValidationError, kind: str | None) -> str:
    expected = {
        "bool": "expected true or false",
        "u32": "expected a whole number 0..4294967295",
        "u64": "expected a whole number 0..18446744073709551615",
        "version": "expected a version like \"1.3.230\" or a whole number",
        "flags": "expected a whole number or a list of flag names",
        "family": "expected an Apple family number 1001..1999",
        "cc": "expected a compute capability like \"7.5\" or major * 10 + minor (75)",
        "families": "expected a list of Mac (2xxx), Common (3xxx) or Metal (5xxx) family numbers",
        "profile-version": f"expected a whole number 1..{LIMITS['profile_version_max']}",
        "extension": "expected false, true or a spec version 1..4294967295",
        "override-exact": "expected a list of exact keys ("
                          + ", ".join(k for k, v in KINDS["vulkan"].items() if v == "exact") + "), each once",
        "table": "expected a table (a [capabilities] or [extensions] header, once)",
        "device-name": f"expected a device name: a string of 1..{DEVICE_NAME_MAX_BYTES} UTF-8 bytes without "
                       "control characters",
    }
    if kind in expected:
        return expected[kind]
    if err.validator == "enum":
        return "must be one of " + ", ".join(str(v) for v in err.validator_value)
    return err.message


def _resolve(data: dict, source: str, text: str) -> Profile:
    api, direction = data["api"], data["direction"]
    caps: dict[str, int] = {}
    device_name = _device_name(data, source)
    for key, value in data.get("capabilities", {}).items():
        if key == name_key(api):
            continue
        kind = KEYS[api][key]
        where = f"capabilities.{key}"
        if kind == "bool":
            if direction == "raise" and value is False:
                raise ProfileError(source, where, value, "a 'raise' profile cannot turn a feature off")
            if direction == "lower" and value is True:
                raise ProfileError(source, where, value, "a 'lower' profile cannot turn a feature on")
            caps[key] = int(value)
        elif kind == "version":
            try:
                caps[key] = parse_version(value)
            except ValueError as exc:
                raise ProfileError(source, where, value, str(exc)) from None
            if caps[key] == 0:
                raise ProfileError(source, where, value, "version 0 is no Vulkan version (1.0 is the lowest)")
            if caps[key] >> 29:
                raise ProfileError(source, where, value,
                                   f"variant {caps[key] >> 29} in bits 29..31: a Vulkan API version has variant 0 "
                                   "(VK_MAKE_API_VERSION)")
        elif kind == "flags":
            if isinstance(value, list):
                bits = FLAG_NAMES[key]
                mask = 0
                for name in value:
                    mask |= bits[name]
                caps[key] = mask
            else:
                caps[key] = value
        elif kind == "families":
            caps[key] = sorted(value)
        elif kind == "cc":
            try:
                caps[key] = parse_cc(value)
            except ValueError as exc:
                raise ProfileError(source, where, value, str(exc)) from None
        else:
            if api == "cuda" and value < 1:
                raise ProfileError(source, where, value, "no CUDA device answers 0 (applications divide by "
                                   "counts and sizes such as multiProcessorCount): at least 1")
            floor = SPEC_MIN.get(api, {}).get(key)
            if floor is not None and value < floor:
                raise ProfileError(source, where, value,
                                   f"below the Vulkan spec's required minimum {floor} (Vulkan spec, Limits, "
                                   "\"Required Limits\" table): no conformant device answers less")
            caps[key] = value
    exts: dict[str, int] = {}
    for name, value in data.get("extensions", {}).items():
        where = f"extensions.{name}"
        spec = 0 if value is False else (1 if value is True else value)
        if direction == "raise" and spec == 0:
            raise ProfileError(source, where, value, "a 'raise' profile cannot hide an extension")
        if direction == "lower" and spec != 0:
            raise ProfileError(source, where, value, "a 'lower' profile can only hide an extension (false)")
        exts[name] = spec
    if api == "metal" and direction != "raise":
        raise ProfileError(source, "direction", direction, "Metal profiles are raise-only")
    if api == "cuda" and direction != "lower":
        raise ProfileError(source, "direction", direction, "CUDA profiles are lower-only: the device's real "
                           "kernels must still run, so the CUDA shim never answers more than the device has")
    override = tuple(data.get("override_exact", ()))
    for key in override:
        if key not in caps:
            raise ProfileError(source, "override_exact", key, "names a key the profile does not set")
    for key in caps:
        if KINDS[api][key] == "exact" and key not in override:
            raise ProfileError(source, f"capabilities.{key}", data["capabilities"][key],
                               f"an exact property (what the hardware does): add override_exact = [\"{key}\"] "
                               "to change it anyway")
    same = tuple(data.get("same_on_newer", ()))
    for key in same:
        if key not in caps:
            raise ProfileError(source, "same_on_newer", key, "names a key the profile does not set")
    _check_rules(caps, source)
    return Profile(name=data["name"], api=api, direction=direction, version=data["version"],
                   description=data["description"], capabilities=caps, extensions=exts,
                   override_exact=override, device_name=device_name, source=source, text=text,
                   same_on_newer=same)


def _device_name(data: dict, source: str) -> str:
    """``[capabilities] deviceName`` (schema-checked: a string without controls), or "".

    Raises:
        ProfileError: not UTF-8 (a lone surrogate) or longer than
            VK_MAX_PHYSICAL_DEVICE_NAME_SIZE - 1 = 255 bytes (vulkan_core.h), the one limit of
            every API that takes a name (:data:`~capshim.profiles.model.DEVICE_NAME_APIS`).
    """
    key = name_key(data["api"])
    value = data.get("capabilities", {}).get(key, "")
    why = device_name_problem(value) if value else None
    if why:
        raise ProfileError(source, f"capabilities.{key}", value, why)
    return value


def _check_rules(caps: dict[str, int], source: str) -> None:
    """The table's ``[rules]`` among the keys a profile sets: powers of two (the spec says
    "is a power-of-two" of each subgroup size), and sequences non-decreasing
    (minSubgroupSize <= subgroupSize <= maxSubgroupSize)."""
    for key in POWER_OF_TWO:
        value = caps.get(key)
        if value is not None and (value < 1 or value & (value - 1)):
            raise ProfileError(source, f"capabilities.{key}", value, "not a power of two (the spec requires one)")
    for seq in ORDERED:
        given = [(k, caps[k]) for k in seq if k in caps]
        for (lo_key, lo), (hi_key, hi) in zip(given, given[1:]):
            if lo > hi:
                rule = "the spec requires" if seq[0] in KEYS["vulkan"] else "every CUDA device has"
                raise ProfileError(source, f"capabilities.{hi_key}", hi,
                                   f"below {lo_key} {lo} ({rule} {' <= '.join(seq)})")


MAX_PROFILE_BYTES = 1 << 20
"""The largest profile text read, in bytes (a profile is a few hundred bytes)."""

TOML_LIMITS = tomlread.Limits(max_bytes=MAX_PROFILE_BYTES, max_depth=3, max_items=64, max_keys=256)
"""What a profile's TOML may hold (:mod:`capshim.contracts.tomlread`). Profiles are
flat: ``capabilities.KEY = [..]`` is 2 levels below the document (3 lets the
schema name a nested array's type). The longest array a profile needs is a
flag list (32 bits) and the largest table ``[capabilities]`` (at most
``values_max`` keys the layer takes); jsonschema never sees more."""


def parse(text: str, source: str) -> Profile:
    """Parse and validate a profile's TOML text.

    Raises:
        ProfileError: naming ``source``, the key, the value and the reason
            (the TOML limits of :data:`TOML_LIMITS` included).
    """
    try:
        data = tomlread.loads(text, source, TOML_LIMITS)
    except tomlread.TomlError as exc:
        raise ProfileError(source, exc.key, None, exc.reason) from None
    _check_schema(data, source)
    return _resolve(data, source, text)
