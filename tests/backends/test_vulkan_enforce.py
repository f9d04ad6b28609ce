"""The device role refuses, at vkCreateDevice, what the simulated GPU hides; the app
role's restore lets it through. Real loader, real driver (lavapipe in CI)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from capshim import profiles, status
from capshim.backends import vulkan
from capshim.native.build import run_compiler
from capshim.profiles import ondevice

SOURCE = Path(__file__).resolve().parents[1] / "native" / "vk_create_device.c"
FEATURE_NOT_PRESENT, EXTENSION_NOT_PRESENT = -8, -7

# (argument of vk_create_device, capability key, struct named in the event)
CASES = [
    ("base.shaderInt16", "shaderInt16", "pEnabledFeatures"),
    ("features2.shaderInt16", "shaderInt16", "VkPhysicalDeviceFeatures2"),
    ("vk11.storageBuffer16BitAccess", "storageBuffer16BitAccess", "VkPhysicalDeviceVulkan11Features"),
    ("vk12.shaderFloat16", "shaderFloat16", "VkPhysicalDeviceVulkan12Features"),
    ("vk13.shaderIntegerDotProduct", "shaderIntegerDotProduct", "VkPhysicalDeviceVulkan13Features"),
    ("f16i8.shaderFloat16", "shaderFloat16", "VkPhysicalDeviceShaderFloat16Int8Features"),
]


@pytest.fixture(scope="module")
def creator(tmp_path_factory):
    out = tmp_path_factory.mktemp("vkcreate") / "vk_create_device"
    run_compiler(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", str(SOURCE), "-lvulkan", "-o", str(out)])
    return out


def _profile(direction: str, caps: dict[str, object] | None = None, exts: dict[str, object] | None = None):
    text = f'name="t"\napi="vulkan"\ndirection="{direction}"\nversion=1\ndescription="d"\n'
    if caps:
        text += "[capabilities]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in caps.items())
    if exts:
        text += "[extensions]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in exts.items())
    return profiles.parse(text, "t.toml")


def _create(creator, tmp_path, args, profile=None, simulate=None):
    st = tmp_path / "status.jsonl"
    env = dict(os.environ)
    env.update(vulkan.launch_env(profile, simulate, st, tmp_path))
    proc = subprocess.run([str(creator), *args], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["result"], status.read(st), proc.stderr


def _with(stock_probe, key):
    if not stock_probe["capabilities"].get(key):
        pytest.fail(f"this device does not have {key}: the test needs a device (lavapipe) that has it")


@pytest.mark.parametrize("arg,key,where", CASES)
def test_a_hidden_feature_is_refused_in_every_struct_kind(vk_build, stock_probe, creator, tmp_path, arg, key, where):
    _with(stock_probe, key)
    stock, _, _ = _create(creator, tmp_path, [arg])
    assert stock == 0  # the real device accepts it
    result, report, err = _create(creator, tmp_path, [arg], simulate=_profile("lower", {key: False}))
    assert result == FEATURE_NOT_PRESENT
    (ev,) = [e for e in report.events if e.get("event") == "refused"]
    assert ev["layer"] == vulkan.LAYER_DEVICE and ev["key"] == key and ev["struct"] == where
    assert ev["kind"] == "feature" and ev["result"] == "VK_ERROR_FEATURE_NOT_PRESENT"
    assert ev["schema"] == 1
    assert f"feature {key} ({where}) is not on the simulated device" in err


def test_a_feature_the_simulation_keeps_is_accepted(vk_build, stock_probe, creator, tmp_path):
    # The other direction: hiding one feature does not refuse a different one.
    _with(stock_probe, "shaderFloat16")
    _with(stock_probe, "shaderInt8")
    result, report, _ = _create(creator, tmp_path, ["vk12.shaderInt8"],
                                simulate=_profile("lower", {"shaderFloat16": False}))
    assert result == 0
    assert [e for e in report.events if e.get("event") in ("refused", "restored")] == []


@pytest.mark.parametrize("arg,key,where", [CASES[0], CASES[3], CASES[5]])
def test_the_app_role_restore_lets_a_hidden_feature_through(vk_build, stock_probe, creator, tmp_path, arg, key,
                                                            where):
    _with(stock_probe, key)
    result, report, _ = _create(creator, tmp_path, [arg], simulate=_profile("lower", {key: False}),
                                profile=_profile("raise", {key: True}))
    assert result == 0
    (ev,) = [e for e in report.events if e.get("event") in ("refused", "restored")]
    assert ev["event"] == "restored" and ev["key"] == key and ev["struct"] == where
    assert status.classify(report, vulkan.LAYER_DEVICE).state == "active"


def test_an_app_role_that_restores_something_else_does_not_open_the_gate(vk_build, stock_probe, creator, tmp_path):
    _with(stock_probe, "shaderFloat16")
    result, _, _ = _create(creator, tmp_path, ["vk12.shaderFloat16"],
                           simulate=_profile("lower", {"shaderFloat16": False, "shaderInt8": False}),
                           profile=_profile("raise", {"shaderInt8": True}))
    assert result == FEATURE_NOT_PRESENT


def test_a_hidden_extension_is_refused_and_restored(vk_build, stock_probe, creator, tmp_path):
    ext = next(e for e in ("VK_KHR_8bit_storage", "VK_KHR_16bit_storage", "VK_KHR_shader_float16_int8")
               if e in stock_probe["extensions"])
    hide = _profile("lower", exts={ext: False})
    result, report, _ = _create(creator, tmp_path, [f"ext:{ext}"], simulate=hide)
    assert result == EXTENSION_NOT_PRESENT
    # The loader may refuse it first (it validates against the layers' list); when the
    # call reaches the device role, the event names the extension.
    for ev in (e for e in report.events if e.get("event") == "refused"):
        assert ev["key"] == ext and ev["kind"] == "extension"
    back = _profile("raise", exts={ext: stock_probe["extensions"][ext]})
    result, report, _ = _create(creator, tmp_path, [f"ext:{ext}"], simulate=hide, profile=back)
    assert result == 0
    assert [(e["event"], e["key"]) for e in report.events if e.get("event") in ("refused", "restored")] == [
        ("restored", ext)]


def test_the_paravirt_restore_arm_creates_what_llamacpp_enables(vk_build, stock_probe, creator, tmp_path):
    # vm-stock refuses fp16; vm-unlocked (restore profile over the same simulation) accepts it.
    _with(stock_probe, "shaderFloat16")
    paravirt = profiles.load("vulkan-paravirt")
    result, _, _ = _create(creator, tmp_path, ["vk12.shaderFloat16"], simulate=paravirt)
    assert result == FEATURE_NOT_PRESENT
    restore = ondevice.restore_profile(stock_probe, paravirt)
    result, report, _ = _create(creator, tmp_path, ["vk12.shaderFloat16"], simulate=paravirt, profile=restore)
    assert result == 0
    assert status.classify(report, vulkan.LAYER_APP).state == "active"


# Hostile pNext chains (docs/hostile-inputs.md): the layer walks up to 65536
# structures; a longer chain (or one that loops) fails closed.
PADDED_FP16 = ["pad=300", "vk12.shaderFloat16"]


def test_a_long_pnext_chain_does_not_bypass_the_refusal(vk_build, stock_probe, creator, tmp_path):
    _with(stock_probe, "shaderFloat16")
    paravirt = profiles.load("vulkan-paravirt")
    result, report, _ = _create(creator, tmp_path, PADDED_FP16, simulate=paravirt)
    assert result == FEATURE_NOT_PRESENT
    (ev,) = [e for e in report.events if e.get("event") == "refused"]
    assert ev["key"] == "shaderFloat16" and ev["struct"] == "VkPhysicalDeviceVulkan12Features"


def test_a_long_pnext_chain_in_a_query_is_still_patched(vk_build, stock_probe, creator, tmp_path):
    _with(stock_probe, "shaderFloat16")
    st = tmp_path / "status.jsonl"
    env = dict(os.environ)
    env.update(vulkan.launch_env(None, _profile("lower", {"shaderFloat16": False}), st, tmp_path))
    proc = subprocess.run([str(creator), "query", *PADDED_FP16], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["shaderFloat16"] == 0
    assert [e for e in status.read(st).events if e.get("event") == "chain_cut"] == []


def test_a_pnext_chain_past_the_limit_fails_closed_at_create_device(vk_build, creator, tmp_path):
    # The feature sits past the limit: the device role cannot see it, so it refuses
    # the call. (A chain that loops back on itself never reaches the layer under the
    # real loader: the loader's own vkCreateDevice walks the chain first and hangs.
    # tests/native/test_layer_chain_loop.py drives the layer directly with a loop.)
    paravirt = profiles.load("vulkan-paravirt")
    result, report, err = _create(creator, tmp_path, ["pad=70000", "vk12.shaderFloat16"], simulate=paravirt)
    assert result == -3  # VK_ERROR_INITIALIZATION_FAILED
    assert [e for e in report.events if e.get("event") == "refused"] == []
    (ev,) = [e for e in report.events if e.get("event") == "chain_cut"]
    assert ev["query"] == "vkCreateDevice" and ev["limit"] == 65536
    assert ev["result"] == "VK_ERROR_INITIALIZATION_FAILED"
    assert "vkCreateDevice: pNext chain longer than 65536 structures (or a loop)" in err


def test_a_query_chain_past_the_limit_is_reported_as_cut(vk_build, stock_probe, creator, tmp_path):
    # A loop would hang the driver before the layer sees it, so the query side
    # is tested with a finite chain past the limit.
    _with(stock_probe, "shaderFloat16")
    st = tmp_path / "status.jsonl"
    env = dict(os.environ)
    env.update(vulkan.launch_env(None, _profile("lower", {"shaderFloat16": False}), st, tmp_path))
    proc = subprocess.run([str(creator), "query", "pad=70000", "vk12.shaderFloat16"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (ev,) = [e for e in status.read(st).events if e.get("event") == "chain_cut"]
    assert ev["query"] == "vkGetPhysicalDeviceFeatures2" and "result" not in ev
    assert "structures after the limit keep their stock answers" in proc.stderr
