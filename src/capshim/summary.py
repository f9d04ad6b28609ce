"""The ``summary.json`` contract: its shape, its states, one reader, one "run failed".

Every reader of a summary (report, the results store, the studies, the
exporters, verify) goes through this module:

- :data:`SCHEMA` names the format (``"capshim-summary/1"``, the ``schema`` key).
- :data:`SUMMARY_SCHEMA` is its JSON Schema (draft 2020-12, checked with
  ``jsonschema``): the baseline arm, the arms with their state and per-test
  statistics, the comparisons, the host, each test's metric (unit, direction)
  and the control workloads' verdicts. Extra keys are allowed, so summaries
  written by earlier versions (before ``processes``/``by_process`` existed)
  still load and report.
- :data:`STATES` / :data:`NOT_SHIM_STATES`: what an arm's ``state`` may be and
  which states are never presented as shim results; each state by name
  (:data:`INERT`, ...), the groups the commands act on (:data:`STRICT_STATES`:
  ``--strict`` exit 3) and their words (:func:`arm_reason`, :func:`explain_arm`,
  :data:`STATE_WORDS`): the one place a finished arm's meaning is written.
- :func:`load` / :func:`validate`: the one reader (bounded by
  :func:`capshim.jsonread.load`); a wrong shape is a :class:`SummaryShapeError`
  (exit 2) naming the file and the path inside it (``$.arms.a.tests``), never
  a traceback.
- :func:`run_failed`: whether one run (an ``arms[NAME]["runs"][i]`` entry, or
  a run the bench just recorded) failed, and why.

This module imports only the standard library, ``jsonschema``,
:mod:`capshim.errors` and :mod:`capshim.jsonread`; the bench's analysis writes
what it describes.
"""

from __future__ import annotations

import functools
from pathlib import Path

from capshim import jsonread
from capshim.errors import CapshimError

__all__ = ["bounds", "SCHEMA", "STATES", "NOT_SHIM_STATES", "OFF_DEVICE_STATES", "SUMMARY_SCHEMA", "MAX_BYTES", "AnalysisError",
           "SummaryShapeError", "validate", "load", "run_failed", "NATIVE", "ACTIVE", "INERT", "INVALID", "FAILED",
           "WRONG_OUTPUT", "EXTERNAL", "CPU_BACKEND", "OFF_DEVICE", "NOT_ATTESTED_STATES", "STRICT_STATES",
           "STATE_WORDS", "arm_reason", "explain_arm"]

SCHEMA = "capshim-summary/1"
#: Arm states. native: no shim; active: the shim's status file says it changed
#: answers; inert/invalid: the shim loaded but changed nothing / rejected its
#: configuration; failed: runs crashed or timed out; wrong-output: output
#: differed from the baseline; external: numbers made elsewhere (``capshim
#: report --arm``), shim state not attested by capshim; cpu-backend: the workload's
#: own output says it ran on llama.cpp's CPU backend, not on the probed device;
#: off-device: its output names another device, or none where it always names one
#: (:func:`capshim.bench.attest.device_state`).
STATES = ("native", "active", "inert", "invalid", "failed", "wrong-output", "external", "cpu-backend",
          "off-device")
NATIVE, ACTIVE, INERT, INVALID, FAILED, WRONG_OUTPUT, EXTERNAL, CPU_BACKEND, OFF_DEVICE = STATES
#: States whose numbers are never presented as shim results.
NOT_SHIM_STATES = (INERT, INVALID, FAILED, WRONG_OUTPUT, CPU_BACKEND, OFF_DEVICE)
#: States of an arm that did not run on the probed device: its numbers are no result at all, and
#: no arm's speedup or % of host is computed against it.
OFF_DEVICE_STATES = (CPU_BACKEND, OFF_DEVICE)
#: A shim that loaded but changed nothing, or rejected its configuration: the shim is not attested.
NOT_ATTESTED_STATES = (INERT, INVALID)
#: The states ``--strict`` turns into exit 3 (:data:`capshim.errors.EXIT_INERT`).
STRICT_STATES = (*NOT_ATTESTED_STATES, *OFF_DEVICE_STATES)
#: What a message calls an arm in a state that is not a result (the kernel study's "not compared",
#: :func:`explain_arm`'s verdicts).
STATE_WORDS = {FAILED: "run failed", INERT: "not a shim result", INVALID: "not a shim result",
               WRONG_OUTPUT: "wrong output", CPU_BACKEND: "not a result on the probed device",
               OFF_DEVICE: "not a result on the probed device"}

#: Largest summary.json read (bytes): a bench of 100,000 processes stays far below it.
MAX_BYTES = 256 * 1024 * 1024


class AnalysisError(CapshimError):
    """Bad analysis input or a bad summary: names the file, arm, record or key at fault (exit 2)."""


class SummaryShapeError(AnalysisError):
    """A summary.json of the wrong shape (exit 2): names the file and the path inside it."""


_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_CI = {"oneOf": [{"type": "null"}, {"type": "array", "items": _NUM, "minItems": 2, "maxItems": 2}]}
_CMP = {"type": ["object", "null"], "required": ["value"],
        "properties": {"value": _NUM, "ci95": _CI, "range": _CI, "why": {"type": "string"},
                       "level": {"enum": ["process", "repetition", "range"]},
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
                                   "properties": {"ratio": _NUM, "moved": {"type": "boolean"}, "ci95": _CI}}}}}}
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


@functools.cache
def _validator():
    """The validator of :data:`SUMMARY_SCHEMA`, built on first use (importing this module does not
    import jsonschema: capshim's small commands must not pay for it)."""
    import jsonschema

    return jsonschema.Draft202012Validator(SUMMARY_SCHEMA)



def bounds(cmp: dict | None) -> tuple[float, float] | None:
    """What a comparison (``speedup``, ``pct_of_host``, an A/A test) can be told apart by: its 95%
    interval, or below 5 processes a side its range of ratios (``level: "range"``, wider); None when
    it has neither (a single sample): then nothing is told apart from noise."""
    if not isinstance(cmp, dict):
        return None
    b = cmp.get("ci95") or cmp.get("range")
    return (b[0], b[1]) if b else None

def validate(data, source: str) -> dict:
    """Check a decoded summary against :data:`SUMMARY_SCHEMA`; return it.

    Args:
        data: the decoded JSON value.
        source: how to name it in errors (the file's path).

    Raises:
        SummaryShapeError: ``"<source>: not a capshim summary: at $.arms.a: 'tests' is a required
            property"``; the baseline must name one of the arms.
    """
    import jsonschema

    err = jsonschema.exceptions.best_match(_validator().iter_errors(data))
    if err is not None:
        raise SummaryShapeError(f"{source}: not a capshim summary: at {err.json_path}: {err.message}")
    if data["baseline"] not in data["arms"]:
        raise SummaryShapeError(f"{source}: not a capshim summary: at $.baseline: {data['baseline']!r} "
                                f"is not one of the arms ({', '.join(data['arms'])})")
    return data


def load(path: str | Path) -> dict:
    """Read and validate a summary: a bundle folder (its ``summary.json``) or the file itself.

    At most :data:`MAX_BYTES` bytes of a regular file, strict UTF-8 JSON, bounded nesting
    (:func:`capshim.jsonread.load`), then :func:`validate`.

    Raises:
        SummaryShapeError: unreadable, too large, too deep, invalid JSON or the wrong shape;
            names the file.
    """
    p = Path(path)
    f = p / "summary.json" if p.is_dir() else p
    try:
        data = jsonread.load(f, limit=MAX_BYTES)
    except jsonread.JsonShapeError as exc:
        raise SummaryShapeError(str(exc)) from None
    return validate(data, str(f))


def run_failed(run) -> str | None:
    """Why one run failed, or None when it did not: the one classification of "a run failed".

    Args:
        run: a run entry of summary.json (``arms[NAME]["runs"][i]``) or of metadata.json's
            ``control_runs``: ``{"timed_out": bool, "signal": str | None, "exit_code": int | None,
            "error": str | None, ...}``; missing keys count as "did not fail" (a run of
            ``capshim report --arm`` has no exit code).

    Returns:
        ``"timed out"``, ``"killed by SIGSEGV"``, ``"exit 3"``, the run's recorded ``error``
        (it exited 0 but its output could not be read, or it never started), or None.
    """
    if not isinstance(run, dict):
        return "not a run record"
    if run.get("timed_out"):
        return "timed out"
    if run.get("signal"):
        return f"killed by {run['signal']}"
    code = run.get("exit_code")
    if code not in (0, None):
        return f"exit {code}"
    error = run.get("error")
    if error:
        return str(error)
    return None



def arm_reason(arm: dict) -> str | None:
    """Why an arm of summary.json is not a result (failed, inert, invalid, wrong-output, cpu-backend,
    off-device), short; else None.

    A failed arm: its first failed run's ``error`` (the runner's ``exit N: <the stderr line that
    says why>``, :func:`capshim.bench.runs.error_line`); which runs failed is :func:`run_failed`.
    """
    state = arm.get("state")
    runs = arm.get("runs") or []
    if state == FAILED:
        errors = [r.get("error") or why for r in runs if (why := run_failed(r))]
        why = errors[0] if errors else "no run finished"
        return why + (f" (and {len(errors) - 1} more failed run(s))" if len(errors) > 1 else "")
    if state == INERT and arm.get("reach_check"):  # the run's own output: the shim did not reach the app
        return f"the shim did not reach the application ({arm['reach_check']})"
    if state in NOT_ATTESTED_STATES:
        reasons = [f"{shim}: {s.get('reason')}" for r in runs for shim, s in (r.get("shims") or {}).items()
                   if s.get("state") == state]
        return f"the shim stayed {state} ({reasons[0] if reasons else state})"
    if state == WRONG_OUTPUT:
        return arm.get("output_check") or "generated tokens differ"
    if state in OFF_DEVICE_STATES:
        return arm.get("device_check") or "its output does not show it ran on the probed device"
    return None


def explain_arm(name: str, arm: dict) -> str:
    """One line saying why an arm is not a result (failed, inert, invalid, wrong-output, cpu-backend,
    off-device), from summary.json: ``arm NAME failed: WHY``, ``arm NAME: WHY: not a shim result``,
    ``arm NAME: WHY: not a result``, ``arm NAME is STATE: WHY: not a result on the probed device``."""
    state = arm.get("state")
    why = arm_reason(arm)
    if state == FAILED:
        return f"arm {name} failed: {why}"
    if state in NOT_ATTESTED_STATES:
        return f"arm {name}: {why}: {STATE_WORDS[state]}"
    if state == WRONG_OUTPUT:
        return f"arm {name}: {why}: not a result"
    if state in OFF_DEVICE_STATES:
        return f"arm {name} is {state}: {why}: {STATE_WORDS[state]}"
    return f"arm {name}: {state}"


# --- the path field: what llama.cpp, ncnn or PyTorch said it chose, per backend (capshim.bench.attest) ---

#: Table columns: (header, backend, key). Only columns with a value in some row are shown.
DISPLAY_COLUMNS = [
    ("GPU family", "metal", "gpu_family"),
    ("simdgroup red.", "metal", "simdgroup_reduction"),
    ("simdgroup mm", "metal", "simdgroup_mm"),
    ("bfloat", "metal", "has_bfloat"),
    ("tensor", "metal", "has_tensor"),
    ("Vulkan device", "vulkan", "device_name"),
    ("fp16", "vulkan", "fp16"),
    ("bf16", "vulkan", "bf16"),
    ("int dot", "vulkan", "int_dot"),
    ("warp size", "vulkan", "warp_size"),
    ("shared memory", "vulkan", "shared_memory"),
    ("matrix cores", "vulkan", "matrix_cores"),
    ("ncnn fp16 storage", "ncnn", "fp16_storage"),
    ("ncnn fp16 arith", "ncnn", "fp16_arithmetic"),
    ("ncnn int8 arith", "ncnn", "int8_arithmetic"),
    ("ncnn bf16 storage", "ncnn", "bf16_storage"),
    ("ncnn subgroup", "ncnn", "subgroup_size"),
    ("ncnn fp16 cm", "ncnn", "fp16_cm"),
    ("ncnn int8 cm", "ncnn", "int8_cm"),
    ("ncnn bf16 cm", "ncnn", "bf16_cm"),
    ("CUDA device", "cuda", "device_name"),
    ("capability", "cuda", "capability"),
    ("SDPA", "cuda", "sdpa_backend"),
]


def display_value(path: dict, backend: str, key: str) -> str:
    """One attested value as table text: ``Apple5 (1005)``, ``yes``/``no``, numbers, or ``""``."""
    caps = (path or {}).get(backend) or {}
    if key not in caps:
        return ""
    v = caps[key]
    if key == "gpu_family" and "gpu_family_code" in caps:
        return f"{v} ({caps['gpu_family_code']})"
    if key == "fp16" and caps.get("fp16_dot2"):
        return "yes (dot2)"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)
