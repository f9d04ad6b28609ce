"""The one verdict rule (capshim.contracts.verdict): table-driven, boundaries included (issue 28)."""

from __future__ import annotations

import pytest

from capshim.contracts import verdict as v
from capshim.contracts.numbers import AA_BAND_PCT, DEFAULT_THRESHOLD, MIN_PROCESSES


def S(n, dirty=0, label=""):
    return v.Side(n, dirty, None, label)


CASES = [
    # (value, ci95, side A, side B, threshold, expected str)
    (2.319, [2.1, 2.5], S(2), S(2), 2.0, "unclear (2 processes a side; need 5)"),
    (1.30, [1.2, 1.4], S(4), S(9), 2.0, "unclear (4 and 9 processes; need 5 a side)"),
    (1.30, [1.2, 1.4], S(5), S(5), 2.0, "improvement"),
    (0.70, [0.6, 0.8], S(5), S(5), 2.0, "regression"),
    (1.30, [1.2, 1.4], S(5, 3, "A"), S(5), 2.0, "unclear (A mostly contaminated (3 of 5 runs))"),
    (1.30, [1.2, 1.4], S(6, 3, "A"), S(5), 2.0, "improvement"),  # half is not "mostly"
    (1.30, [1.2, 1.4], S(5, 5), S(7, 4), 2.0, "unclear (both sides mostly contaminated)"),
    (1.01, [0.97, 1.06], S(8), S(8), 2.0, "unclear (interval crosses 1.00x)"),
    (1.04, [1.01, 1.07], S(8), S(8), 2.0, "unclear (interval crosses 1.02x)"),
    (0.96, [0.93, 0.99], S(8), S(8), 2.0, "unclear (interval crosses 0.98x)"),
    (1.00, [0.99, 1.01], S(8), S(8), 2.0, "same"),
    (1.00, [0.98, 1.02], S(8), S(8), 2.0, "same"),  # the band's edges belong to it
    (1.021, [1.0201, 1.03], S(8), S(8), 2.0, "improvement"),
    (1.00, [0.99, 1.01], S(8), S(8), 0.0, "unclear (interval crosses 1.00x)"),
    (1.00, None, S(8), S(8), 2.0, "unclear (no interval)"),
    (None, None, S(8), S(8), 2.0, "unclear (no ratio)"),
]


@pytest.mark.parametrize("value,ci,a,b,t,want", CASES)
def test_rule(value, ci, a, b, t, want):
    got = v.decide(value, ci, a, b, t)
    assert str(got) == want
    assert got.directed == (got.word in ("improvement", "regression"))


def test_boundary_four_vs_five_processes():
    ci = [1.5, 1.6]
    assert str(v.decide(1.55, ci, S(MIN_PROCESSES - 1), S(MIN_PROCESSES))) == "unclear (4 and 5 processes; need 5 a side)"
    assert v.decide(1.55, ci, S(MIN_PROCESSES), S(MIN_PROCESSES)).word == "improvement"


def test_percent_of_host():
    assert v.decide(90.0, [85.0, 94.0], S(6), S(6), percent=True).word == "regression"
    assert str(v.decide(99.0, [96.0, 101.0], S(6), S(6), percent=True)) == "unclear (interval crosses 100%)"
    assert v.decide(100.0, [99.0, 101.5], S(6), S(6), percent=True).word == "same"


def test_decide_cmp_reads_the_summary_shape():
    runs = [{"run": i, "contaminated": ["load 3.1 > 2 cores"] if i < 4 else []} for i in range(6)]
    cmp = {"value": 1.5, "ci95": [1.4, 1.6], "level": "process", "processes": [6, 6]}
    assert v.decide_cmp(cmp).word == "improvement"
    assert str(v.decide_cmp(cmp, runs_a=runs, labels=("native", "vm"))) == \
        "unclear (native mostly contaminated (4 of 6 runs))"
    # excluded runs count in neither the contaminated nor the kept runs
    dropped = [{**r, "excluded": bool(r["contaminated"])} for r in runs]
    assert v.decide_cmp(cmp, runs_a=dropped).word == "improvement"
    rng = {"value": 2.319, "ci95": None, "range": [1.9, 2.8], "level": "range", "processes": [2, 2]}
    assert str(v.decide_cmp(rng)) == "unclear (2 processes a side; need 5)"
    assert str(v.decide_cmp({"value": 1.5, "ci95": [1.4, 1.6]})) == "unclear (processes not recorded)"


HARNESS = [
    ({"value": 1.42, "ci95": None, "range": [0.81, 2.19]}, False, "range 0.81-2.19x leaves +-5%"),
    ({"value": 1.08, "ci95": [1.06, 1.10]}, False, "interval 1.06-1.10x excludes 1.00x"),
    ({"value": 1.01, "ci95": [0.94, 1.03]}, False, "interval 0.94-1.03x leaves +-5%"),
    ({"value": 1.01, "ci95": [0.96, 1.04]}, True, ""),
    ({"value": 1.00, "ci95": [0.95, 1.05]}, True, ""),  # the band's edges belong to it
]


@pytest.mark.parametrize("cmp,reliable,why", HARNESS)
def test_harness_check(cmp, reliable, why):
    h = v.harness_check(cmp)
    assert (h.reliable, h.why) == (reliable, why)
    text = h.text("A/A aa pp512")
    assert (text == "") == reliable
    if not reliable:
        assert text.startswith("the harness is unreliable here: A/A aa pp512 ")


def test_harness_check_without_bounds():
    assert v.harness_check({"value": 1.0, "ci95": None}) is None
    assert v.harness_check(None) is None


def test_the_numbers_are_defined_once():
    from capshim.bench import stats
    from capshim.db import terms
    assert stats.MIN_PROCESSES is MIN_PROCESSES and terms.DEFAULT_THRESHOLD is DEFAULT_THRESHOLD
    assert AA_BAND_PCT == 5.0


def test_a_standin_is_named_as_one_and_never_as_the_device_it_imitates(tmp_path, monkeypatch):
    from capshim.backends import cuda
    from capshim.contracts.names import STANDIN_SUFFIX, device_label

    fake = tmp_path / "libcudart.so.13"
    fake.write_bytes(b"\x7fELF..." + cuda.STANDIN_MARK + b"RUNTIME_VERSION\x00")
    real = tmp_path / "real" / "libcudart.so.13"
    real.parent.mkdir()
    real.write_bytes(b"\x7fELF... cudaRuntimeGetVersion\x00")
    assert cuda.is_standin(str(fake)) and not cuda.is_standin(str(real))
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{tmp_path / 'none'}:{tmp_path}")
    assert cuda.is_standin("libcudart.so.13")  # a soname: found where the dynamic linker looks
    assert not cuda.is_standin(str(tmp_path / "missing.so")) and not cuda.is_standin(None)
    assert device_label({"name": "NVIDIA H200", "standin": "capshim stand-in runtime X"}) == \
        "NVIDIA H200" + STANDIN_SUFFIX
    assert device_label({"name": "NVIDIA H200"}) == "NVIDIA H200"
    lavapipe = "llvmpipe (LLVM 15.0.6, 256 bits)"  # a real CPU device, not a stand-in
    assert device_label({"name": lavapipe, "type": "cpu"}) == lavapipe and device_label(None) is None
