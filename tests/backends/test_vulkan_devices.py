"""One profile per Vulkan device (issue 32) through the real loader on lavapipe: two devices are the
same driver listed twice (two ICD files in VK_DRIVER_FILES; they share one deviceUUID, so a UUID
target is refused as ambiguous and the index names them), and a test layer below capshim's
(tests/native/vk_reorder_layer.c) gives them UUIDs of their own and, with CAPSHIM_TEST_REORDER=1,
the reverse order: a UUID target follows its device."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from capshim.errors import EXIT_USAGE
from capshim.native import build as nb
from tests.conftest import run_capshim


LAYER = Path(__file__).resolve().parents[1] / "native" / "vk_reorder_layer.c"
UUID = {p: f"00112233-4455-6677-8899-aabbccddee0{p}" for p in range(2)}


def _lavapipe_icd() -> Path:
    found = sorted(Path("/usr/share/vulkan/icd.d").glob("lvp_icd*.json"))
    if not found:
        pytest.skip("no lavapipe ICD file (setup.sh installs mesa-vulkan-drivers)")
    return found[0]


@pytest.fixture(scope="module")
def icds(tmp_path_factory):
    """VK_DRIVER_FILES values: lavapipe once ("one") and twice ("two")."""
    d = tmp_path_factory.mktemp("icd")
    src = _lavapipe_icd()
    for name in ("a.json", "b.json"):
        shutil.copy(src, d / name)
    return {"one": str(d / "a.json"), "two": f"{d / 'a.json'}:{d / 'b.json'}"}


@pytest.fixture(scope="module")
def reorder(tmp_path_factory):
    """The test layer's environment (without CAPSHIM_TEST_REORDER)."""
    d = tmp_path_factory.mktemp("reorder")
    nb.run_compiler(["gcc", "-std=gnu11", "-O1", *nb.WARNINGS, "-fPIC", "-shared", "-fvisibility=hidden",
                     str(LAYER), "-o", str(d / "libreorder.so")], d)
    (d / "reorder.json").write_text(json.dumps({"file_format_version": "1.1.0", "layer": {
        "name": "VK_LAYER_CAPSHIMTEST_reorder", "type": "GLOBAL", "library_path": "./libreorder.so",
        "api_version": "1.3.0", "implementation_version": "1", "description": "capshim test: UUIDs, order"}}))
    return {"VK_ADD_LAYER_PATH": str(d), "VK_INSTANCE_LAYERS": "VK_LAYER_CAPSHIMTEST_reorder"}


def _probe(env, *args):
    out = run_capshim("probe", "--api", "vulkan", *args, "--compare", "--json", env=env)
    assert out.returncode == 0, out.stderr
    return {d["index"]: d for d in json.loads(out.stdout)["devices"]}


SHARED = "maxComputeSharedMemorySize"


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_an_index_target_lowers_its_device_only(icds):
    devs = _probe({"VK_DRIVER_FILES": icds["two"]}, "--simulate", "vulkan-paravirt@1")
    assert devs[0]["simulate"] is None and devs[0]["differences"] == {}
    assert devs[1]["simulate"] == "vulkan-paravirt@1" and devs[1]["differences"][SHARED] == [32768, 24576]
    per = devs[1]["shimmed"]["shim"]["VK_LAYER_CAPSHIM_device"]["devices"]
    assert list(per) == ["1"] and per["1"]["profile"] == "vulkan-paravirt"


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_each_role_on_its_own_device(icds):
    devs = _probe({"VK_DRIVER_FILES": icds["two"]}, "--profile", "vulkan-paravirt@0", "--simulate",
                  "vulkan-paravirt@1")
    assert devs[0]["profile"] == "vulkan-paravirt@0" and devs[0]["differences"][SHARED] == [32768, 24576]
    assert devs[1]["simulate"] == "vulkan-paravirt@1" and devs[1]["differences"][SHARED] == [32768, 24576]


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
@pytest.mark.parametrize("reordered, hit", [("0", 1), ("1", 0)])
def test_a_uuid_target_follows_its_device_when_the_order_changes(icds, reorder, reordered, hit):
    env = {"VK_DRIVER_FILES": icds["two"], **reorder, "CAPSHIM_TEST_REORDER": reordered}
    devs = _probe(env, "--simulate", f"vulkan-paravirt@{UUID[1]}")
    assert devs[hit]["uuid"] == UUID[1] and devs[hit]["differences"][SHARED] == [32768, 24576]
    assert devs[1 - hit]["differences"] == {}


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_run_writes_the_targets_event(icds, tmp_path, vk_build):
    status = tmp_path / "s.jsonl"
    out = run_capshim("run", "--status-file", str(status), "--simulate", "vulkan-paravirt@1", "--",
                      str(vk_build.probe), "--device", "1", env={"VK_DRIVER_FILES": icds["two"]})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["capabilities"][SHARED] == 24576
    events = [json.loads(line) for line in status.read_text().splitlines()]
    (tgt,) = [e for e in events if e["event"] == "targets"]
    assert [(d["index"], d["simulate"]) for d in tgt["devices"]] == [(1, "vulkan-paravirt@1")]
    assert {e.get("device") for e in events if e["event"] == "changed"} == {1}


@pytest.mark.parametrize("files, args, words", [
    ("one", ["--simulate", "vulkan-paravirt@1"], "--simulate vulkan-paravirt@1: this machine has 1 Vulkan device "
                                                 "(0: llvmpipe"),
    ("one", ["--simulate", "vulkan-paravirt@1"], "drop '@1' (the profile then answers for device 0, as @0 does)"),
    ("two", ["--simulate", "vulkan-paravirt@2"], "no Vulkan device 2: this machine has 2 Vulkan devices"),
    ("two", ["--simulate", "vulkan-paravirt@6d657361-3232-2e33-2e36-000000000000"],
     "is shared by Vulkan devices 0, 1 (the same driver listed twice?): name the device by its index"),
    ("two", ["--simulate", "vulkan-paravirt@0", "--simulate", "vulkan-paravirt@0"], "is already given"),
])
def test_bad_targets_are_one_line_exit_2_and_nothing_runs(icds, tmp_path, files, args, words):
    marker = tmp_path / "ran"
    out = run_capshim("run", *args, "--", "touch", str(marker), env={"VK_DRIVER_FILES": icds[files]})
    assert out.returncode == EXIT_USAGE, out.stderr
    assert words in " ".join(out.stderr.split()), out.stderr
    assert out.stderr.count("capshim:") == 1 and not marker.exists()


def test_one_device_takes_a_target_on_device_0_and_the_status_names_it(icds, tmp_path, vk_build):
    status = tmp_path / "s.jsonl"
    out = run_capshim("run", "--status-file", str(status), "--simulate", "vulkan-paravirt@0", "--",
                      str(vk_build.probe), "--device", "0", env={"VK_DRIVER_FILES": icds["one"]})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["capabilities"][SHARED] == 24576
    events = [json.loads(line) for line in status.read_text().splitlines()]
    (tgt,) = [e for e in events if e["event"] == "targets"]
    assert [(d["index"], d["simulate"]) for d in tgt["devices"]] == [(0, "vulkan-paravirt@0")]
    assert {e.get("device") for e in events if e["event"] == "changed"} == {0}


def test_probe_list_names_each_device(icds):
    out = run_capshim("probe", "--list", "--api", "vulkan", env={"VK_DRIVER_FILES": icds["two"]})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["0", "1"] and all("llvmpipe" in line for line in lines), lines
    assert all(line.endswith("[UUID shared: name it by index]") for line in lines), lines  # one driver twice
    out = run_capshim("probe", "--list", "--json", env={"VK_DRIVER_FILES": icds["one"]})
    (dev,) = json.loads(out.stdout)["devices"]
    assert dev["index"] == 0 and "llvmpipe" in dev["name"] and len(dev["uuid"]) == 36


def test_the_same_icd_path_twice_is_one_device(icds):
    # docs/multi-gpu.md: two devices take two copies of the ICD file, not one path listed twice
    out = run_capshim("probe", "--list", "--api", "vulkan", "--json",
                      env={"VK_DRIVER_FILES": f"{icds['one']}:{icds['one']}"})
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["devices"]) == 1


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_probe_compare_says_per_device_what_the_shim_did_there(icds):
    out = run_capshim("probe", "--api", "vulkan", "--simulate", "vulkan-paravirt@1", "--compare",
                      env={"VK_DRIVER_FILES": icds["two"]})
    assert out.returncode == 0, out.stderr
    first, second = " ".join(out.stdout.split()).split("device 1 (")
    assert "VK_LAYER_CAPSHIM_device: stock: no profile targets device 0" in first and "recorded" not in first, first
    assert "on device 1 under vulkan-paravirt" in second, second
@pytest.mark.parametrize("order", ["uuid_first", "index_first"])
def test_one_device_named_by_index_and_by_uuid_in_two_configurations_answers_stock(icds, reorder, tmp_path, order,
                                                                                   monkeypatch):
    """Review finding 2: one configuration names device 1 by its deviceUUID (the test layer's), another
    by index 1. Both load (the load-time check compares specs of one kind); at selection the layer
    finds both name device 1: stock answers there, one rejected config event naming both files."""
    from capshim import profiles
    from capshim.backends import vulkan

    base = vulkan.render_config(profiles.load("vulkan-paravirt"))
    by_uuid, by_index = tmp_path / "uuid.cfg", tmp_path / "index.cfg"
    by_uuid.write_text(base + f"devices=uuid:{UUID[1].replace('-', '')}\n")
    by_index.write_text(base + "devices=1\n")
    value = f"{by_uuid}:{by_index}" if order == "uuid_first" else f"{by_index}:{by_uuid}"
    for k, v in {"VK_DRIVER_FILES": icds["two"], **reorder, "CAPSHIM_TEST_REORDER": "0"}.items():
        monkeypatch.setenv(k, v)  # the process's own: the launch adds capshim's layers to VK_INSTANCE_LAYERS
    stock = vulkan.probe(device=1)
    data = vulkan.probe(simulate=profiles.load("vulkan-paravirt"), device=1,
                        extra_env={"CAPSHIM_VK_DEVICE_CONFIG": value})
    assert data["capabilities"][SHARED] == stock["capabilities"][SHARED] == 32768
    state = data["shim"][vulkan.LAYER_DEVICE]
    assert state["state"] == "invalid", state
    assert "a device named by two configurations: device 1" in state["reason"] and UUID[1] in state["reason"]
    assert str(by_uuid) in state["reason"] and str(by_index) in state["reason"]
