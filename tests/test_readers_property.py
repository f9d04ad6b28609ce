"""Property-based tests (hypothesis) over the Python readers: whatever the bytes, a reader returns a
value or raises its own error naming the source; never another exception, never unbounded work."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capshim import evidence, jsonread, report, status
from capshim.bench import attest, llamabench

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(
        st.sampled_from(["n_prompt", "n_gen", "n_depth", "samples_ts", "avg_ts", "build_commit", "x"]) | st.text(
            max_size=8), kids, max_size=6),
    max_leaves=30)
line_soup = st.lists(st.sampled_from(["[", "{", "]", "}", '"', "\\", ",", ":", "1e308", "nan", "-inf", "\n",
                                      " ", '"samples_ts"', '"n_prompt":512', "\ufeff", "[{", "}]", "null"]),
                     max_size=80).map("".join)


@SETTINGS
@given(st.one_of(line_soup, st.text(max_size=300), json_values.map(lambda v: json.dumps(v))))
def test_llamabench_parser_total(text):
    try:
        rows = llamabench.parse_output(text, "fuzz.out")
    except llamabench.LlamaBenchError as exc:
        assert str(exc).startswith("fuzz.out")
        return
    for r in rows:  # whatever it accepts has the shape the analysis relies on
        assert isinstance(r["n_prompt"], int) and isinstance(r["n_gen"], int) and r["test"]
        assert r["samples_ts"] and all(isinstance(v, float) and 0 < v < float("inf") for v in r["samples_ts"])


@SETTINGS
@given(st.lists(st.dictionaries(st.sampled_from(["n_prompt", "n_gen", "samples_ts", "n_depth"]), json_values,
                                max_size=4), min_size=1, max_size=3))
def test_llamabench_rows_shape(rows):
    try:
        out = llamabench.parse_output(json.dumps(rows), "rows.json")
    except llamabench.LlamaBenchError as exc:
        assert str(exc).startswith("rows.json")
    else:
        assert len(out) <= len(rows)


@SETTINGS
@given(st.binary(max_size=2000))
def test_status_reader_total(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("s") / "status.jsonl"
    f.write_bytes(data)
    rep = status.read(f)
    assert all(isinstance(e, dict) for e in rep.events)
    for name in ("VK_LAYER_CAPSHIM_app", "metal"):
        assert status.classify(rep, name).state in ("active", "inert", "invalid")


@SETTINGS
@given(st.one_of(json_values.map(lambda v: json.dumps(v).encode()), st.binary(max_size=300)))
def test_metadata_reader_total(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("b")
    (d / "metadata.json").write_bytes(data)
    try:
        meta = jsonread.load_metadata(d)
    except jsonread.JsonShapeError as exc:
        assert "metadata.json" in str(exc)
    else:
        assert isinstance(meta, dict) and isinstance(meta["host"], dict)


@SETTINGS
@given(st.text(max_size=2000))
def test_attest_parser_total(text):
    assert isinstance(attest.parse_path(text), dict)


@SETTINGS
@given(st.binary(max_size=500))
def test_sums_reader_total(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("v")
    (d / "SHA256SUMS").write_bytes(data)
    problems = evidence.verify(d)
    assert all(isinstance(p, str) for p in problems)


@pytest.mark.parametrize("doc, where", [
    ({"bundle_format": "capshim-evidence/1", "host": []}, "$.host"),
    ({"bundle_format": "x", "host": {}}, "$.bundle_format"),
    ({"bundle_format": "capshim-evidence/1", "host": {"cpu_count": "x"}}, "$.host.cpu_count"),
    ({"bundle_format": "capshim-evidence/1", "host": {}, "workload": {"model_sha256": '{"sha256":'}},
     "$.workload.model_sha256"),
    ({"bundle_format": "capshim-evidence/1", "host": {}, "method": {"timeout_s": -1}}, "$.method.timeout_s"),
    ([1, 2], "$"),
])
def test_metadata_wrong_shape_names_file_and_path(tmp_path, doc, where):
    (tmp_path / "metadata.json").write_text(json.dumps(doc))
    with pytest.raises(jsonread.JsonShapeError) as info:
        jsonread.load_metadata(tmp_path)
    assert f"metadata.json: {where}" in str(info.value)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("data, what", [
    (b'{"a": NaN}', "NaN is not JSON"), (b"[" * 100_000, "nested deeper"), (b"\xff\xfe", "not UTF-8"),
    (b"[" * 70 + b"]" * 70, "nested deeper than 64"),
])
def test_json_reader_limits(tmp_path, data, what):
    f = tmp_path / "x.json"
    f.write_bytes(data)
    with pytest.raises(jsonread.JsonShapeError, match=what):
        jsonread.load(f)


def test_json_reader_refuses_devices():
    with pytest.raises(jsonread.JsonShapeError, match="/dev/zero: cannot read: not a regular file"):
        jsonread.load("/dev/zero")


def test_verify_reports_a_metadata_of_the_wrong_shape(tmp_path):
    b = evidence.Bundle.create(tmp_path / "b", metadata={})
    b.metadata["host"] = "not an object"
    b.finalize(report.bundle_steps([], {"a": {"state": "native"}}, "a"))
    assert evidence.verify(b.root) == ["metadata.json: $.host: 'not an object' is not of type 'object'"]


@pytest.mark.slow
@pytest.mark.parametrize("host, says", [
    ('{"arms":{"a":{}},"baseline":"a"}', "no llama-bench rows found"),
    ('[{"n_prompt":512,"n_gen":0,"samples_ts":["x"]}]', "row 0: samples_ts[0]"),
    ('[{"n_prompt":512,"n_gen":0}]', "row 0: key 'samples_ts' is missing"),
    ("/dev/zero", "not a regular file"),
])
def test_report_host_file_of_the_wrong_shape_is_exit_2(tmp_path, host, says):
    from tests.conftest import run_capshim

    ok = tmp_path / "ok.json"
    ok.write_text('[{"n_prompt":512,"n_gen":0,"samples_ts":[100]}]')
    if not host.startswith("/"):
        (tmp_path / "host.json").write_text(host)
        host = str(tmp_path / "host.json")
    r = run_capshim("report", "--arm", f"a={ok}", "--host", host)
    assert r.returncode == 2 and f"{host}: " in r.stderr and says in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("text, where, says", [
    ('{"samples_ts": [1, ' + "9" * 401 + "]}", "$.samples_ts[1]", "an integer of 401 digits (more than 20)"),
    ('[{"n": -' + "1" * 21 + "}]", "$[0].n", "an integer of 21 digits"),
    ('{"a": {"b": [1e400]}}', "$.a.b[0]", "1e400 does not fit a 64-bit float"),
])
def test_json_reader_refuses_numbers_that_are_no_measurement(tmp_path, text, where, says):
    """issue 18: a 401-digit integer (or a float that overflows) is refused naming the file and the JSON path."""
    f = tmp_path / "x.json"
    f.write_text(text)
    with pytest.raises(jsonread.JsonShapeError) as info:
        jsonread.load(f)
    assert str(info.value).startswith(f"{f}: {where}: {says}")
    assert info.value.exit_code == 2


def test_json_reader_takes_20_digit_integers_and_brackets_in_strings():
    assert jsonread.loads('{"max": 18446744073709551615, "s": "' + "[" * 500 + '"}', "x") == {
        "max": 18446744073709551615, "s": "[" * 500}


@pytest.mark.parametrize("line", [b"[" * 100_000, b'{"pid": ' + b"7" * 401 + b"}", b'{"x": NaN}'])
def test_status_reader_counts_refused_lines_as_bad(tmp_path, line):
    f = tmp_path / "status.jsonl"
    f.write_bytes(b'{"event": "loaded"}\n' + line + b"\n")
    rep = status.read(f)
    assert rep.events == [{"event": "loaded"}] and rep.bad_lines == [2]
