"""What `capshim probe` prints of a CUDA device: the stand-in named as one, NVML's answers in the
runtime's notation and named architectures, and the shim's count said apart from the rows shown."""

from __future__ import annotations

import io

from rich.console import Console

from capshim import probe
from capshim.backends import cuda


def _probe(name: str, standin: bool, cc: int, arch: int, reason: str) -> dict:
    dev = {"index": 0, "name": name, "driver": "CUDA driver 13.0", "apiVersion": "CUDA runtime 13.0"}
    if standin:
        dev["standin"] = "capshim stand-in runtime /x/libcudart.so.13"
    return {"device": dev, "capabilities": {"computeCapability": cc},
            "nvml": {"answers": {"computeCapability": cc, "architecture": arch}},
            "shim": {"cuda": {"state": "active", "reason": reason}}}


def _printed(out: dict, compare: bool, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "200")
    buf = io.StringIO()
    probe.print_probe(out, compare=compare, console=Console(file=buf, width=200))
    return buf.getvalue()


def test_a_standin_is_named_as_one_and_nvml_reads_as_the_runtime(monkeypatch, capsys):
    stock = _probe("NVIDIA H200", True, 90, 9, "")
    shimmed = _probe("NVIDIA H200", True, 75, 6, "the shim recorded 5 changed answer(s), one per query")
    text = _printed(stock, False, monkeypatch)
    assert text.startswith("NVIDIA H200 (capshim stand-in) (CUDA driver 13.0)"), text
    out = {"stock": stock, "shimmed": shimmed,
           "differences": {"computeCapability": [90, 75], "NVML computeCapability": [90, 75],
                           "NVML architecture": [9, 6]}}
    text = _printed(out, True, monkeypatch) + capsys.readouterr().out
    assert text.startswith("NVIDIA H200 (capshim stand-in) (CUDA driver 13.0)"), text
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in text.splitlines() if line.startswith("│")}
    assert rows["computeCapability"] == rows["NVML computeCapability"] == ["9.0", "7.5"]
    assert rows["NVML architecture"] == ["Hopper (9)", "Turing (6)"]
    # three rows shown, the shim's own count (per query) said as such
    assert "cuda: active (3 answer(s) above differ; the shim recorded 5 changed answer(s)" in text
    real = _printed(_probe("NVIDIA H100", False, 90, 9, ""), False, monkeypatch)
    assert real.startswith("NVIDIA H100 (CUDA driver 13.0)")


def test_nvml_architectures_are_nvml_h_values():
    assert [cuda.NVML_ARCHITECTURES[v] for v in (2, 6, 9, 10)] == ["Kepler", "Turing", "Hopper", "Blackwell"]
    assert cuda.nvml_answer_text("architecture", 0xFFFFFFFF) == str(0xFFFFFFFF)  # NVML_DEVICE_ARCH_UNKNOWN
    assert cuda.nvml_answer_text("memorySizeMB", 16384) == "16384"
