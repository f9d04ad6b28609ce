"""The llama-bench reader against hostile output: linear work, depth and size limits, exit 2 naming the file."""

from __future__ import annotations

import json

import pytest

from capshim.bench import llamabench

ROW = '[{"n_prompt":512,"n_gen":0,"samples_ts":[100]}]'


def _decoded_chars(monkeypatch):
    seen = {"chars": 0, "calls": 0}
    real = json.loads

    def counting(s, *a, **k):
        seen["chars"] += len(s)
        seen["calls"] += 1
        return real(s, *a, **k)

    monkeypatch.setattr(llamabench.json, "loads", counting)
    return seen


@pytest.mark.parametrize("junk", ["[", "{", "[ not json", "{ nope", "[[[[", "{\"a\": [", "[1, 2"])
def test_200k_junk_lines_cost_linear_work(monkeypatch, junk):
    """Before: each junk line made the decoder read to the end of the text (40k lines took 21 s)."""
    text = "\n".join([junk] * 200_000 + [ROW])
    seen = _decoded_chars(monkeypatch)
    rows = llamabench.parse_output(text, "w.out")
    assert [r["test"] for r in rows] == ["pp512"]
    assert seen["chars"] <= llamabench.MAX_DEPTH * len(text)


def test_deep_nesting_is_not_a_recursion_error():
    text = "[" * 100_000 + "]" * 100_000 + "\n" + ROW
    assert llamabench.parse_output(text, "w.out")[0]["samples_ts"] == [100.0]
    with pytest.raises(llamabench.LlamaBenchError, match="w.out: line 1: .*nested deeper"):
        llamabench.parse_output("{" * 100_000, "w.out")


def test_pretty_printed_array_with_junk_lines_inside():
    text = "[\n  {\"n_prompt\": 512,\n   \"n_gen\": 0,\n   \"samples_ts\": [1, 2]\n  },\nggml junk [\n" \
           "  {\"n_prompt\": 0, \"n_gen\": 128, \"samples_ts\": [3]}\n]\n"
    assert [r["test"] for r in llamabench.parse_output(text, "x")] == ["pp512", "tg128"]


def test_strings_with_brackets_and_escaped_quotes():
    row = {"n_prompt": 512, "n_gen": 0, "samples_ts": [5], "model_type": 'q"]}[{', "gpu_info": "\\"}
    text = "[\n" + json.dumps(row, indent=1) + "\n]\n"
    assert llamabench.parse_output(text, "x")[0]["model_type"] == 'q"]}[{'


def test_too_large_output_is_refused():
    with pytest.raises(llamabench.LlamaBenchError, match="at most"):
        llamabench.parse_output(" " * (llamabench.MAX_OUTPUT_BYTES + 1), "big.out")


def test_load_file_refuses_devices_and_fifos(tmp_path):
    import os

    os.mkfifo(tmp_path / "f")
    for p in ("/dev/zero", tmp_path / "f", tmp_path):
        with pytest.raises(llamabench.LlamaBenchError, match="cannot read"):
            llamabench.load_file(p)


@pytest.mark.parametrize("row, where", [
    ('{"n_prompt": "512", "n_gen": 0, "samples_ts": [1]}', "'n_prompt'"),
    ('{"n_prompt": 512, "n_gen": 0, "samples_ts": {"a": 1}}', "'samples_ts'"),
    ('{"n_prompt": 512, "n_gen": 0, "samples_ts": ["x"]}', "samples_ts[0]"),
    ('{"n_prompt": 512, "n_gen": 0, "samples_ts": [nan]}', "samples_ts[0]"),
    ('{"n_prompt": 512, "n_gen": 0, "samples_ts": [-1]}', "samples_ts[0]"),
    ('{"n_prompt": 512, "n_gen": true, "samples_ts": [1]}', "'n_gen'"),
    ('{"n_prompt": 512, "n_gen": 0, "n_depth": -1, "samples_ts": [1]}', "'n_depth'"),
])
def test_wrong_shapes_name_the_file_row_and_key(row, where):
    with pytest.raises(llamabench.LlamaBenchError) as info:
        llamabench.parse_output(row, "host.json")
    assert str(info.value).startswith("host.json: row 0") and where in str(info.value)


@pytest.mark.parametrize("key", ["n_prompt", "n_gen", "n_depth"])
def test_a_401_digit_token_count_is_refused_naming_row_and_key(key):
    """Hostile pass: a 401-digit n_prompt became a test named pp999...9."""
    row = {"n_prompt": 512, "n_gen": 0, "n_depth": 0, "samples_ts": [100.0]}
    row[key] = 10 ** 400
    text = "[" + json.dumps(row) + "]"
    with pytest.raises(llamabench.LlamaBenchError, match=f"row 0: key '{key}'.*outside"):
        llamabench.parse_output(text, "f.json")
