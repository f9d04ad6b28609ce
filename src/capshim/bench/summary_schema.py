"""The shape of ``summary.json``, checked whenever capshim reads one.

A JSON Schema (draft 2020-12, checked with ``jsonschema``) of what the
report, the host baseline and the exporters read: the baseline arm, the arms
with their state and per-test statistics, the comparisons, the host, each
test's metric (unit, direction) and the control workloads' verdicts. Extra
keys are allowed, so summaries written by earlier versions (before
``processes``/``by_process`` existed) still load and report. A wrong shape is
a :class:`SummaryShapeError` (exit 2) naming the file and the path inside it
(``$.arms.a.tests``), never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from capshim.bench.analysis import AnalysisError

__all__ = ["SUMMARY_SCHEMA", "SummaryShapeError", "validate", "load", "MAX_BYTES"]

#: Largest summary.json read (bytes): a bench of 100,000 processes stays far below it.
MAX_BYTES = 256 * 1024 * 1024

_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_CMP = {"type": ["object", "null"], "required": ["value"],
        "properties": {"value": _NUM, "ci95": {"oneOf": [{"type": "null"},
                                                          {"type": "array", "items": _NUM, "minItems": 2,
                                                           "maxItems": 2}]},
                       "level": {"enum": ["process", "repetition"]},
                       "processes": {"type": "array", "items": {"type": "integer"}}}}
_STATS = {"type": "object", "required": ["n", "median", "min", "max"],
          "properties": {"n": {"type": "integer", "minimum": 0}, "median": _NUM, "mean": _NUM, "min": _NUM,
                         "max": _NUM, "stdev": _NUM_OR_NULL, "q25": _NUM, "q75": _NUM, "iqr": _NUM,
                         "spread_pct": _NUM_OR_NULL, "iqr_pct": _NUM_OR_NULL,
                         "processes": {"type": "integer", "minimum": 0},
                         "repetitions": {"type": "integer", "minimum": 0},
                         "samples": {"type": "array", "items": _NUM},
                         "by_process": {"type": "array", "items": {"type": "array", "items": _NUM}},
                         "config": {"type": "object"},
                         "mismatch": {"type": "array", "items": {"type": "object"}},
                         "warnings": {"type": "array", "items": {"type": "string"}},
                         "speedup": _CMP, "pct_of_host": _CMP}}
#: One test's metric (:meth:`capshim.bench.metrics.Metric.to_dict`).
_METRIC = {"type": "object", "required": ["unit", "better"],
           "properties": {"spec": {"type": "string"}, "kind": {"type": "string"}, "unit": {"type": "string"},
                          "better": {"enum": ["higher", "lower"]}, "ratio": {"type": "string"}}}
#: One control workload's verdicts (:func:`capshim.bench.metrics.annotate`).
_CONTROL = {"type": "object", "required": ["expectation", "tests", "arms"],
            "properties": {"expectation": {"type": "string"},
                           "tests": {"type": "array", "items": {"type": "string"}},
                           "arms": {"type": "object", "additionalProperties": {
                               "type": "object", "additionalProperties": {
                                   "type": "object", "required": ["ratio", "moved"],
                                   "properties": {"ratio": _NUM, "moved": {"type": "boolean"},
                                                  "ci95": {"oneOf": [{"type": "null"},
                                                                     {"type": "array", "items": _NUM,
                                                                      "minItems": 2, "maxItems": 2}]}}}}}}}
SUMMARY_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "capshim summary.json",
    "type": "object",
    "required": ["baseline", "arms"],
    "properties": {
        "schema": {"type": "string"},
        "baseline": {"type": "string"},
        "tests": {"type": "array", "items": {"type": "string"}},
        "method": {"type": "object", "additionalProperties": {"type": "string"}},
        "host": {"type": ["object", "null"],
                 "properties": {"name": {"type": ["string", "null"]}, "source": {"type": ["string", "null"]},
                                "path": {"type": "object"},
                                "tests": {"type": "object", "additionalProperties": _STATS}}},
        "arms": {"type": "object", "minProperties": 1, "additionalProperties": {
            "type": "object", "required": ["state", "tests"],
            "properties": {"state": {"type": "string"}, "spec": {"type": "object"}, "path": {"type": "object"},
                           "runs": {"type": "array", "items": {"type": "object"}},
                           "flags": {"type": "array", "items": {"type": "string"}},
                           "tests": {"type": "object", "additionalProperties": _STATS}}}},
        "aa": {"type": ["object", "null"],
               "properties": {"arm": {"type": "string"}, "reference": {"type": ["string", "null"]},
                              "tests": {"type": "object", "additionalProperties": _CMP}}},
        "warnings": {"type": "array", "items": {"type": "object"}},
        "notes": {"type": "array", "items": {"type": "string"}},
        "precision": {"type": "object"},
        "interrupted": {"type": "boolean"},
        "metrics": {"type": "object", "additionalProperties": _METRIC},
        "controls": {"type": "object", "additionalProperties": _CONTROL},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(SUMMARY_SCHEMA)


class SummaryShapeError(AnalysisError):
    """A summary.json of the wrong shape (exit 2): names the file and the path inside it."""


def validate(data, source: str) -> dict:
    """Check ``data`` against :data:`SUMMARY_SCHEMA`; return it.

    Raises:
        SummaryShapeError: ``"<source>: at $.arms.a: 'tests' is a required property"``;
            the baseline must name one of the arms.
    """
    err = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if err is not None:
        raise SummaryShapeError(f"{source}: not a capshim summary: at {err.json_path}: {err.message}")
    if data["baseline"] not in data["arms"]:
        raise SummaryShapeError(f"{source}: not a capshim summary: at $.baseline: {data['baseline']!r} "
                                f"is not one of the arms ({', '.join(data['arms'])})")
    return data


def load(path: str | Path) -> dict:
    """Read and validate a summary.json file (at most :data:`MAX_BYTES`).

    Raises:
        SummaryShapeError: unreadable, too large, invalid JSON or the wrong shape; names the file.
    """
    f = Path(path)
    try:
        size = f.stat().st_size
        if size > MAX_BYTES:
            raise SummaryShapeError(f"{f}: {size} bytes, more than a summary can be ({MAX_BYTES})")
        text = f.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SummaryShapeError(f"{f}: cannot read summary: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise SummaryShapeError(f"{f}: invalid JSON: {exc}") from None
    return validate(data, str(f))
