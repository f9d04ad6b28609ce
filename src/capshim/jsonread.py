"""Read a JSON file capshim did not just write itself: bounded, strict, and checked against a shape.

Every reader of a file from outside (a bundle's metadata.json or summary.json,
a host file) goes through :func:`load`: at most ``limit`` bytes of a regular
file (:func:`capshim.paths.read_limited`: no FIFO, no device), strict JSON (no
``NaN``/``Infinity``), nesting at most ``max_depth`` deep, then a JSON Schema
(Draft 2020-12, the ``jsonschema`` library that also checks profiles). A wrong
shape is :class:`JsonShapeError` (exit 2) naming the file and the JSON path,
for example ``b/metadata.json: $.host.cpu_count: 'x' is not of type 'integer'``.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from capshim import paths
from capshim.errors import CapshimError

__all__ = ["JsonShapeError", "load", "check", "depth", "METADATA_SCHEMA", "load_metadata"]

MAX_BYTES = 64 << 20
MAX_DEPTH = 64


class JsonShapeError(CapshimError):
    """A JSON file is unreadable, not strict JSON, too large or too deep, or of the wrong shape (exit 2)."""


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


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON (strict JSON has no NaN or Infinity)")


def check(value, schema: dict, source: str) -> None:
    """Validate a decoded value against ``schema``; raise JsonShapeError naming ``source`` and the JSON path."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise JsonShapeError(f"{source}: {e.json_path}: {e.message}")


def load(path: str | Path, schema: dict | None = None, *, limit: int = MAX_BYTES,
         max_depth: int = MAX_DEPTH):
    """Read, decode and shape-check one JSON file.

    Args:
        path: the file.
        schema: a JSON Schema (Draft 2020-12), or None for any strict JSON.
        limit: the most bytes read.
        max_depth: the deepest nesting accepted.

    Returns:
        The decoded value.

    Raises:
        JsonShapeError: cannot read (missing, not a regular file, larger than
            ``limit``), not UTF-8 strict JSON, deeper than ``max_depth``, or a
            wrong shape; the message names the file (and the JSON path).
    """
    p = Path(path)
    try:
        data = paths.read_limited(p, limit)
    except OSError as exc:
        raise JsonShapeError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError as exc:
        raise JsonShapeError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise JsonShapeError(f"{p}: nested deeper than {max_depth}") from None
    except ValueError as exc:
        raise JsonShapeError(f"{p}: invalid JSON: {exc}") from None
    if depth(value) > max_depth:
        raise JsonShapeError(f"{p}: nested deeper than {max_depth}")
    if schema is not None:
        check(value, schema, str(p))
    return value


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
