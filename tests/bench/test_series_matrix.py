"""Every field that varies separates series (issue 20, Deliver 1), on a generated matrix.

The rows are llama-bench rows with every field of llama-bench's ``test::get_fields``
(:data:`capshim.bench.llamabench.LLAMA_BENCH_FIELDS`, quoted from llama.cpp at
0104b151c56d); hypothesis picks which configuration fields a sweep varies, and
itertools.product makes one row per combination, as llama-bench does. Nothing here
is a hand-picked list of fields: every configuration field is drawn.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capshim.bench import analysis, llamabench
from tests._report_paths import FIXTURES

#: A real row of our own llama-bench build (tests/fixtures/llama-bench/README.md).
TEMPLATE = json.loads((FIXTURES / "llama-bench" / "cpu-tiny.json").read_text())[0]


def _base() -> dict:
    row = dict(TEMPLATE)
    for f in llamabench.LLAMA_BENCH_FIELDS:  # every field of get_fields, whatever our build printed
        row.setdefault(f, 0 if f not in ("load_mode",) else "auto")
    row["n_gen"], row["n_depth"] = 0, 0
    return row


BASE = _base()
CONFIG = [f for f in llamabench.LLAMA_BENCH_FIELDS if llamabench.config_field(f)]
ENVIRONMENT = [f for f in llamabench.LLAMA_BENCH_FIELDS if f in llamabench.ENVIRONMENT_FIELDS]


def _other(field: str, value):
    """A second value of the field's own type, different from ``value`` also as text."""
    if field == "model_filename":
        return "/models/other-model.gguf"
    if field in ("n_prompt",):
        return value * 2 or 128
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 0.5
    return f"{value}-x"


def _rows(varied: list[str], samples=(10.0, 11.0)) -> list[dict]:
    """One row per combination of the varied fields (llama-bench's sweep order)."""
    out = []
    for combo in itertools.product(*[(BASE[f], _other(f, BASE[f])) for f in varied]):
        row = {**BASE, **dict(zip(varied, combo)), "samples_ts": list(samples)}
        out.append(row)
    return llamabench.parse_output(json.dumps(out), "matrix")


def _records(rows, arm: str, run: int) -> list[dict]:
    return llamabench.to_records(rows, arm, run)


fields = st.lists(st.sampled_from(CONFIG), min_size=1, max_size=4, unique=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields)
def test_every_varied_field_separates_series(varied):
    rows = _rows(varied)
    recs = _records(rows, "a", 1)
    by_series: dict[str, set[str]] = {}
    for r in recs:
        by_series.setdefault(r["test"], set()).add(json.dumps(r["config"], sort_keys=True))
    configs = {json.dumps(llamabench.row_config(r), sort_keys=True) for r in rows}
    assert all(len(v) == 1 for v in by_series.values()), "a series pools configurations"
    assert len(by_series) == len(configs) == 2 ** len(varied)
    # two arms running the same sweep: same series names, nothing refused
    summary = analysis.analyze(recs + _records(rows, "b", 1), {"a": {}, "b": {}}, "a")
    assert set(summary["arms"]["b"]["tests"]) == set(by_series)
    assert not any(st_["mismatch"] for st_ in summary["arms"]["b"]["tests"].values())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields, st.sampled_from(CONFIG), st.sampled_from(["same arm", "other arm", "host"]))
def test_a_field_that_differs_between_files_is_refused_by_name(varied, changed, where):
    rows = _rows(varied)
    changed_rows = llamabench.parse_output(json.dumps(
        [{**r, changed: _other(changed, r[changed])} for r in rows]), "changed")
    if changed in ("n_prompt", "n_gen", "n_depth"):
        return  # these change the test's name itself: a different test, never pooled
    recs = _records(rows, "a", 1)
    arms = {"a": {}, "b": {}}
    host = None
    if where == "same arm":
        recs += _records(changed_rows, "a", 2) + _records(rows, "b", 1)
    elif where == "other arm":
        recs += _records(changed_rows, "b", 1)
    else:
        recs += _records(rows, "b", 1)
        host_recs = _records(changed_rows, "host", 1)
        host = {"name": "host", "tests": {r["test"]: [[r["tok_s"]]] for r in host_recs},
                "configs": {r["test"]: r["config"] for r in host_recs}}
    pooled = {}
    for r in recs + [{"test": t, "config": c} for t, c in ((host or {}).get("configs") or {}).items()]:
        pooled.setdefault(r["test"], set()).add(json.dumps(r["config"], sort_keys=True))
    if all(len(v) == 1 for v in pooled.values()):
        # the changed value made its own series (a varied field took a value of its own): never pooled
        assert changed in varied
        analysis.analyze(recs, arms, "a", host)
        return
    with pytest.raises(analysis.ComparabilityError, match=rf"differ in {changed}:"):
        analysis.analyze(recs, arms, "a", host)
    marked = analysis.analyze(recs, arms, "a", host, allow_mismatch=True)
    flagged = {m["field"] for arm in marked["arms"].values() for t in arm["tests"].values()
               for m in t["mismatch"]}
    assert changed in flagged


@settings(max_examples=30, deadline=None)
@given(fields, st.sampled_from(ENVIRONMENT))
def test_build_and_machine_fields_are_no_series_key(varied, env_field):
    """gpu_info, backends, build_commit ...: a host and a guest differ there by design."""
    rows = _rows(varied)
    host_rows = llamabench.parse_output(json.dumps([{**r, env_field: "elsewhere"} for r in rows]), "host")
    host_recs = _records(host_rows, "host", 1)
    host = {"name": "host", "tests": {r["test"]: [[r["tok_s"]]] for r in host_recs},
            "configs": {r["test"]: r["config"] for r in host_recs}}
    summary = analysis.analyze(_records(rows, "a", 1), {"a": {}}, "a", host)
    assert all(t["pct_of_host"] is not None for t in summary["arms"]["a"]["tests"].values())


def test_model_sweep_is_named_by_file_and_folders_do_not_count():
    a = {**BASE, "model_filename": "/guest/models/a.gguf"}
    b = {**BASE, "model_filename": "/guest/models/b.gguf", "model_type": "llama 8B Q4_0", "model_size": 9}
    names = llamabench.series_names(llamabench.parse_output(json.dumps(
        [{**a, "samples_ts": [1.0]}, {**b, "samples_ts": [1.0]}]), "s"))
    assert names == ["pp64 m=a.gguf", "pp64 m=b.gguf"]
    assert llamabench.row_config({**a, "model_filename": "C:\\host\\a.gguf"})["model_filename"] == "a.gguf"


def test_a_field_of_a_newer_build_is_a_key_too():
    """A field capshim has never heard of (a future llama-bench column) still separates series."""
    rows = llamabench.parse_output(json.dumps([{**BASE, "new_knob": 1, "samples_ts": [1.0]},
                                               {**BASE, "new_knob": 2, "samples_ts": [1.0]}]), "s")
    assert llamabench.series_names(rows) == ["pp64 new_knob=1", "pp64 new_knob=2"]
