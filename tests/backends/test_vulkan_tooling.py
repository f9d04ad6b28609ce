"""VK_EXT_tooling_info (issue 21, item 4): each active role of the layer reports itself as a
tool through vkGetPhysicalDeviceToolProperties(EXT), ahead of the tools below it, with the
spec's two-call idiom (a short array gives VK_INCOMPLETE).

Slow tests run tests/native/vk_tools.c through the real loader on the machine's driver
(lavapipe in CI) with the layer enabled by ``capshim run``; fast tests check the manifest
and the configuration that carry the facts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from capshim import __version__, profiles
from capshim.backends import vulkan
from capshim.native.build import run_compiler
from tests.conftest import run_capshim

SOURCE = Path(__file__).resolve().parents[1] / "native" / "vk_tools.c"
VK_INCOMPLETE = 5
MODIFYING_FEATURES = 0x10  # VK_TOOL_PURPOSE_MODIFYING_FEATURES_BIT (vulkan_core.h)
VALIDATION = Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")


def _lower(name: str = "t-lower") -> profiles.Profile:
    return profiles.parse(f'name="{name}"\napi="vulkan"\ndirection="lower"\nversion=1\ndescription="d"\n'
                          "[capabilities]\nmaxComputeSharedMemorySize = 16384\n", f"{name}.toml")


# ---- fast: the facts the layer is handed ------------------------------------------

def test_manifest_lists_tooling_info_as_a_device_extension_of_each_role():
    # The loader answers vkEnumerateDeviceExtensionProperties(pLayerName) from the manifest.
    for role, (layer, _var) in vulkan.ROLES.items():
        m = vulkan._manifest(layer, role)
        assert m["layer"]["device_extensions"] == [
            {"name": "VK_EXT_tooling_info", "spec_version": "1",
             "entrypoints": ["vkGetPhysicalDeviceToolPropertiesEXT"]}]
        assert "instance_extensions" not in m["layer"]  # a device extension, not an instance one


def test_configuration_names_the_profile_for_the_tool_description():
    text = vulkan.render_config(_lower("my-gpu"))
    assert "\nprofile=my-gpu\n" in text and text.startswith("# capshim profile my-gpu")


# ---- slow: through the loader -------------------------------------------------------

@pytest.fixture(scope="module")
def tools_prog(tmp_path_factory):
    out = tmp_path_factory.mktemp("vktools") / "vk_tools"
    run_compiler(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", str(SOURCE), "-lvulkan", "-o", str(out)])
    return out


def _profile_file(tmp_path: Path, name: str, direction: str) -> Path:
    body = "maxComputeSharedMemorySize = 16384" if direction == "lower" else "maxComputeSharedMemorySize = 65536"
    p = tmp_path / f"{name}.toml"
    p.write_text(f'name="{name}"\napi="vulkan"\ndirection="{direction}"\nversion=1\ndescription="d"\n'
                 f"[capabilities]\n{body}\n")
    return p


def _tools(prog, *flags: str, env: dict | None = None) -> dict:
    r = run_capshim("run", "--quiet", *flags, "--", str(prog), env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_device_role_reports_itself_with_the_profile(vk_build, tools_prog, tmp_path):
    d = _tools(tools_prog, "--simulate", str(_profile_file(tmp_path, "sim-a", "lower")))
    mine = [t for t in d["tools"] if t["layer"] == vulkan.LAYER_DEVICE]
    assert mine == [{"name": "capshim device role", "version": __version__, "purposes": MODIFYING_FEATURES,
                     "description": "capshim simulated device, profile sim-a (lower): answers and vkCreateDevice "
                                    "as that device",
                     "layer": vulkan.LAYER_DEVICE, "stype_kept": True}]
    assert d["ext_count"] == d["count"]  # the EXT alias answers the same list


@pytest.mark.slow
def test_both_roles_app_first_and_the_count_idiom(vk_build, tools_prog, tmp_path):
    d = _tools(tools_prog, "--profile", str(_profile_file(tmp_path, "app-b", "raise")),
               "--simulate", str(_profile_file(tmp_path, "sim-b", "lower")))
    names = [t["name"] for t in d["tools"]]
    # The app role passes the device role's tool (the next layer's) through, after its own.
    assert names[:2] == ["capshim app role", "capshim device role"]
    assert d["count"] == len(d["tools"]) and d["full_result"] == 0
    assert "profile app-b (raise)" in d["tools"][0]["description"]
    # Room for one fewer: VK_INCOMPLETE, count overwritten with the number written.
    assert d["short"] == {"asked": d["count"] - 1, "result": VK_INCOMPLETE, "written": d["count"] - 1,
                          "first": "capshim app role"}


@pytest.mark.slow
def test_inactive_role_reports_no_tool(vk_build, tools_prog, tmp_path):
    # A configuration the layer rejects leaves every answer stock: no tool modifies anything.
    bad = tmp_path / "bad.cfg"
    bad.write_text("direction=lower\nmaxComputeSharedMemorySize=1009x\n")
    env = {"CAPSHIM_VK_DEVICE_CONFIG": str(bad), "VK_ADD_LAYER_PATH": str(vk_build.manifest_dirs["device"]),
           "VK_INSTANCE_LAYERS": vulkan.LAYER_DEVICE, "CAPSHIM_QUIET": "1"}
    proc = subprocess.run([str(tools_prog)], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert all(t["layer"] != vulkan.LAYER_DEVICE for t in d["tools"])


@pytest.mark.slow
def test_other_layers_tools_pass_through(vk_build, tools_prog, tmp_path):
    if not VALIDATION.is_file():
        pytest.fail("needs the Khronos validation layer, a second layer that reports a tool: install "
                    "vulkan-validationlayers (./setup.sh --dev does)")
    d = _tools(tools_prog, "--simulate", str(_profile_file(tmp_path, "sim-c", "lower")),
               env={"VK_INSTANCE_LAYERS": "VK_LAYER_KHRONOS_validation"})
    # The validation layer (1.3.239) answers the EXT entry point only; capshim passes it on.
    assert d["ext_count"] >= 2


@pytest.mark.slow
def test_vulkaninfo_shows_the_tool(vk_build, tmp_path):
    if shutil.which("vulkaninfo") is None:
        pytest.fail("vulkaninfo is not installed (setup.sh installs vulkan-tools)")
    r = run_capshim("run", "--quiet", "--simulate", str(_profile_file(tmp_path, "sim-d", "lower")), "--",
                    "vulkaninfo", "--show-tool-props", timeout=120)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("Tooling Info:", 1)[1]
    assert "name             = capshim device role" in section
    assert "TOOL_PURPOSE_MODIFYING_FEATURES_BIT" in section
    assert f"layer            = {vulkan.LAYER_DEVICE}" in section
