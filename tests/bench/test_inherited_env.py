"""The inherited environment that changes llama.cpp's behaviour: recorded in metadata.json, warned about."""

from __future__ import annotations

from capshim import jsonread
from capshim.bench import inherited_env
from capshim.studies import common
from capshim.bench.analysis import analyze

ENV = {"GGML_VK_DISABLE_F16": "1", "GGML_VK_DISABLE_FUSION": "0", "GGML_VK_FORCE_MMVQ": "",
       "GGML_VK_VISIBLE_DEVICES": "1", "GGML_VK_PERF_LOGGER": "1", "VK_ICD_FILENAMES": "/x/icd.json",
       "VK_DRIVER_FILES": "/y.json", "VK_LOADER_LAYERS_ENABLE": "*validation", "MESA_VK_DEVICE_SELECT": "10de:2335",
       "LP_NUM_THREADS": "2", "LLAMA_ARG_N_GPU_LAYERS": "0", "LLAMA_API_KEY": "hunter2", "LLAMA_ARG_HF_TOKEN": "hf_x",
       "CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "all", "__GL_SHADER_DISK_CACHE": "0",
       "RADV_PERFTEST": "coop_matrix", "DXVK_HUD": "1", "LD_PRELOAD": "/lib/x.so",
       "HOME": "/home/u", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "GITHUB_TOKEN": "ghp_x", "PATH": "/bin",
       "CAPSHIM_INHERIT": "1", "MY_VK_THING": "no"}


def test_record_keeps_only_the_documented_prefixes_and_hides_secret_values():
    rec = inherited_env.record(ENV)
    v = rec["variables"]
    for name in ("GGML_VK_DISABLE_F16", "GGML_VK_VISIBLE_DEVICES", "GGML_VK_PERF_LOGGER", "VK_ICD_FILENAMES",
                 "VK_DRIVER_FILES", "VK_LOADER_LAYERS_ENABLE", "MESA_VK_DEVICE_SELECT", "LP_NUM_THREADS",
                 "LLAMA_ARG_N_GPU_LAYERS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "__GL_SHADER_DISK_CACHE",
                 "RADV_PERFTEST", "DXVK_HUD", "LD_PRELOAD"):
        assert v[name] == ENV[name], name
    # never the rest of the environment; a secret-looking name of a recorded prefix keeps its name only
    assert not {"HOME", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "PATH", "CAPSHIM_INHERIT", "MY_VK_THING"} & set(v)
    assert v["LLAMA_API_KEY"] == v["LLAMA_ARG_HF_TOKEN"] == inherited_env.REDACTED
    assert rec["redacted"] == ["LLAMA_API_KEY", "LLAMA_ARG_HF_TOKEN"]
    assert "hunter2" not in str(rec) and "hf_x" not in str(rec)
    assert list(v) == sorted(v) and {"GGML_", "VK_", "MESA_", "CUDA_", "__GL_"} <= set(rec["prefixes"])
    assert all(src for _, src in inherited_env.PREFIXES + inherited_env.NAMES)  # every prefix cites a source
    jsonread.check({"bundle_format": "capshim-evidence/1", "host": {}, "inherited_env": rec},
                   jsonread.METADATA_SCHEMA, "metadata.json")


def test_warnings_for_every_llama_cpp_switch_whatever_its_value():
    ws = inherited_env.warnings(ENV)
    assert [w.split(" inherited:")[0] for w in ws] == ["GGML_VK_DISABLE_F16=1", "GGML_VK_DISABLE_FUSION=0",
                                                        "GGML_VK_FORCE_MMVQ="]
    assert ws[0].startswith("GGML_VK_DISABLE_F16=1 inherited: every arm runs without fp16 shader paths")
    assert "whatever its value" in ws[1] and "every arm runs without operator fusion" in ws[1]
    assert "every arm runs with this llama.cpp override" in ws[2]
    # a variable the workload sets itself is not inherited; none set, no warning
    assert inherited_env.warnings(ENV, {"GGML_VK_DISABLE_F16": "1", "GGML_VK_DISABLE_FUSION": "1",
                                        "GGML_VK_FORCE_MMVQ": "1"}) == []
    assert inherited_env.warnings({"GGML_VK_PERF_LOGGER": "1", "VK_ICD_FILENAMES": "/x"}) == []


def test_summary_carries_bench_wide_warnings_and_ablate_reads_them():
    records = [{"arm": a, "run": i, "sample": 1, "test": "pp64", "tok_s": 100.0 + i} for a in ("native", "b")
               for i in (1, 2)]
    arms = {"native": {"state": "native"}, "b": {"state": "native"}}
    (w,) = inherited_env.warnings({"GGML_VK_DISABLE_F16": "1"})
    s = analyze(records, arms, "native", notes=["cpu note"], bench_warnings=[w])
    assert s["warnings"][0] == {"arm": None, "test": None, "warning": w}
    assert s["notes"] == [f"warning: {w}", "cpu note"]
    assert common.env_notes(s) == [f"warning: {w}"]
    assert common.bench_warnings(s)[0]["short"] == "GGML_VK_DISABLE_F16=1 inherited"
    plain = analyze(records, arms, "native")
    assert common.env_notes(plain) == [] and all(x["arm"] for x in common.bench_warnings(plain))
