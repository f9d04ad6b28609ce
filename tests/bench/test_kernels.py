"""capshim kernels: the perf logger parser on a real capture, the comparisons, the command end to end on lavapipe."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from capshim.bench import kernels
from capshim.bench import model as model_mod
from tests.conftest import REPO, run_capshim

#: A real capture (Gemma 3 270M Q4_K_M, native answers, lavapipe, cyllama 0.2.18): the worker's stderr with
#: GGML_VK_PERF_LOGGER=1, trimmed to the device lines and the first three perf logger blocks (one prompt
#: batch of 64 tokens, two single-token graphs).
FIXTURE = REPO / "tests" / "fixtures" / "kernels" / "gemma3-270m-q4_k_m-native.stderr"


def test_parser_reads_a_real_capture():
    fp = kernels.parse_stderr(FIXTURE.read_bytes())
    assert fp.blocks == 3 and fp.unparsed == []
    assert fp.flash_attention
    assert fp.device["matrix_cores"] == "none" and fp.device["shared_memory"] == 32768 and fp.device["fp16"]
    assert kernels.device_choices(fp) == {"uma": False, "fp16": True, "fp16_dot2": False, "bf16": False,
                                          "warp_size": 8, "shared_memory": 32768, "int_dot": False,
                                          "matrix_cores": "none"}
    assert fp.classes == {
        "ADD": 108, "CPY": 6, "FLASH_ATTN_EXT [n=1]": 36, "FLASH_ATTN_EXT [n>1]": 18, "GET_ROWS": 6, "GLU": 54,
        "MUL_MAT q4_K [n>1]": 27, "MUL_MAT q5_0 [n>1]": 79, "MUL_MAT q6_K [n>1]": 8, "MUL_MAT q8_0 [n>1]": 9,
        "MUL_MAT_VEC q4_K [n=1]": 54, "MUL_MAT_VEC q5_0 [n=1]": 164, "MUL_MAT_VEC q6_K [n=1]": 19,
        "MUL_MAT_VEC q8_0 [n=1]": 18, "RMS_NORM_MUL(RMS_NORM)": 327, "ROPE": 54, "ROPE_VIEW_SET_ROWS(ROPE)": 54,
        "SCALE": 57, "SET_ROWS": 54}
    assert fp.op("MUL_MAT q4_K [n>1]") == kernels.OpClass("MUL_MAT", "", "q4_K", "n>1")


def test_parse_line_forms():
    # line names as ggml-vulkan's perf logger prints them (the tiny preset's run, and the logger's source)
    p = kernels.parse_line
    assert p("MUL_MAT_ADD MUL_MAT_VEC f16 m=128 n=1 k=384") == kernels.OpClass("MUL_MAT_VEC", "MUL_MAT_ADD", "f16", "n=1")
    assert p("MUL_MAT q4_0 m=2048 n=64 k=2048") == kernels.OpClass("MUL_MAT", "", "q4_0", "n>1")
    assert p("MUL_MAT_ID q4_K m=512 n=4 k=2048 n_expert=8 batch=2").phase == "n>1"
    assert p("FLASH_ATTN_EXT dst(64,2,16,1),  q(64,16,2,1),  k(64,256,1,1),  v(64,256,1,1),  m(256,16,1,1)") \
        == kernels.OpClass("FLASH_ATTN_EXT", "", "", "n>1")
    assert p("FLASH_ATTN_EXT dst(64,2,1,1),  q(64,1,2,1),  k(64,256,1,1)").phase == "n=1"
    assert p("RMS_NORM_MUL RMS_NORM(128,16,1,1)") == kernels.OpClass("RMS_NORM", "RMS_NORM_MUL")
    assert p("ROPE_VIEW_SET_ROWS ROPE") == kernels.OpClass("ROPE", "ROPE_VIEW_SET_ROWS")
    assert p("SILU") == kernels.OpClass("SILU")
    assert p("MUL_MAT_ADD MUL_MAT_VEC f16 m=128 n=1 k=384").label == "MUL_MAT_ADD(MUL_MAT_VEC) f16 [n=1]"
    assert p("MUL_MAT_ADD MUL_MAT_VEC f16 m=128 n=1 k=384").kind == "path"
    assert p("SCALE").kind == "graph"


def _fp(*lines: str, device: str = "fp16: 1 | shared memory: 32768") -> kernels.Fingerprint:
    body = "\n".join(f"{x}: 1 x 2 us = 2 us" for x in lines)
    return kernels.parse_stderr(f"ggml_vulkan: 0 = GPU (drv) | {device}\n----------------\nVulkan Timings:\n"
                                f"{body}\nTotal time: 2 us.\n")


def test_compare_sorts_weight_type_path_and_graph():
    synth = _fp("MUL_MAT q4_0 m=8 n=64 k=8", "MUL_MAT_VEC q4_0 m=8 n=1 k=8", "MUL_MAT_VEC q8_0 m=8 n=1 k=8",
                "MUL_MAT_ADD MUL_MAT_VEC q4_0 m=8 n=1 k=8", "FLASH_ATTN_EXT dst(64,2,16,1),  q(64,16,2,1)", "GLU")
    real = _fp("MUL_MAT q4_K m=8 n=64 k=8", "MUL_MAT q6_K m=8 n=64 k=8", "MUL_MAT_VEC q8_0 m=8 n=1 k=8",
               "MUL_MAT_VEC q4_K m=8 n=1 k=8", "SOFT_MAX", "SCALE", "GLU")
    c = kernels.compare_models(synth, real)
    assert c["shared"] == ["GLU", "MUL_MAT_VEC q8_0 [n=1]"]
    assert c["weight_type"] == [{"class": "MUL_MAT [n>1]", "ref": ["q4_0"], "other": ["q4_K", "q6_K"]},
                                {"class": "MUL_MAT_VEC [n=1]", "ref": ["q4_0", "q8_0"], "other": ["q4_K", "q8_0"]}]
    assert c["path"] == [{"class": "FLASH_ATTN_EXT [n>1]", "only_in": "ref"},
                         {"class": "MUL_MAT_ADD(MUL_MAT_VEC) [n=1]", "only_in": "ref"}]
    assert c["graph"] == [{"class": "SCALE", "only_in": "other"}, {"class": "SOFT_MAX", "only_in": "other"}]
    assert c["flash_attention"] == [True, False]
    assert kernels.compare_models(synth, synth)["weight_type"] == []


def test_profile_effect_and_same_effect():
    nat = _fp("MUL_MAT q4_0 m=8 n=64 k=8", "MUL_MAT_ADD MUL_MAT_VEC q4_0 m=8 n=1 k=8")
    low = _fp("MUL_MAT q4_0 m=8 n=64 k=8", "MUL_MAT_VEC q4_0 m=8 n=1 k=8", "ADD",
              device="fp16: 0 | shared memory: 24576")
    e = kernels.profile_effect(nat, low)
    assert e["device"] == {"fp16": [True, False], "shared_memory": [32768, 24576]}
    assert e["only_native"] == ["MUL_MAT_ADD(MUL_MAT_VEC) q4_0 [n=1]"]
    assert e["only_profile"] == ["ADD", "MUL_MAT_VEC q4_0 [n=1]"]
    # the same effect on a model with other weight types is the same effect; a different one is not
    nat_k = _fp("MUL_MAT q4_K m=8 n=64 k=8", "MUL_MAT_ADD MUL_MAT_VEC q4_K m=8 n=1 k=8")
    low_k = _fp("MUL_MAT q4_K m=8 n=64 k=8", "MUL_MAT_VEC q4_K m=8 n=1 k=8", "ADD",
                device="fp16: 0 | shared memory: 24576")
    assert kernels.same_effect([e, kernels.profile_effect(nat_k, low_k)])
    assert not kernels.same_effect([e, kernels.profile_effect(nat_k, nat_k)])


def test_stderr_without_the_logger_has_no_blocks():
    fp = kernels.parse_stderr(FIXTURE.read_text().split("----------------")[0])
    assert fp.blocks == 0 and fp.classes == {} and fp.device["warp_size"] == 8


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
