"""Read JSON capshim did not just write itself: bounded, strict, and checked against a shape.

Every reader of JSON from outside (a bundle's metadata.json or summary.json, a
host file, a status line, a workload's output) goes through :func:`load` (a
file) or :func:`loads` (bytes or text already in hand):

- at most ``limit`` bytes, of a regular file (:func:`capshim.paths.read_limited`:
  no FIFO, no device);
- UTF-8, strict JSON (no ``NaN``/``Infinity``, no number that overflows a float);
- nesting at most ``max_depth`` deep (a deeper document is refused before
  Python's recursion limit is reached, whatever its depth);
- integers of at most :data:`capshim.contracts.numbers.MAX_DIGITS` digits (a
  401-digit count is not a measurement, and converting it to a float overflows);
- then, optionally, a JSON Schema (Draft 2020-12, the ``jsonschema`` library
  that also checks profiles).

Every refusal is :class:`JsonShapeError` (exit 2) naming the source and, where
there is one, the JSON path: ``b/metadata.json: $.host.cpu_count: 'x' is not
of type 'integer'``, ``x.json: $.samples_ts[0]: an integer of 401 digits``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from capshim import paths
from capshim.contracts.numbers import MAX_DIGITS
from capshim.errors import CapshimError

__all__ = ["JsonShapeError", "load", "loads", "check", "depth", "METADATA_SCHEMA", "load_metadata",
           "MAX_BYTES", "MAX_DEPTH"]

MAX_BYTES = 64 << 20
"""Bytes :func:`load` reads at most by default (64 MiB)."""
MAX_DEPTH = 64
"""Nesting depth accepted by default (capshim's own files use less than 10)."""


class JsonShapeError(CapshimError):
    """JSON that is unreadable, not strict JSON, too large, too deep, has a too long integer,
    or has the wrong shape (exit 2); the message names the source and the JSON path."""


def depth(value) -> int:
    """Nesting depth of a decoded JSON value (a scalar is 0, ``[]`` is 1); iterative, no recursion limit."""
    best, stack = 0, [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
            best = max(best, d + 1)
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
            best = max(best, d + 1)
    return best


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _text_depth(text: str, max_depth: int) -> int:
    """The deepest ``[``/``{`` nesting of JSON text (strings skipped), counted only when the text
    holds more than ``max_depth`` brackets; iterative, so no depth reaches Python's recursion limit."""
    if text.count("[") + text.count("{") <= max_depth:
        return 0
    best = level = 0
    for m in _TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            level += 1
            best = max(best, level)
        elif c in "]}":
            level -= 1
    return best


class _Refused:
    """A number the decoder met that capshim refuses; replaced by an error naming its JSON path."""

    def __init__(self, why: str):
        self.why = why


def _int(text: str):
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        return _Refused(f"an integer of {digits} digits (more than {MAX_DIGITS}) is not a measurement")
    return int(text)


def _float(text: str):
    value = float(text)
    if not math.isfinite(value):
        return _Refused(f"{text[:40]} does not fit a 64-bit float")
    return value


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON (strict JSON has no NaN or Infinity)")


def _refused_path(value) -> tuple[str, str] | None:
    """``(JSON path, reason)`` of the first refused number in ``value``, or None; iterative."""
    stack = [(value, "$")]
    while stack:
        v, at = stack.pop()
        if isinstance(v, _Refused):
            return at, v.why
        if isinstance(v, dict):
            stack.extend(reversed([(x, f"{at}.{k}") for k, x in v.items()]))
        elif isinstance(v, list):
            stack.extend(reversed([(x, f"{at}[{i}]") for i, x in enumerate(v)]))
    return None


def check(value, schema: dict, source: str) -> None:
    """Validate a decoded value against ``schema`` (JSON Schema, Draft 2020-12).

    Raises:
        JsonShapeError: naming ``source`` and the JSON path of the first problem.
    """
    import jsonschema  # here, not at the top: reading JSON without a schema does not need it (0.1-0.2 s)

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise JsonShapeError(f"{source}: {e.json_path}: {e.message}")


def _unique(pairs: list) -> dict | _Refused:
    """A JSON object's pairs as a dict, or a refusal when a key appears twice (RFC 8259 leaves the
    meaning of a repeated name to the reader; Python's own keeps the last, silently)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            return _Refused(f"key {k!r} appears twice in one object (which one is meant?)")
        out[k] = v
    return out


def loads(data: bytes | str, source: str, schema: dict | None = None, *, max_depth: int = MAX_DEPTH,
          limit: int = MAX_BYTES, unique_keys: bool = False):
    """Decode and shape-check JSON already read (a status line, a workload's stdout).

    Args:
        data: UTF-8 bytes or text.
        source: how to name it in errors (a file name, ``"line 3 of x.jsonl"``).
        schema: a JSON Schema (Draft 2020-12), or None for any strict JSON.
        max_depth: the deepest nesting accepted.
        limit: the most bytes (or characters) accepted.
        unique_keys: refuse an object that repeats a key (a file a person or another tool wrote,
            where the two values may differ: a Khronos profile file).

    Returns:
        The decoded value (floats finite, integers of at most ``MAX_DIGITS`` digits).

    Raises:
        JsonShapeError: longer than ``limit``, not UTF-8, not strict JSON, deeper than
            ``max_depth``, a number refused (names its JSON path), or a wrong shape.
    """
    if len(data) > limit:
        raise JsonShapeError(f"{source}: larger than {limit} bytes")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonShapeError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if _text_depth(data, max_depth) > max_depth:
        raise JsonShapeError(f"{source}: nested deeper than {max_depth}")
    try:
        value = json.loads(data, parse_constant=_no_constants, parse_int=_int, parse_float=_float,
                           object_pairs_hook=_unique if unique_keys else None)
    except RecursionError:
        raise JsonShapeError(f"{source}: nested deeper than {max_depth}") from None
    except ValueError as exc:
        raise JsonShapeError(f"{source}: invalid JSON: {exc}") from None
    refused = _refused_path(value)
    if refused:
        raise JsonShapeError(f"{source}: {refused[0]}: {refused[1]}")
    if depth(value) > max_depth:
        raise JsonShapeError(f"{source}: nested deeper than {max_depth}")
    if schema is not None:
        check(value, schema, source)
    return value


def load(path: str | Path, schema: dict | None = None, *, limit: int = MAX_BYTES,
         max_depth: int = MAX_DEPTH, unique_keys: bool = False):
    """Read, decode and shape-check one JSON file (:func:`loads` of its bytes).

    Args:
        path: the file.
        schema: a JSON Schema (Draft 2020-12), or None for any strict JSON.
        limit: the most bytes read.
        max_depth: the deepest nesting accepted.
        unique_keys: refuse an object that repeats a key (:func:`loads`).

    Returns:
        The decoded value.

    Raises:
        JsonShapeError: cannot read (missing, not a regular file, larger than
            ``limit``), or any refusal of :func:`loads`; the message names the
            file (and the JSON path).
    """
    p = Path(path)
    try:
        data = paths.read_limited(p, limit)
    except OSError as exc:
        raise JsonShapeError(f"{p}: cannot read: {exc.strerror or exc}") from None
    return loads(data, str(p), schema, max_depth=max_depth, limit=limit, unique_keys=unique_keys)


_STR_LIST = {"type": "array", "items": {"type": "string"}}

METADATA_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "capshim evidence bundle metadata.json (docs/evidence.md)",
    "type": "object",
    "required": ["bundle_format", "host"],
    "properties": {
        "bundle_format": {"type": "string", "pattern": "^capshim-evidence/[0-9]+$"},
        "host": {"type": "object", "properties": {
            "host": {"type": "string"}, "os": {"type": "string"}, "machine": {"type": "string"},
            "cpu_count": {"type": ["integer", "null"]}, "python": {"type": "string"},
            "capshim": {"type": "string"}, "created_utc": {"type": "string"}}},
        "interrupted": {"type": "boolean"},
        "failed_runs": {"type": "integer", "minimum": 0},
        "command_line": _STR_LIST,
        "baseline": {"type": "string"},
        "method": {"type": "object", "properties": {
            "repetitions": {"type": "integer", "minimum": 1},
            "warmup_runs_per_arm": {"type": "integer", "minimum": 0},
            "timeout_s": {"type": ["number", "null"], "exclusiveMinimum": 0}}},
        "workload": {"type": "object", "properties": {
            "argv": _STR_LIST,
            "binary_sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"},
            "model_sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"}}},
        "arms": {"type": "object", "additionalProperties": {"type": "object"}},
        "inherited_env": {"type": "object", "required": ["variables"], "properties": {
            "variables": {"type": "object", "additionalProperties": {"type": "string"}},
            "prefixes": _STR_LIST, "names": _STR_LIST, "redacted": _STR_LIST}},
        "finalize_failures": {"type": "array", "items": {
            "type": "object", "required": ["step", "error"],
            "properties": {"step": {"type": "string"}, "error": {"type": "string"}}}},
    },
}
"""The parts of metadata.json that capshim and readers rely on; other keys are free-form records."""


def load_metadata(bundle: str | Path) -> dict:
    """A bundle's metadata.json, checked against :data:`METADATA_SCHEMA`.

    Raises:
        JsonShapeError: see :func:`load`.
    """
    return load(Path(bundle) / "metadata.json", METADATA_SCHEMA)
