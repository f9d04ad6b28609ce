"""llama-bench output parser: real output (the seed's and our own build's) and mangled variants."""

from __future__ import annotations

import json
import statistics

import pytest

from tests._report_paths import FIXTURES
from capshim.bench import llamabench
from capshim.bench.llamabench import LlamaBenchError, parse_output

CUA = FIXTURES / "cua"
OWN = FIXTURES / "llama-bench"


def _row(**kw):
    row = {"build_commit": "abc", "n_prompt": 512, "n_gen": 0, "n_depth": 0,
           "avg_ts": 999.0, "samples_ts": [10.0, 20.0, 30.0], "samples_ns": [1, 2, 3]}
    row.update(kw)
    return row


def test_seed_json_rows_use_samples_not_avg():
    rows = llamabench.load_file(CUA / "tiny-stock-minimal.json")
    assert [r["test"] for r in rows] == ["pp512", "tg128"]
    pp = rows[0]
    assert len(pp["samples_ts"]) == 10
    assert round(statistics.median(pp["samples_ts"]), 2) == 431.86
    assert pp["avg_ts"] == pytest.approx(431.322577)  # kept, but not what we use
    assert rows[1]["samples_ts"][-1] == pytest.approx(8.63801)


def test_json_with_bom_init_lines_and_blanks():
    text = (CUA / "tiny-safe-shim-10x-final.json").read_text()
    noisy = ("\ufeffggml_metal_device_init: GPU name:   MTL0\nload_backend: loaded CPU backend\n\n"
             + text + "\n\nsome trailing line\n")
    assert parse_output(noisy, "noisy") == llamabench.load_file(CUA / "tiny-safe-shim-10x-final.json")


def test_jsonl_with_junk_between_lines():
    rows = [_row(), _row(n_prompt=0, n_gen=128, samples_ts=[5.0, 6.0])]
    text = "\ufeff" + "init: starting\n" + json.dumps(rows[0]) + "\nwarn: x\n\n" + json.dumps(rows[1]) + "\n"
    got = parse_output(text, "x.jsonl")
    assert [r["test"] for r in got] == ["pp512", "tg128"]
    assert got[1]["samples_ts"] == [5.0, 6.0]


def test_junk_line_inside_json_array_recovers_rows():
    a, b = json.dumps(_row(), indent=2), json.dumps(_row(n_gen=16, n_prompt=0), indent=2)
    text = "[\n" + a + ",\nggml_backend: a line printed mid-array\n" + b + "\n]\n"
    assert [r["test"] for r in parse_output(text, "mixed")] == ["pp512", "tg16"]


@pytest.mark.parametrize("p,g,d,name", [(512, 0, 0, "pp512"), (0, 128, 0, "tg128"),
                                        (512, 128, 0, "pp512+tg128"), (512, 0, 512, "pp512 @ d512"),
                                        (0, 32, 4096, "tg32 @ d4096")])
def test_test_names(p, g, d, name):
    assert llamabench.test_name(p, g, d) == name
    assert parse_output(json.dumps([_row(n_prompt=p, n_gen=g, n_depth=d)]), "s")[0]["test"] == name


def test_old_rows_without_n_depth_and_c_nan():
    row = json.dumps(_row()).replace('"n_depth": 0, ', "").replace('"avg_ts": 999.0', '"stddev_ts": -nan')
    got = parse_output(row + "\n", "old")
    assert got[0]["test"] == "pp512"


def test_cut_off_output_names_source_and_line():
    text = (CUA / "tiny-stock-minimal.json").read_text()
    cut = text[: text.index('"samples_ts"', text.index("n_gen\": 128"))]
    with pytest.raises(LlamaBenchError, match=r"cut\.json: line \d+: malformed or cut-off llama-bench row"):
        parse_output(cut, "cut.json")


def test_missing_samples_names_key():
    row = _row()
    del row["samples_ts"]
    with pytest.raises(LlamaBenchError, match=r"f\.json: row 0: key 'samples_ts' is missing.*never uses avg_ts"):
        parse_output(json.dumps([row]), "f.json")


@pytest.mark.parametrize("bad,msg", [([], "non-empty list"), ([1.0, "x"], r"samples_ts\[1\]"),
                                     ([1.0, 0], r"samples_ts\[1\].*> 0")])
def test_bad_samples(bad, msg):
    with pytest.raises(LlamaBenchError, match=msg):
        parse_output(json.dumps([_row(samples_ts=bad)]), "f.json")


def test_no_rows():
    with pytest.raises(LlamaBenchError, match=r"out\.txt: no llama-bench rows found"):
        parse_output("| model | size |\n|---|---|\n", "out.txt")
    with pytest.raises(LlamaBenchError, match="no llama-bench rows"):
        parse_output('{"not": "a row"}\n', "out.txt")


def test_missing_file_named(tmp_path):
    with pytest.raises(LlamaBenchError, match=r"nope\.json: cannot read"):
        llamabench.load_file(tmp_path / "nope.json")


def test_to_records_and_sweep_series():
    rows = parse_output(json.dumps([_row(), _row(n_prompt=0, n_gen=8, samples_ts=[1.5])]), "s")
    recs = llamabench.to_records(rows, "stock", 3)
    assert {k: v for k, v in recs[0].items() if k not in ("config", "device_info")} == {
        "arm": "stock", "run": 3, "sample": 1, "test": "pp512", "tok_s": 10.0}
    # the configuration is every field but the measurements and the build (issue 20)
    assert recs[0]["config"]["n_prompt"] == 512 and "build_commit" not in recs[0]["config"]
    assert recs[0]["device_info"] == {"build_commit": "abc"} and "samples_ts" not in recs[0]["config"]
    assert [r["sample"] for r in recs] == [1, 2, 3, 1]
    # a sweep: rows of one test that differ in settings are separate series, named by what varies
    two = parse_output(json.dumps([_row(n_threads=4, n_gpu_layers=0), _row(n_threads=8, n_gpu_layers=0),
                                   _row(n_prompt=0, n_gen=8, n_threads=4)]), "s")
    names = [r["test"] for r in llamabench.to_records(two, "a", 1)]
    assert names[:3] == ["pp512 t=4"] * 3 and names[3:6] == ["pp512 t=8"] * 3 and names[6] == "tg8"


@pytest.mark.parametrize("name", ["cpu-tiny.json", "cpu-tiny.jsonl"])
def test_own_build_fixtures(name):
    """Output captured from our own llama-bench build (tests/fixtures/llama-bench/README.md)."""
    rows = llamabench.load_file(OWN / name)
    assert [r["test"] for r in rows] == ["pp64", "tg16", "pp64+tg16",
                                         "pp64 @ d64", "tg16 @ d64", "pp64+tg16 @ d64"]
    for r in rows:
        assert len(r["samples_ts"]) == 3
        assert all(v > 0 for v in r["samples_ts"])
        assert r["backends"] == "CPU"
