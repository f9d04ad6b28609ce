"""One status-event schema, one writer, one classifier, for both shims; FIFOs and other
non-regular files never block the host. Vulkan through the real loader and driver
(lavapipe in CI); Metal through the GNU-runtime stand-in (sanitized builds)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from capshim import status
from capshim.backends import metal, vulkan
from capshim.backends.metal import compile as metal_build
from capshim.native.build import VERSION_DEFINE, run_compiler
from tests.backends.metal_harness import SAN, Harness

APPLE9 = {"LUME_METAL_APPLE_FAMILY_MAX": "1009"}
LOWER = "direction=lower\nmaxComputeSharedMemorySize=20480\n"


def _vk_env(vk_build, tmp_path: Path, config: str | None, status_file: Path) -> dict[str, str]:
    cfg = tmp_path / "device.cfg"
    if config is not None:
        cfg.write_text(config)
    env = dict(os.environ)
    env.update({"VK_ADD_LAYER_PATH": str(vk_build.manifest_dirs["device"]),
                "VK_INSTANCE_LAYERS": vulkan.LAYER_DEVICE,
                "CAPSHIM_VK_DEVICE_CONFIG": str(cfg),
                "CAPSHIM_STATUS_FILE": str(status_file)})
    return env


def _probe(vk_build, env) -> tuple[dict, str]:
    # A hang here is the defect under test: the timeout turns it into a failure.
    proc = subprocess.run([str(vk_build.probe)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]  # every line is whole JSON


# ---- one schema -------------------------------------------------------------------

def test_both_shims_write_the_same_leading_fields(vk_build, shim, tmp_path):
    st = tmp_path / "vk.jsonl"
    _probe(vk_build, _vk_env(vk_build, tmp_path, LOWER, st))
    vk_events = _lines(st)
    assert vk_events and all(list(e)[:5] == ["schema", "event", "shim", "layer", "pid"] for e in vk_events)
    assert {e["schema"] for e in vk_events} == {status.SCHEMA}
    # The hooks event is generated from the layer's one list of intercepted entry points.
    (hooks,) = [e for e in vk_events if e["event"] == "hooks"]
    assert hooks["installed"] == [
        "vkGetPhysicalDeviceProperties", "vkGetPhysicalDeviceProperties2", "vkGetPhysicalDeviceProperties2KHR",
        "vkGetPhysicalDeviceFeatures", "vkGetPhysicalDeviceFeatures2", "vkGetPhysicalDeviceFeatures2KHR",
        "vkEnumerateDeviceExtensionProperties", "vkGetPhysicalDeviceToolProperties",
        "vkGetPhysicalDeviceToolPropertiesEXT"]
    r = shim.run(["new", "CSParavirtDevice"], APPLE9)
    assert r.rc == 0 and r.events
    assert all(list(e)[:4] == ["schema", "event", "shim", "pid"] for e in r.events)
    assert {(e["schema"], e["shim"]) for e in r.events} == {(status.SCHEMA, "metal")}
    # One classifier: the Metal summary is the shared verdict.
    assert metal.summarize_status(r.events) == status.classify(status.StatusReport(r.events), "metal").state \
        == "active"


# ---- overflow: a truncation event, never a cut line ---------------------------------

def test_vulkan_overflow_writes_a_truncation_event(vk_build, stock_probe, tmp_path):
    st = tmp_path / "s.jsonl"
    env = _vk_env(vk_build, tmp_path, None, st)
    env["CAPSHIM_VK_DEVICE_CONFIG"] = "/nonexistent/" + "x" * 5000  # the config event names it: too long
    data, err = _probe(vk_build, env)
    assert data["capabilities"] == stock_probe["capabilities"]
    assert "invalid configuration" in err
    cut = [e for e in _lines(st) if e["event"] == "truncated"]
    assert cut and cut[0]["original_event"] == "config" and cut[0]["layer"] == vulkan.LAYER_DEVICE
    assert cut[0]["line_max"] == 4096 and cut[0]["schema"] == status.SCHEMA
    state = status.classify(status.read(st), vulkan.LAYER_DEVICE)
    assert state.state == "inert" and "status events truncated: config" in state.reason


@pytest.fixture(scope="module")
def small_line_shim(metal_arts, tmp_path_factory):
    """The Metal shim built with 200-byte status lines, so its hooks event overflows."""
    out = tmp_path_factory.mktemp("metal-small") / metal.SO_NAME
    run_compiler(["gcc", *metal_build.WARN_FLAGS, *SAN, VERSION_DEFINE, "-DCAPSHIM_STATUS_LINE_MAX=200", "-fPIC", "-shared",
                        "-fvisibility=hidden", f"-I{metal_build.SHARED_DIR}", *metal_build._src(metal_build.SHIM_SOURCES), "-lobjc", "-ldl", "-lpthread",
                        "-o", str(out)])
    return {**metal_arts, "shim": out}


@pytest.mark.slow
def test_metal_overflow_writes_a_truncation_event(small_line_shim, tmp_path):
    h = Harness(small_line_shim, tmp_path)
    r = h.run(["new", "CSParavirtDevice"], APPLE9)  # Harness parses every line as JSON
    assert r.rc == 0
    assert r.one()["highest"]["apple"] == 1009  # the shim itself still works
    cut = r.of("truncated")
    assert [e["original_event"] for e in cut] == ["hooks"]
    assert cut[0]["shim"] == "metal" and cut[0]["line_max"] == 200
    state = status.classify_events(r.events)
    assert state.state == "inert" and "status events truncated: hooks" in state.reason


# ---- FIFOs and other non-regular files --------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "chardev", "directory"])
def test_a_config_path_that_is_not_a_regular_file_is_refused_without_blocking(vk_build, stock_probe, tmp_path,
                                                                              kind):
    st = tmp_path / "s.jsonl"
    env = _vk_env(vk_build, tmp_path, None, st)
    path = {"fifo": tmp_path / "cfg.fifo", "chardev": Path("/dev/null"), "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a blocking open would wait forever
    env["CAPSHIM_VK_DEVICE_CONFIG"] = str(path)
    data, err = _probe(vk_build, env)
    assert data["capabilities"] == stock_probe["capabilities"]
    word = {"fifo": "a FIFO", "chardev": "a character device", "directory": "a directory"}[kind]
    assert f"not a regular file ({word})" in err and "answers stay stock" in err
    state = status.classify(status.read(st), vulkan.LAYER_DEVICE)
    assert state.state == "invalid" and f"not a regular file ({word})" in state.reason


@pytest.mark.parametrize("reader", [False, True])
def test_a_fifo_status_path_is_refused_and_the_layer_still_works(vk_build, stock_probe, tmp_path, reader):
    fifo = tmp_path / "status.fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK) if reader else None
    try:
        data, err = _probe(vk_build, _vk_env(vk_build, tmp_path, LOWER, fifo))
        if fd is not None:
            try:
                got = os.read(fd, 4096)  # b"": the writer opened and closed it, wrote nothing
            except BlockingIOError:
                got = b""
            assert got == b""
    finally:
        if fd is not None:
            os.close(fd)
    assert data["capabilities"]["maxComputeSharedMemorySize"] == 20480  # the layer is active
    assert err.count(f"capshim: status file {fifo} refused: not a regular file") == 1
    assert "no status is written" in err
    assert status.read(fifo).events == []  # the reader does not block on it either


def test_a_fifo_status_path_is_refused_by_the_metal_shim(shim, tmp_path):
    fifo = tmp_path / "status.fifo"
    os.mkfifo(fifo)
    r = shim.run(["new", "CSParavirtDevice"], APPLE9, status=False, extra={"CAPSHIM_STATUS_FILE": str(fifo)})
    assert r.rc == 0
    assert r.one()["highest"]["apple"] == 1009
    assert r.stderr.count("refused: not a regular file") == 1


def test_quiet_silences_the_refusal_line(vk_build, tmp_path):
    fifo = tmp_path / "status.fifo"
    os.mkfifo(fifo)
    env = _vk_env(vk_build, tmp_path, LOWER, fifo)
    env["CAPSHIM_QUIET"] = "1"
    _, err = _probe(vk_build, env)
    assert "refused" not in err

