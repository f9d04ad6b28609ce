"""The first run on a CPU device teaches the mechanism (issue 28): the output leads with each arm's
answers and the path llama.cpp took, says once that speed is not the claim, says a busy machine
once, and shows no speedup or % of host column (the bundle keeps them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from capshim import status
from capshim.bench import answers
from capshim.export import mechanism, terminal
from tests.conftest import REPO, run_capshim

BUNDLE = REPO / "evidence" / "lavapipe-default-fresh-clone"
FIXTURE = REPO / "tests" / "fixtures" / "llama-bench" / "cpu-tiny.json"


def _with_answers(bundle: Path) -> dict:
    """The committed bundle's summary, its runs' shim states read again from its status files (the
    bundle predates ``answered``): what the bench now writes for the same runs."""
    s = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    for name, arm in s["arms"].items():
        for run in arm["runs"]:
            rep = status.read(bundle / "status" / f"{name}-{run['run']}.jsonl")
            run["shims"] = {shim: status.classify(rep, shim).to_dict() for shim in run.get("shims") or {}}
        arm["answers"] = answers.arm_answers(arm["runs"], arm["spec"])
    return s


def test_answers_are_read_from_the_shims_records_in_the_profiles_notation():
    s = _with_answers(BUNDLE)
    assert s["arms"]["native"]["answers"] == {}
    assert s["arms"]["vm-stock"]["answers"] == {
        "maxComputeSharedMemorySize": {"stock": 32768, "answer": 24576},
        "shaderFloat16": {"stock": "true", "answer": "false"}}
    # the app role over the device role: the application saw the restored values again
    assert {k: v["answer"] for k, v in s["arms"]["vm-unlocked"]["answers"].items()} == \
        {"maxComputeSharedMemorySize": 32768, "shaderFloat16": "true"}
    cuda = [{"shims": {"cuda": {"state": "active", "answered": {"computeCapability": [90, 75]}}}}]
    assert answers.arm_answers(cuda, {"profile": {"api": "cuda"}}) == \
        {"computeCapability": {"stock": "9.0", "answer": "7.5"}}


def test_cpu_output_leads_with_the_mechanism_and_claims_no_speed():
    s = _with_answers(BUNDLE)
    text = terminal.to_text(mechanism.render_cpu(s, "capshim bench — llvmpipe", 80, skip_notes=s["notes"]), 80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert lines[0] == "capshim bench — llvmpipe" and lines[1] == mechanism.MECHANISM_HEAD
    figures = next(i for i, line in enumerate(lines) if "tok/s" in line)
    speed = lines.index(mechanism.SPEED_LINE)
    mech = next(i for i, line in enumerate(lines) if "vm-stock" in line and "maxComputeSharedMemorySize 24576" in line)
    assert mech < speed < figures  # the mechanism, then the one line, then the figures
    assert "% of host" not in text and "speedup" not in text
    assert "Against native's path: vm-stock took another, vm-unlocked the same." in text
    busy = [line for line in lines if "runs contaminated" in line]
    assert len(busy) == 1 and busy[0].startswith("Busy machine: load 1.4-3.9 on 2 cores")
    assert "2 of 9 runs contaminated" in text.replace("\n", " ") and "contaminated (run" not in text
    assert "is a CPU device" not in text  # the plan's note is said by the speed line
    for arm in ("vm-stock", "vm-unlocked"):  # the bundle keeps the ratios
        assert all(t["speedup"] for t in s["arms"][arm]["tests"].values())


def test_the_cpu_bench_prints_the_mechanism_first_and_no_ratio_column(tmp_path, stock_probe):
    """The embedded default's three arms over a stand-in llama-bench that ends as vulkaninfo (so the
    layers answer a real Vulkan program in the workload's own process)."""
    d = stock_probe["device"]
    if d.get("type") != "cpu":  # the CPU view is for a CPU device; a GPU keeps the ratios
        assert "% of host" in mechanism.SPEED_COLUMNS[1]
        return
    script = tmp_path / "fake-llama-bench"
    script.write_text(f"#!/bin/sh\necho 'ggml_vulkan: 0 = {d['name']} ({d['driver']}) | uma: 0 | fp16: 1 | "
                      f"warp size: 8' >&2\ncat '{FIXTURE}'\nexec vulkaninfo --summary >/dev/null 2>&1\n")
    script.chmod(0o755)
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "native=", "--arm", "vm-stock=simulate:vulkan-paravirt",
                    "--arm", "vm-unlocked=simulate:vulkan-paravirt,profile:restore", "-r", "1", "--warmup", "0",
                    "--out", str(out), "--", str(script), env={"COLUMNS": "80"}, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == mechanism.MECHANISM_HEAD and all(len(x) <= 80 for x in lines), r.stdout
    assert "maxComputeSharedMemorySize 24576, shaderFloat16 false" in r.stdout
    assert mechanism.SPEED_LINE in r.stdout and "% of host" not in r.stdout and "speedup" not in r.stdout
    assert len([x for x in lines if "runs contaminated" in x]) <= 1  # a busy machine is said once
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms"]["vm-stock"]["answers"]["shaderFloat16"] == {"stock": "true", "answer": "false"}
    assert "% of host" in (out / "report.md").read_text()  # the bundle keeps the ratios
    assert os.path.isfile(out / "results.csv")
    again = run_capshim("report", str(out), env={"COLUMNS": "80"}, timeout=300)
    assert again.returncode == 0 and again.stdout == r.stdout  # the same bundle reads the same


def test_report_of_a_cpu_bundle_reads_as_the_bench_printed_it():
    """capshim report decides the CPU view by the bench's own rule (names.is_cpu_device of the bundle's
    device): the mechanism, no speedup or % of host column, no host role in the arm names."""
    r = run_capshim("report", str(BUNDLE), env={"COLUMNS": "80"}, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == mechanism.MECHANISM_HEAD and mechanism.SPEED_LINE in lines
    assert "% of host" not in r.stdout and "speedup" not in r.stdout and "(host)" not in r.stdout
    assert "is a CPU device" in r.stderr and "is a CPU device" not in r.stdout  # said once, as the bench does
    # the bench's option is named with its command: capshim report does not accept it
    assert "capshim bench --exclude-contaminated" in " ".join(lines)


def test_cpu_output_of_a_metric_command_names_no_llama_path_and_no_speedup_legend():
    """A --metric command (summary "metrics"): no log attests a path, so no 'path llama.cpp took' head
    and no 'not attested' column; the legend of the speedup column is not printed without the column."""
    s = _with_answers(BUNDLE)
    s["metrics"] = {"wall": {"kind": "wall", "better": "lower", "unit": "s"}}
    s["notes"] = ["lower is better for wall: speedup = median(baseline) / median(arm), % of host = "
                  "100 * median(host) / median(arm)"]
    for arm in s["arms"].values():
        arm["path"] = {}
    text = terminal.to_text(mechanism.render_cpu(s, "t", 80), 80)
    lines = text.splitlines()
    assert lines[1] == mechanism.ANSWERS_HEAD and "llama.cpp" not in text, text
    assert "not attested" not in text and "speedup" not in text, text
    s = _with_answers(BUNDLE)
    s["metrics"] = {"sdpa": {"kind": "json", "better": "higher"}}  # a workload measured through a metric, its path attested
    assert terminal.to_text(mechanism.render_cpu(s, "t", 80), 80).splitlines()[1] == mechanism.WORKLOAD_HEAD


def test_an_arm_with_no_finished_run_is_not_said_to_have_run():
    """A bench stopped before an arm's first run (a new user's Ctrl-C at 1.5 s): that arm's answers are
    not known (not "the shim changed nothing"), the speed line does not say every arm ran, and with no
    run at all there is no empty table."""
    s = _with_answers(BUNDLE)
    s["arms"]["vm-stock"]["runs"], s["arms"]["vm-stock"]["answers"] = [], {}
    assert mechanism.answers_cell(s["arms"]["vm-stock"]) == "not known: no run finished"
    text = " ".join(terminal.to_text(mechanism.render_cpu(s, "t", 80), 80).split())
    assert mechanism.SPEED_LINE not in text and "no run of vm-stock finished" in text
    for arm in s["arms"].values():
        arm["runs"], arm["answers"], arm["tests"] = [], {}, {}
    text = " ".join(terminal.to_text(mechanism.render_cpu(s, "t", 80), 80).split())
    assert "No figures: no run finished." in text and "tok/s" not in text
