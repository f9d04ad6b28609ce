"""Read ``llama-bench`` machine output (``-o json`` or ``-o jsonl``).

Source of the format: llama.cpp ``tools/llama-bench/llama-bench.cpp``
(``json_printer``, ``jsonl_printer``, and the markdown printer's ``test``
column). ``-o json`` prints one array of row objects; ``-o jsonl`` prints one
object per line. Each row holds the configuration (``n_prompt``, ``n_gen``,
``n_depth`` ...), ``avg_ts``/``stddev_ts`` and the per-repetition
``samples_ns`` and ``samples_ts`` (tokens per second). capshim always uses
``samples_ts`` (one value per repetition), never ``avg_ts``: the published
figures are medians of samples (docs/contracts.md, "Published figures").

Stdout may carry other lines (backend init lines when a library prints to
stdout, a UTF-8 byte-order mark, blank lines): every JSON value that starts at
the beginning of a line is decoded and the llama-bench rows kept.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from capshim import paths
from capshim.contracts import numbers
from capshim.errors import CapshimError, UsageError

__all__ = ["LlamaBenchError", "parse_output", "load_file", "test_name", "to_records", "row_config", "series_names",
           "config_field", "device_info", "bench_config", "config_differences", "TEST_FIELDS", "LLAMA_BENCH_FIELDS", "RESULT_FIELDS", "ENVIRONMENT_FIELDS"]


class LlamaBenchError(CapshimError):
    """llama-bench output could not be read; the message names the source and what is wrong (exit 2)."""


# C's printf writes non-finite doubles as nan/-nan/inf; JSON has no such tokens.
_NONFINITE = re.compile(r"(?<=[\[:,\s])(-?)(nan|inf)(?=[\s,\]}])", re.IGNORECASE)


def test_name(n_prompt: int, n_gen: int, n_depth: int = 0) -> str:
    """The llama-bench test name of a row.

    ``pp<n_prompt>`` when only a prompt is processed, ``tg<n_gen>`` when only
    tokens are generated, ``pp<n>+tg<m>`` when both, plus `` @ d<n_depth>`` when
    the context was pre-filled (llama-bench.cpp, markdown printer, field
    ``test``).
    """
    if n_prompt > 0 and n_gen == 0:
        name = f"pp{n_prompt}"
    elif n_gen > 0 and n_prompt == 0:
        name = f"tg{n_gen}"
    else:
        name = f"pp{n_prompt}+tg{n_gen}"
    if n_depth > 0:
        name += f" @ d{n_depth}"
    return name


_ROW_HINT = re.compile(r'"(samples_ts|n_prompt|build_commit)"')


def _is_row(value) -> bool:
    return isinstance(value, dict) and ("samples_ts" in value or "n_prompt" in value or "avg_ts" in value)


def _token_count(value, where: str) -> int:
    """A token count of a row (n_prompt, n_gen, n_depth): a whole number >= 0 of at most MAX_DIGITS digits.

    Raises:
        LlamaBenchError: naming ``where`` and the value (shortened).
    """
    try:
        return numbers.integer(value, where, lo=0, hi=10 ** numbers.MAX_DIGITS - 1)
    except UsageError as exc:
        raise LlamaBenchError(f"{exc} (a token count: a whole number >= 0)") from None


def _check_row(row: dict, index: int, source: str) -> dict:
    where = f"{source}: row {index}"
    for key in ("n_prompt", "n_gen"):
        if key not in row:
            raise LlamaBenchError(f"{where}: key '{key}' is missing (not llama-bench -o json output?)")
        _token_count(row[key], f"{where}: key '{key}'")
    depth = row.get("n_depth", 0)  # older llama-bench builds have no n_depth
    _token_count(depth, f"{where}: key 'n_depth'")
    if "samples_ts" not in row:
        raise LlamaBenchError(
            f"{where}: key 'samples_ts' is missing; capshim needs the per-repetition samples "
            "(llama-bench builds from mid-2024 on print them) and never uses avg_ts")
    samples = row["samples_ts"]
    if not isinstance(samples, list) or not samples:
        raise LlamaBenchError(f"{where}: key 'samples_ts' must be a non-empty list, got {samples!r}")
    values = []
    for i, v in enumerate(samples):
        try:  # a 401-digit integer is no measurement (and converting it to a float overflows)
            values.append(numbers.finite(v, f"{where}: samples_ts[{i}]"))
        except UsageError as exc:
            raise LlamaBenchError(f"{exc} (samples_ts must be finite numbers > 0 tok/s)") from None
        if values[-1] <= 0:
            raise LlamaBenchError(f"{where}: samples_ts[{i}] must be a finite number > 0 tok/s, got {v!r}")
    out = dict(row)
    out["samples_ts"] = values
    out["test"] = test_name(row["n_prompt"], row["n_gen"], depth)
    return out


MAX_OUTPUT_BYTES = 256 << 20
"""The most workload output capshim parses (llama-bench prints a few KiB per row)."""
MAX_DEPTH = 32
"""Deepest nesting of a JSON value that is decoded (a llama-bench row is 3 deep: array, row, samples)."""

# One token of the bracket scan: a whole JSON string (never spans a line), a lone quote
# (an unterminated string), or a bracket.
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|"|[\[\]{}]')
_CANDIDATE = re.compile(r"^[ \t\r]*([\[{])", re.MULTILINE)
_PAIR = {"]": "[", "}": "{"}


def _matching_ends(text: str, starts: set[int]) -> tuple[dict[int, int], bool]:
    """For each position in ``starts`` (an opening bracket), the position of its closing bracket.

    One pass over the text (linear): strings are skipped whole; a mismatched
    bracket or an unterminated string forgets every pending opening bracket;
    nesting deeper than :data:`MAX_DEPTH` does too. Returns the matches and
    whether the depth limit was hit.
    """
    ends: dict[int, int] = {}
    stack: list[tuple[str, int]] = []
    too_deep = False
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in "[{":
            if len(stack) >= MAX_DEPTH:
                stack.clear()
                too_deep = True
                continue
            stack.append((tok, m.start()))
        elif tok in "]}":
            if stack and stack[-1][0] == _PAIR[tok]:
                _, at = stack.pop()
                if at in starts:
                    ends[at] = m.start()
            else:
                stack.clear()
        elif tok == '"':
            stack.clear()
    return ends, too_deep


def parse_output(text: str, source: str) -> list[dict]:
    """Parse llama-bench ``-o json`` or ``-o jsonl`` output.

    Every JSON value that starts a line (after blanks) is decoded, in time
    linear in the size of the text: one bracket scan finds where each such
    value ends, and each value is decoded once (values nested more than
    :data:`MAX_DEPTH` deep are not decoded).

    Args:
        text: what llama-bench printed on stdout (str; a leading UTF-8 BOM,
            blank lines and non-JSON lines are tolerated; at most
            :data:`MAX_OUTPUT_BYTES`).
        source: the file or stream name used in error messages.

    Returns:
        One dict per llama-bench row, in output order: the row's own keys
        (``n_prompt``, ``n_gen``, ``samples_ts`` as floats in tok/s, ``samples_ns``
        in nanoseconds, ...) plus ``"test"``, the llama-bench test name
        (``pp512``, ``tg128``, ``pp512+tg128``, ``pp512 @ d512``).

    Raises:
        LlamaBenchError: no row was found, a JSON value that starts a line is
            cut off or malformed and no row inside it could be recovered, or a row
            lacks ``n_prompt``/``n_gen``/``samples_ts`` or has a bad value, or the
            text is too large. The message names ``source``, the line or row and
            the key.
    """
    if isinstance(text, bytes):  # be lenient with callers passing raw bytes
        text = text.decode("utf-8", errors="replace")
    if len(text) > MAX_OUTPUT_BYTES:
        raise LlamaBenchError(f"{source}: {len(text)} characters of output; capshim reads at most "
                              f"{MAX_OUTPUT_BYTES} (is this llama-bench output?)")
    text = text.replace("\ufeff", "")
    text = _NONFINITE.sub(lambda m: "NaN" if m.group(2).lower() == "nan" else m.group(1) + "Infinity", text)
    starts = [m.start(1) for m in _CANDIDATE.finditer(text)]
    ends, too_deep = _matching_ends(text, set(starts))
    rows: list[dict] = []
    bad: list[tuple[int, int, str]] = []  # (index in starts, offset, what is wrong)
    consumed_to = 0
    for i, at in enumerate(starts):
        if at < consumed_to:
            continue
        end = ends.get(at)
        if end is None:
            bad.append((i, at, "cut off, unbalanced or nested too deep"))
            continue
        try:
            value = json.loads(text[at:end + 1])
        except (ValueError, RecursionError) as exc:
            bad.append((i, at, getattr(exc, "msg", str(exc))))
            continue
        consumed_to = end + 1
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows.extend(v for v in value if _is_row(v))
        elif _is_row(value):
            rows.append(value)

    def lineno(at: int) -> int:
        return text.count("\n", 0, at) + 1

    # An array whose decoding failed (junk inside it, or a run cut off) has its
    # objects recovered one by one above; an object that itself fails to decode
    # and looks like a llama-bench row means a cut-off or corrupted row.
    for i, at, msg in bad:
        window_end = min(at + 4000, starts[i + 1] if i + 1 < len(starts) else len(text))
        if text[at] == "{" and _ROW_HINT.search(text, at, window_end):
            raise LlamaBenchError(f"{source}: line {lineno(at)}: malformed or cut-off llama-bench row ({msg})")
    if not rows:
        if bad:
            _, at, msg = bad[0]
            raise LlamaBenchError(f"{source}: line {lineno(at)}: malformed or cut-off JSON ({msg}); "
                                  "no complete llama-bench row found"
                                  + (f" (values nested deeper than {MAX_DEPTH} are not read)" if too_deep else ""))
        raise LlamaBenchError(f"{source}: no llama-bench rows found (expected the output of "
                              "llama-bench -o json or -o jsonl on stdout)")
    return [_check_row(r, i, source) for i, r in enumerate(rows)]


def load_file(path: str | Path) -> list[dict]:
    """Read a file of llama-bench ``-o json``/``-o jsonl`` output; see :func:`parse_output`.

    Raises:
        LlamaBenchError: the file cannot be read (names the path and the OS
            error) or its content is not llama-bench output.
    """
    p = Path(path)
    try:
        data = paths.read_limited(p, MAX_OUTPUT_BYTES)
    except OSError as exc:
        raise LlamaBenchError(f"{p}: cannot read llama-bench output: {exc.strerror or exc}") from None
    return parse_output(data.decode("utf-8", errors="replace"), str(p))


#: llama-bench's fields, as ``test::get_fields`` in llama.cpp ``tools/llama-bench/llama-bench.cpp``
#: lists them (ggml-org/llama.cpp at 0104b151c56d54143e2e3554aabe9e2b2b8dbdba); the json, jsonl,
#: csv and markdown printers all print these. Kept for the tests and the docs: the series key
#: is not this list but every field a row has (:func:`row_config`), so fields of older or newer
#: builds (``use_mmap``, ``defrag_thold``, ``lazy_mode``, ``repack`` ...) count as well.
LLAMA_BENCH_FIELDS = (
    "build_commit", "build_number", "cpu_info", "gpu_info", "backends",
    "model_filename", "model_type", "model_size", "model_n_params", "n_batch",
    "n_ubatch", "n_threads", "cpu_mask", "cpu_strict", "poll",
    "type_k", "type_v", "n_gpu_layers", "n_cpu_moe", "split_mode",
    "main_gpu", "no_kv_offload", "flash_attn", "devices", "tensor_split",
    "tensor_buft_overrides", "load_mode", "embeddings",
    "no_op_offload", "no_host", "fit_target", "fit_min_ctx",
    "n_prompt", "n_gen", "n_depth",
    "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts")
#: Fields that are one run's measurements, never configuration (llama-bench's, older builds'
#: ``avg_cycles``/``avg_ipc``/``model_ns``/``model_ts`` included; ``test`` is capshim's name).
RESULT_FIELDS = frozenset({"test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts",
                           "avg_cycles", "stddev_cycles", "avg_ipc", "stddev_ipc", "model_ns", "model_ts", "test",
                           "avg_time_ms", "stddev_time_ms", "prompt_tps", "gen_tps", "prompt_tps_stddev",
                           "gen_tps_stddev", "prompt_tps_watt", "gen_tps_watt", "power_watts", "vram_used_mb",
                           "ttft_ms"})
#: Fields that say which build ran on which machine, not how it was configured: a host baseline
#: and a guest differ in them by design. They are kept per record (``device_info``, for the path
#: attestation: :func:`capshim.bench.attest.device_state`), never series keys. The booleans
#: ``cuda``, ``vulkan``, ``metal`` ... are the backends field of llama-bench builds before 2024-10.
ENVIRONMENT_FIELDS = frozenset({"build_commit", "build_number", "cpu_info", "gpu_info", "backends", "cuda",
                                "opencl", "vulkan", "kompute", "metal", "sycl", "rpc", "gpu_blas", "blas"})
#: Short names for a sweep's series labels: llama-bench's own flag names where it has one
#: (``llama-bench --help``), else the field's name.
_SERIES_LABEL = {"model_filename": "m", "model_type": "model", "model_size": "size", "model_n_params": "params",
                 "n_batch": "b", "n_ubatch": "ub", "n_threads": "t", "n_gpu_layers": "ngl", "flash_attn": "fa",
                 "type_k": "ctk", "type_v": "ctv", "cpu_mask": "C", "cpu_strict": "cpu-strict", "n_cpu_moe": "ncmoe",
                 "split_mode": "sm", "main_gpu": "mg", "no_kv_offload": "nkvo", "devices": "dev",
                 "tensor_split": "ts", "tensor_buft_overrides": "ot", "use_mmap": "mmp", "embeddings": "embd",
                 "no_op_offload": "nopo", "no_host": "no-host", "n_depth": "d"}
#: Label order: the model first, then llama-bench's field order, then any other field by name.
_LABEL_ORDER = ("model_filename", "model_type", "model_size", "model_n_params") + LLAMA_BENCH_FIELDS


def field_rank(key: str) -> tuple[int, str]:
    """Sort key of configuration fields in messages: the model's identity (type, size, parameters,
    file), then llama-bench's own field order, then any other field by name."""
    order = ("model_type", "model_size", "model_n_params", "model_filename") + LLAMA_BENCH_FIELDS
    return (order.index(key) if key in order else len(order), key)


def config_field(key: str) -> bool:
    """Whether a row field is configuration (a series key): not a measurement, not the build or
    machine (:data:`RESULT_FIELDS`, :data:`ENVIRONMENT_FIELDS`), not capshim's own ``capshim_*``."""
    return key not in RESULT_FIELDS and key not in ENVIRONMENT_FIELDS and not key.startswith("capshim_")


def row_config(row: dict) -> dict:
    """The configuration of a row: every field it has that :func:`config_field` accepts.

    ``model_filename`` is kept as the file's name without its folder (a host and a guest keep
    the same model in different folders); the model's identity is ``model_type`` (which holds
    the quantisation), ``model_size`` (bytes) and ``model_n_params``.
    """
    out = {k: v for k, v in row.items() if config_field(k)}
    if isinstance(out.get("model_filename"), str):
        out["model_filename"] = re.split(r"[\\/]", out["model_filename"])[-1]
    return out


#: Fields that are part of the test's name (``pp512``, ``tg128``): a series key, not a setting two
#: bundles compare (:func:`bench_config`).
TEST_FIELDS = ("n_prompt", "n_gen")


def bench_config(rows: list) -> dict:
    """The configuration of a whole bench from its rows: for each :func:`row_config` field the first
    row's value that has it, the test's own fields (:data:`TEST_FIELDS`) aside. What the results
    store keeps and compares between bundles (:func:`config_differences`)."""
    out: dict = {}
    for row in rows:
        if isinstance(row, dict):
            for k, v in row_config(row).items():
                if k not in TEST_FIELDS:
                    out.setdefault(k, v)
    return out


def config_differences(a: dict, b: dict) -> list[tuple[str, object, object]]:
    """``[(field, value in a, value in b)]`` of every configuration field both sides report whose
    values differ, in :func:`field_rank` order (issue 20: the series key is every field,
    :func:`row_config`); a field one side lacks (a summary written before it was recorded, a build
    that does not print it) is not compared. The one comparison rule of the analysis and the store."""
    return [(k, a[k], b[k]) for k in sorted(a, key=field_rank) if k in b and a[k] != b[k]]


def device_info(row: dict) -> dict:
    """The row's :data:`ENVIRONMENT_FIELDS` (``gpu_info``, ``backends`` ...): what the attestation reads."""
    return {k: row[k] for k in ENVIRONMENT_FIELDS if k in row}


def _key(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def series_names(rows: list[dict]) -> list[str]:
    """One series name per row: the test name, plus the settings that tell its rows apart.

    A llama-bench sweep (``-m a.gguf,b.gguf -p 128,512 -ngl 0,99 -fa 0,1``) prints one row
    per configuration; rows of the same test whose configurations (:func:`row_config`, every
    field) differ get ``pp512 ngl=99 fa=1``-style names (llama-bench's flag names), one series
    per configuration. A field is named only when it tells rows apart that the fields before
    it (:data:`_LABEL_ORDER`) do not, so a model sweep reads ``pp512 m=b.gguf``, not the
    model's type, size and parameter count as well. The names depend only on the rows, so
    every arm running the same command gets the same names.
    """
    cfgs = [row_config(r) for r in rows]
    by_test: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_test.setdefault(row["test"], []).append(i)
    labels: dict[int, list[str]] = {i: [] for i in range(len(rows))}
    for idx in by_test.values():
        keys = sorted({k for i in idx for k in cfgs[i]},
                      key=lambda k: (_LABEL_ORDER.index(k) if k in _LABEL_ORDER else len(_LABEL_ORDER), k))
        groups = len({_key(cfgs[i]) for i in idx})

        def count(fields: list[str], idx=idx) -> int:  # a field a row lacks is not a null one
            return len({tuple(_key(cfgs[i][f]) if f in cfgs[i] else "\0" for f in fields) for i in idx})

        chosen: list[str] = []
        for k in keys:
            if count(chosen) == groups:
                break
            if count(chosen + [k]) > count(chosen):
                chosen.append(k)
        for i in idx:
            labels[i] = [f"{_SERIES_LABEL.get(k, k)}={_label_value(cfgs[i].get(k))}" for k in chosen]
    return [" ".join([row["test"], *labels[i]]) for i, row in enumerate(rows)]


def _label_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return "-" if value is None else str(value)


def to_records(rows: list[dict], arm: str, run: int) -> list[dict]:
    """Flatten parsed rows into analysis records, one per repetition.

    Rows of one configuration printed twice are pooled; rows of different
    configurations (a sweep) become separate series (:func:`series_names`).

    Returns:
        ``[{"arm": arm, "run": run, "sample": i, "test": series, "tok_s": v, "config": dict}, ...]``
        with ``sample`` counting from 1 within each series of the run, in tok/s;
        ``config`` is :func:`row_config` of the row, ``device_info`` its :func:`device_info`.
    """
    out = []
    count: dict[str, int] = {}
    for row, name in zip(rows, series_names(rows)):
        cfg, dev = row_config(row), device_info(row)
        for v in row["samples_ts"]:
            count[name] = count.get(name, 0) + 1
            out.append({"arm": arm, "run": run, "sample": count[name], "test": name, "tok_s": float(v),
                        "config": cfg, "device_info": dev})
    return out
