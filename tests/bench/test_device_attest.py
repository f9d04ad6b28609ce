"""The path is attested or the run is not a result (issue 20, Deliver 2 and 3).

Fast tests on fixtures: every device-line format llama.cpp has printed since Vulkan
support began (tests/fixtures/vulkan-device-lines/SOURCE.md), the CPU-backend and
off-device verdicts, what the summary does with such an arm, and the check of the
inherited device-selection variables.
"""

from __future__ import annotations

import pytest

from capshim.bench import analysis, attest, inherited_env
from capshim.summary import NOT_SHIM_STATES, OFF_DEVICE_STATES, STATES
from tests._report_paths import FIXTURES

LINES = FIXTURES / "vulkan-device-lines"
CPU_FALLBACK = FIXTURES / "kernels" / "tiny-cpu-fallback.stderr"

#: file -> (device name, driver, the fields it has besides device/name/driver)
FORMATS = {
    "2024-01-pr2059-using": ("AMD Radeon RX 7900 XTX", None, {"fp16": True, "fp16_dot2": False, "warp_size": 64}),
    "2024-01-pr5199-using-uma": ("Intel(R) Arc(tm) A770 Graphics", "DG2",
                                 {"uma": False, "fp16": True, "fp16_dot2": False, "warp_size": 32}),
    "2024-02-pr5321-vulkan0": ("AMD Radeon RX 6600M", None,
                               {"uma": False, "fp16": True, "fp16_dot2": False, "warp_size": 64}),
    "2024-06-pr7582-vulkan0-driver": ("NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA",
                                      {"uma": False, "fp16": True, "fp16_dot2": False, "warp_size": 32}),
    "2024-11-whisper2547-index": ("NVIDIA GeForce RTX 3060", "NVIDIA",
                                  {"uma": False, "fp16": True, "fp16_dot2": False, "warp_size": 32}),
    "2024-12-pr10597-matrix-cores-int": ("NVIDIA GeForce RTX 3060", "NVIDIA",
                                         {"uma": False, "fp16": True, "fp16_dot2": False, "warp_size": 32,
                                          "matrix_cores": 1}),
    "2024-12-pr10713-matrix-cores-name": ("NVIDIA GeForce RTX 3060", "NVIDIA",
                                          {"uma": False, "fp16": True, "fp16_dot2": False, "warp_size": 32,
                                           "matrix_cores": "NV_coopmat2"}),
    "2025-02-pr11719-shared-memory": ("AMD Radeon RX 7900 XTX (RADV NAVI31)", "radv",
                                      {"uma": False, "fp16": True, "fp16_dot2": False, "warp_size": 64,
                                       "shared_memory": 65536, "matrix_cores": "KHR_coopmat"}),
    "2025-03-pr12135-int-dot": ("llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe",
                                {"uma": False, "fp16": True, "fp16_dot2": False, "warp_size": 8,
                                 "shared_memory": 32768, "int_dot": False, "matrix_cores": "none"}),
    "2025-07-pr14707-bf16": ("Radeon 8060S Graphics (RADV STRIX_HALO)", "radv",
                             {"uma": True, "fp16": True, "fp16_dot2": False, "bf16": False, "warp_size": 64,
                              "shared_memory": 65536, "int_dot": True, "matrix_cores": "KHR_coopmat"}),
    "2026-06-pr24123-fp16-dot2": ("AMD Radeon RX 7900 XTX (RADV NAVI31)", "radv",
                                  {"uma": False, "fp16": True, "fp16_dot2": True, "bf16": True, "warp_size": 64,
                                   "shared_memory": 65536, "int_dot": True, "matrix_cores": "KHR_coopmat"}),
    "2026-07-pr25338-fp4": ("NVIDIA H200", "NVIDIA",
                            {"uma": False, "fp16": True, "fp16_dot2": False, "bf16": True, "fp4": False,
                             "warp_size": 32, "shared_memory": 49152, "int_dot": True,
                             "matrix_cores": "KHR_coopmat"}),
}


def test_every_format_has_a_fixture_and_a_source():
    assert sorted(p.stem for p in LINES.glob("*.stderr")) == sorted([*FORMATS, "list-devices-not-a-device-line"])
    assert len(attest.VULKAN_FORMATS) == len(FORMATS)
    source = (LINES / "SOURCE.md").read_text()
    for example, origin in attest.VULKAN_FORMATS:
        pr = origin.split(" (")[0].split("#")[1]
        commit = origin.rsplit(" ", 1)[1].rstrip(")")
        assert f"#{pr}" in source and commit in source, origin


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_historical_device_line_is_read_and_attests_its_device(name):
    text = (LINES / f"{name}.stderr").read_text()
    dev_name, driver, fields = FORMATS[name]
    v = attest.parse_path(text)["vulkan"]
    assert v["device"] == 0 and v["device_name"] == dev_name and v.get("driver") == driver
    assert {k: x for k, x in v.items() if k not in ("device", "device_name", "driver")} == fields
    # the probe's name of the device: name, or name and the parenthesised part read together
    probe_name = dev_name if name != "2024-01-pr5199-using-uma" else "Intel(R) Arc(tm) A770 Graphics (DG2)"
    assert attest.device_state(text, [], probe_name) == ("attested", None)
    state, why = attest.device_state(text, [], "Some Other GPU")
    assert state == attest.OFF_DEVICE and "not the probed Some Other GPU" in why


def test_the_2024_form_without_driver_names_lavapipe_either_way():
    text = "Vulkan0: llvmpipe (LLVM 15.0.6, 256 bits) | uma: 0 | fp16: 1 | warp size: 8\n"
    v = attest.parse_path(text)["vulkan"]
    assert attest.names_device(v, "llvmpipe (LLVM 15.0.6, 256 bits)")
    assert attest.device_state(text, [], "llvmpipe (LLVM 15.0.6, 256 bits)")[0] == "attested"


def test_a_device_name_with_parentheses_of_its_own():
    """llama.cpp PR #16689's thread: Mesa's Dozen driver names the device it sits on in parentheses."""
    text = ("ggml_vulkan: 0 = Microsoft Direct3D12 (AMD Radeon(TM) Graphics) (Dozen) | uma: 1 | fp16: 1 | bf16: 0 | "
            "warp size: 32 | shared memory: 32768 | int dot: 1 | matrix cores: none\n")
    v = attest.parse_path(text)["vulkan"]
    assert (v["device_name"], v["driver"]) == ("Microsoft Direct3D12 (AMD Radeon(TM) Graphics)", "Dozen")
    assert attest.device_state(text, [], "Microsoft Direct3D12 (AMD Radeon(TM) Graphics)")[0] == "attested"


def test_list_devices_lines_and_buffer_lines_are_not_device_lines():
    assert attest.parse_path((LINES / "list-devices-not-a-device-line.stderr").read_text()) == {}
    assert attest.parse_path("llama_kv_cache:    Vulkan0 KV buffer size =   192.00 MiB\n") == {}


def test_invalid_device_index_is_the_cpu_backend():
    """The issue's case: GGML_VK_VISIBLE_DEVICES=7 names no device; llama.cpp runs on its CPU backend."""
    text = CPU_FALLBACK.read_text()
    state, why = attest.device_state(text, [], "NVIDIA H200")
    assert state == attest.CPU_BACKEND
    assert why == ("llama.cpp ran on the CPU backend, not on Vulkan "
                   "(ggml_vulkan: Invalid device index 7 in GGML_VK_VISIBLE_DEVICES.)")
    # the same line without any buffer line (llama-bench without -v prints little else)
    short = "ggml_vulkan: Invalid device index 7 in GGML_VK_VISIBLE_DEVICES.\n"
    assert attest.device_state(short, [], "NVIDIA H200")[0] == attest.CPU_BACKEND


def test_llama_bench_rows_attest_or_refute_without_any_stderr():
    assert attest.device_state("", [{"backends": "CPU", "gpu_info": ""}], "NVIDIA H200")[0] == attest.CPU_BACKEND
    assert attest.device_state("", [{"backends": "Vulkan", "gpu_info": "NVIDIA H200"}], "NVIDIA H200") == \
        ("attested", None)
    state, why = attest.device_state("", [{"backends": "Vulkan", "gpu_info": "AMD Radeon RX 6600M"}], "NVIDIA H200")
    assert state == attest.OFF_DEVICE and "llama-bench's gpu_info names AMD Radeon RX 6600M" in why


def test_no_evidence_is_off_device_only_where_the_workload_always_names_its_device():
    state, why = attest.device_state("nothing here\n", [], "NVIDIA H200")
    assert state == attest.OFF_DEVICE and "llama-bench -v" in why
    assert attest.device_state("nothing here\n", [], "NVIDIA H200", required=False) == ("unknown", None)


def test_using_device_line_and_ncnn_lines_attest():
    assert attest.device_state("llama_prepare_model_devices: using device Vulkan0 (NVIDIA H200) (0000:00:06.0)"
                               " - 143139 MiB free\n", [], "NVIDIA H200")[0] == "attested"
    ncnn = "[0 llvmpipe (LLVM 15.0.6, 256 bits)]  queueC=0[1]  queueT=0[1]\n"
    assert attest.device_state(ncnn, [], "llvmpipe (LLVM 15.0.6, 256 bits)")[0] == "attested"
    assert attest.device_state(ncnn, [], "NVIDIA H200")[0] == attest.OFF_DEVICE


def test_states_are_in_the_one_state_list():
    assert set(OFF_DEVICE_STATES) == {attest.CPU_BACKEND, attest.OFF_DEVICE}
    assert set(OFF_DEVICE_STATES) <= set(STATES) and set(OFF_DEVICE_STATES) <= set(NOT_SHIM_STATES)


def _recs(arm, values):
    return [{"arm": arm, "run": i + 1, "sample": 1, "test": "pp512", "tok_s": v} for i, v in enumerate(values)]


def test_an_off_device_arm_is_kept_out_of_speedups_and_warned_about():
    why = "llama.cpp ran on the CPU backend, not on Vulkan (ggml_vulkan: Invalid device index 7)"
    arms = {"native": {"state": "cpu-backend", "device_check": why},
            "vm-stock": {"state": "native"},
            "vm-unlocked": {"state": "cpu-backend", "device_check": why, "spec": {"simulate": "x"}},
            "aa": {"state": "active", "spec": {"profile": "identity"}}}
    recs = _recs("native", [10, 11, 12]) + _recs("vm-stock", [5, 6, 7]) + _recs("vm-unlocked", [9, 9, 9]) \
        + _recs("aa", [10, 10, 10])
    host = {"name": "native", "tests": {"pp512": [[10.0], [11.0], [12.0]]}}
    s = analysis.analyze(recs, arms, "vm-stock", host, aa_arm="aa")
    unl = s["arms"]["vm-unlocked"]
    assert unl["shim_result"] is False and unl["device_check"] == why
    assert unl["tests"]["pp512"]["speedup"] is None and unl["tests"]["pp512"]["pct_of_host"] is None
    assert unl["flags"][0] == f"cpu-backend: not a result ({why})"
    # the host arm ran on the CPU: no arm gets a % of host; the A/A ratio against it is left out
    assert s["arms"]["vm-stock"]["tests"]["pp512"]["pct_of_host"] is None
    assert s["arms"]["aa"]["tests"]["pp512"]["speedup"]["value"] == pytest.approx(10 / 6)
    assert s["aa"]["tests"] == {}
    warned = [w for w in s["warnings"] if w["test"] is None]
    assert [w["arm"] for w in warned] == ["native", "vm-unlocked"]
    assert warned[1]["warning"].startswith(f"arm vm-unlocked is cpu-backend: {why}")
    assert f"warning: {warned[1]['warning']}" in s["notes"]


def test_a_baseline_off_the_device_gives_no_speedup_to_anyone():
    arms = {"stock": {"state": "off-device", "device_check": "x"}, "sim": {"state": "active"}}
    s = analysis.analyze(_recs("stock", [1, 2]) + _recs("sim", [3, 4]), arms, "stock")
    assert s["arms"]["sim"]["tests"]["pp512"]["speedup"] is None


# --- the inherited device-selection variables, checked before the first run ---------------------

H200 = {"index": 0, "name": "NVIDIA H200", "vendorID": 0x10DE, "deviceID": 0x2335}
TWO = ["NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"]


@pytest.mark.parametrize("value, fragment", [
    ("7", "index 7 names no device (this machine has 2: 0 = NVIDIA H200; 1 = llvmpipe"),
    ("1", "does not select the probed device 0 = NVIDIA H200 (it selects 1 = llvmpipe"),
    ("", "selects no device"),
    ("none", "selects no device"),
    ("-1", "names no device"),
    ("0,7", "index 7 names no device"),
])
def test_ggml_visible_devices_that_cannot_select_the_probed_device(value, fragment):
    (p,) = inherited_env.device_selection_problems({"GGML_VK_VISIBLE_DEVICES": value}, {}, H200, TWO)
    assert p.startswith(f"GGML_VK_VISIBLE_DEVICES={value} ") and fragment in p


@pytest.mark.parametrize("value", ["0", "0,1", "1 0", " 0 "])
def test_ggml_visible_devices_that_select_it(value):
    assert inherited_env.device_selection_problems({"GGML_VK_VISIBLE_DEVICES": value}, {}, H200, TWO) == []


def test_ggml_reads_the_list_as_its_stringstream_does():
    assert inherited_env.ggml_visible_devices("0,1 2") == [0, 1, 2]
    assert inherited_env.ggml_visible_devices("1,x,0") == [1]  # parsing stops at the first non-number


@pytest.mark.parametrize("name, value, fragment", [
    ("MESA_VK_DEVICE_SELECT", "1002:73bf", "selects device 1002:73bf, not the probed NVIDIA H200 (10de:2335)"),
    ("VK_LOADER_DEVICE_SELECT", "0x1002:0x73bf", "not the probed NVIDIA H200"),
    ("MESA_VK_DEVICE_SELECT", "list", "print the devices and exit"),
    ("MESA_VK_DEVICE_SELECT", "my-gpu", "is not VID:DID"),
])
def test_device_select_variables_naming_another_device(name, value, fragment):
    (p,) = inherited_env.device_selection_problems({name: value}, {name: value}, H200, TWO)
    assert p.startswith(f"{name}={value} ") and fragment in p


def test_device_select_naming_the_probed_device_passes():
    env = {"MESA_VK_DEVICE_SELECT": "10de:2335!", "VK_LOADER_DEVICE_SELECT": "0x10DE:0x2335"}
    assert inherited_env.device_selection_problems(env, env, H200, TWO) == []


@pytest.mark.parametrize("name", ["VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_LOADER_DRIVERS_SELECT",
                                  "VK_LOADER_DRIVERS_DISABLE"])
def test_driver_filters_the_probe_did_not_see_are_refused(name):
    assert inherited_env.device_selection_problems({name: "/x.json"}, {name: "/x.json"}, H200, TWO) == []
    (p,) = inherited_env.device_selection_problems({name: "/x.json"}, {}, H200, TWO)
    assert p.startswith(f"{name}=/x.json is set for the runs but the probe of NVIDIA H200 ran without it")


def test_2024_lines_give_path_columns_and_the_path_unchanged_check():
    """Issue 20: builds of 2024-02..2024-11 got no path columns and no 'path unchanged' check."""
    from capshim.summary import display_value

    stock = attest.parse_path("Vulkan0: AMD Radeon RX 6600M | uma: 0 | fp16: 1 | warp size: 64\n")
    sim = attest.parse_path("Vulkan0: AMD Radeon RX 6600M | uma: 0 | fp16: 0 | warp size: 64\n")
    assert display_value(stock, "vulkan", "device_name") == "AMD Radeon RX 6600M"
    assert display_value(sim, "vulkan", "fp16") == "no"
    assert attest.same_path(stock, stock) is True and attest.same_path(stock, sim) is False
    arms = {"stock": {"state": "native", "path": stock}, "sim": {"state": "active", "path": stock}}
    s = analysis.analyze(_recs("stock", [1, 2]) + _recs("sim", [1, 2]), arms, "stock")
    assert s["arms"]["sim"]["path_unchanged"] is True


def test_a_device_line_with_every_buffer_on_the_cpu_is_the_cpu_backend():
    text = ("ggml_vulkan: 0 = NVIDIA H200 (NVIDIA) | uma: 0 | fp16: 1 | warp size: 32\n"
            "load_tensors:   CPU_Mapped model buffer size =  600.00 MiB\n"
            "llama_context:        CPU compute buffer size =    1.76 MiB\n")
    state, why = attest.device_state(text, [], "NVIDIA H200")
    assert state == attest.CPU_BACKEND and "its buffers are all on the CPU" in why
    assert attest.device_state(text + "load_tensors:      Vulkan0 model buffer size = 1.0 MiB\n", [],
                               "NVIDIA H200")[0] == "attested"


def test_every_run_of_the_committed_evidence_attests_its_device():
    """No false alarm on real data: each run of every committed bundle (the H200's and lavapipe's, the
    built-in llama.cpp and ncnn workloads) names its probed device."""
    import json

    from capshim.bench import llamabench
    from tests.conftest import REPO

    seen = 0
    for meta in sorted((REPO / "evidence").glob("**/metadata.json")):
        m = json.loads(meta.read_text())
        device, kind = (m.get("device") or {}).get("name"), (m.get("workload") or {}).get("kind")
        if not device:
            continue
        for err in sorted((meta.parent / "raw").glob("*.stderr")):
            if "+" in err.name or not err.with_suffix(".json").exists():  # a control's run; a killed one
                continue
            rows = []
            if kind != "ncnn":
                try:
                    rows = [llamabench.device_info(r)
                            for r in llamabench.parse_output(err.with_suffix(".json").read_text(), str(err))]
                except llamabench.LlamaBenchError:  # a failed run: the bench attests only finished ones
                    continue
            verdict = attest.device_state(err.read_text(errors="replace"), rows, device)
            assert verdict == ("attested", None), (err, verdict)
            seen += 1
    assert seen > 100


@pytest.mark.parametrize("value, indices", [
    ("0x1", [0]), ("0;", [0]), ("1.5", [1]), ("+1", [1]), ("1-1", [1, 2 ** 64 - 1]),
    ("0 99999999999999999999999", [0]), ("\u0660", []), ("0\u00a01", [0]),
])
def test_ggml_visible_devices_are_read_number_by_number_as_the_stream_reads_them(value, indices):
    # `ss >> size_t` stops *inside* a token (0x1 reads 0), reads ASCII digits only, and an index past
    # 2**64 - 1 fails the stream and ends the list: ggml then selects what was read before it
    assert inherited_env.ggml_visible_devices(value) == indices


@pytest.mark.parametrize("value", ["0x0", "0;", "0 99999999999999999999999"])
def test_ggml_visible_devices_that_ggml_reads_as_the_probed_device_pass(value):
    assert inherited_env.device_selection_problems({"GGML_VK_VISIBLE_DEVICES": value}, {}, H200, TWO) == []


def test_ggml_visible_devices_of_non_ascii_digits_select_nothing():
    (p,) = inherited_env.device_selection_problems({"GGML_VK_VISIBLE_DEVICES": "\u0660"}, {}, H200, TWO)
    assert "selects no device" in p


@pytest.mark.parametrize("probed, gpu_info, verdict", [
    ("NVIDIA H20", "NVIDIA H200", "off-device"),                       # a longer name is another device
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090 D", "off-device"),
    ("NVIDIA H200", "NVIDIA H200", "attested"),
    ("NVIDIA H200", "NVIDIA RTX A4000, NVIDIA H200", "attested"),      # llama-bench joins its GPUs with ", "
    ("llvmpipe (LLVM 15.0.6, 256 bits)", "llvmpipe (LLVM 15.0.6, 256 bits), NVIDIA H200", "attested"),
])
def test_gpu_info_names_the_probed_device_only_as_a_whole_entry(probed, gpu_info, verdict):
    # gpu_info was matched as a substring: an H200's rows attested a bench of an H20
    assert attest.device_state("", [{"gpu_info": gpu_info, "backends": "Vulkan"}], probed)[0] == verdict


def test_a_baseline_off_the_device_shows_no_1_00x_in_the_table():
    # the bench table printed "1.00x" in the baseline's speedup column although its summary has none
    # (a cpu-backend baseline is no reference: every other arm's speedup column is empty)
    from capshim.export.table import table
    arms = {"stock": {"state": "cpu-backend", "device_check": "x"}, "sim": {"state": "active"}}
    s = analysis.analyze(_recs("stock", [1, 2]) + _recs("sim", [3, 4]), arms, "stock")
    t = table([s])
    col = t["columns"].index(next(c for c in t["columns"] if c.startswith("speedup")))
    assert {r["arm"]: r["cells"][col] for r in t["rows"]} == {"stock": "", "sim": ""}
    arms["stock"]["state"] = "native"
    s = analysis.analyze(_recs("stock", [1, 2]) + _recs("sim", [3, 4]), arms, "stock")
    assert [r["cells"][col] for r in table([s])["rows"] if r["arm"] == "stock"] == ["1.00x"]
