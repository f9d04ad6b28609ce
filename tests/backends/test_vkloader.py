"""The loader's other spellings (issue 20, deliverable 4): with the user's VK_LAYER_PATH,
VK_LOADER_LAYERS_DISABLE/ENABLE, VK_INSTANCE_LAYERS or a Vulkan Configurator override layer,
capshim's layers still load, or run, probe and verify name the setting and what to do.
Through the real loader (Debian 12: 1.3.239) and lavapipe."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from capshim import profiles, status
from capshim.backends import vkloader, vulkan
from capshim.bench.runs import Launcher
from capshim.profiles import ondevice
from tests.conftest import run_capshim

PARAVIRT = profiles.load("vulkan-paravirt")
LAYERS = [vulkan.LAYER_APP, vulkan.LAYER_DEVICE]


# ---------- the loader's filter language and the variables capshim sets ----------

@pytest.mark.parametrize("value, layer, want", [
    ("~all~", "VK_LAYER_CAPSHIM_app", "~all~"),
    ("*", "VK_LAYER_CAPSHIM_app", "*"),
    ("**", "VK_LAYER_CAPSHIM_app", "**"),
    ("~explicit~", "VK_LAYER_CAPSHIM_app", "~explicit~"),
    ("~implicit~", "VK_LAYER_CAPSHIM_app", None),
    ("*capshim*", "VK_LAYER_CAPSHIM_app", "*capshim*"),          # case-insensitive substring
    ("VK_LAYER_CAPSHIM*", "VK_LAYER_CAPSHIM_device", "VK_LAYER_CAPSHIM*"),
    ("*_device", "VK_LAYER_CAPSHIM_device", "*_device"),
    ("*_device", "VK_LAYER_CAPSHIM_app", None),
    ("*MESA*, vk_layer_capshim_app", "VK_LAYER_CAPSHIM_app", "vk_layer_capshim_app"),
    ("VK_LAYER_CAPSHIM", "VK_LAYER_CAPSHIM_app", None),           # a full name matches only itself
    ("", "VK_LAYER_CAPSHIM_app", None),
])
def test_filter_entries_select_layers_as_the_loader_does(value, layer, want):
    assert vkloader.filter_match(value, layer) == want


def test_layer_env_puts_capshim_first_and_keeps_the_users_entries():
    folders, env = ["/c/app", "/c/device"], {"VK_ADD_LAYER_PATH": "/u/a:/c/app", "VK_INSTANCE_LAYERS": "VK_LAYER_x"}
    got = vkloader.layer_env(env, folders, LAYERS)
    assert got == {"VK_ADD_LAYER_PATH": "/c/app:/c/device:/u/a",
                   "VK_INSTANCE_LAYERS": f"{LAYERS[0]}:{LAYERS[1]}:VK_LAYER_x"}
    got = vkloader.layer_env({"VK_LAYER_PATH": "/u/sdk/explicit_layer.d"}, folders, LAYERS)
    assert got["VK_LAYER_PATH"] == "/c/app:/c/device:/u/sdk/explicit_layer.d"
    assert vkloader.layer_env({"VK_LAYER_PATH": ""}, folders, LAYERS)["VK_LAYER_PATH"] == "/c/app:/c/device"
    got = vkloader.layer_env({"VK_LOADER_LAYERS_DISABLE": "*CAPSHIM*", "VK_LOADER_LAYERS_ENABLE": "*valid*"},
                             folders, LAYERS)
    assert got["VK_LOADER_LAYERS_ENABLE"] == f"{LAYERS[0]},{LAYERS[1]},*valid*"
    assert "VK_LOADER_LAYERS_ENABLE" not in vkloader.layer_env({"VK_LOADER_LAYERS_DISABLE": "*MESA*"}, folders, LAYERS)


def test_a_stock_bench_arm_gets_the_users_own_loader_lists(monkeypatch):
    monkeypatch.setenv("VK_LAYER_PATH", "/u/sdk")
    monkeypatch.setenv("VK_LOADER_LAYERS_ENABLE", "*valid*")
    assert Launcher.neutral("VK_LAYER_PATH") == "/u/sdk"
    assert Launcher.neutral("VK_LOADER_LAYERS_ENABLE") == "*valid*"


# ---------- through the real loader: the user's variables, one case each ----------

def _raw_state(vk_build, tmp_path, extra):
    """The device role enabled the way capshim did before (VK_ADD_LAYER_PATH + VK_INSTANCE_LAYERS only)."""
    cfg = tmp_path / "d.cfg"
    cfg.write_text("direction=lower\nmaxComputeSharedMemorySize=16384\n")
    env = dict(os.environ, **extra)
    env.update(VK_ADD_LAYER_PATH=str(vk_build.manifest_dirs["device"]), CAPSHIM_VK_DEVICE_CONFIG=str(cfg),
               VK_INSTANCE_LAYERS=":".join([vulkan.LAYER_DEVICE, *[extra.get("VK_INSTANCE_LAYERS", "")][:1]]),
               CAPSHIM_STATUS_FILE=str(tmp_path / "raw.jsonl"))
    subprocess.run([str(vk_build.probe)], env=env, capture_output=True, timeout=120)
    return status.classify(status.read(tmp_path / "raw.jsonl"), vulkan.LAYER_DEVICE).state


USER_SETTINGS = {
    "VK_LAYER_PATH elsewhere": ({"VK_LAYER_PATH": "/usr/share/vulkan/explicit_layer.d"}, True),
    "VK_LAYER_PATH empty": ({"VK_LAYER_PATH": ""}, True),
    "VK_LOADER_LAYERS_DISABLE ~all~": ({"VK_LOADER_LAYERS_DISABLE": "~all~"}, True),
    "VK_LOADER_LAYERS_DISABLE ~explicit~": ({"VK_LOADER_LAYERS_DISABLE": "~explicit~"}, True),
    "VK_LOADER_LAYERS_DISABLE glob": ({"VK_LOADER_LAYERS_DISABLE": "*MESA*,*capshim*"}, True),
    "VK_LOADER_LAYERS_DISABLE and ENABLE": ({"VK_LOADER_LAYERS_DISABLE": "*", "VK_LOADER_LAYERS_ENABLE": "*nullhw*"},
                                           True),
    "VK_LOADER_LAYERS_ENABLE": ({"VK_LOADER_LAYERS_ENABLE": "*nullhw*,*validation*"}, False),
    "VK_INSTANCE_LAYERS of the user": ({"VK_INSTANCE_LAYERS": "VK_LAYER_MESA_overlay"}, False),
}


@pytest.mark.parametrize("case", list(USER_SETTINGS))
def test_the_layers_load_whatever_the_users_loader_variables(vk_build, stock_probe, tmp_path, monkeypatch, case):
    settings, hides = USER_SETTINGS[case]
    # the loader fact each workaround rests on: the plain spelling leaves the layer inert
    assert (_raw_state(vk_build, tmp_path, settings) == "inert") == hides
    for k, v in settings.items():
        monkeypatch.setenv(k, v)
    got = vulkan.probe(simulate=PARAVIRT)
    assert got["shim"][vulkan.LAYER_DEVICE]["state"] == "active", got["shim"]
    dev = stock_probe["capabilities"]["maxComputeSharedMemorySize"]
    assert got["capabilities"]["maxComputeSharedMemorySize"] == min(dev, PARAVIRT.capabilities[
        "maxComputeSharedMemorySize"])


def test_both_roles_keep_their_order_under_vk_layer_path(stock_probe, monkeypatch):
    monkeypatch.setenv("VK_LAYER_PATH", "/usr/share/vulkan/explicit_layer.d")
    both = vulkan.probe(profile=ondevice.restore_profile(stock_probe, PARAVIRT), simulate=PARAVIRT)
    assert [both["shim"][n]["state"] for n in LAYERS] == ["active", "active"], both["shim"]
    assert both["capabilities"] == stock_probe["capabilities"]


def test_run_works_with_the_sdk_setup_env_vk_layer_path(vk_build, stock_probe, tmp_path):
    out = tmp_path / "probe.json"
    r = run_capshim("run", "--strict", "--simulate", "vulkan-paravirt", "--", "sh", "-c",
                    f'exec "{vk_build.probe}" > "{out}"', env={"VK_LAYER_PATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["capabilities"]["shaderFloat16"] is False


# ---------- what capshim cannot undo: named by run, probe and verify ----------

def _override(home: Path, **layer) -> Path:
    folder = home / "vulkan" / "implicit_layer.d"
    folder.mkdir(parents=True)
    doc = {"file_format_version": "1.1.2",
           "layer": {"name": "VK_LAYER_LUNARG_override", "type": "GLOBAL", "api_version": "1.3.239",
                     "implementation_version": "1", "description": "vkconfig", "component_layers": [],
                     "disable_environment": {"DISABLE_VK_LAYER_LUNARG_override": "1"}, **layer}}
    path = folder / "VkLayer_override.json"
    path.write_text(json.dumps(doc))
    return path


def test_an_override_layer_with_override_paths_is_named(vk_build, tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    path = _override(tmp_path, override_paths=[str(tmp_path / "elsewhere")])
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    got = vulkan.probe(simulate=PARAVIRT)["shim"][vulkan.LAYER_DEVICE]
    assert got["state"] == "inert"  # the real loader searched only the override's folder
    assert str(path) in got["reason"] and "override_paths" in got["reason"]
    assert "DISABLE_VK_LAYER_LUNARG_override=1" in got["reason"]
    r = run_capshim("run", "--strict", "--simulate", "vulkan-paravirt", "--", str(vk_build.probe))
    assert r.returncode == 3
    warned = [line for line in r.stderr.splitlines() if line.startswith("capshim: warning:") and "override" in line]
    assert len(warned) == 1 and str(path) in warned[0] and "close vkconfig" in warned[0]
    assert f"stayed inert: never loaded: the Vulkan Configurator's override layer {path}" in r.stderr
    # its own disable variable turns it off: the layer loads again
    monkeypatch.setenv("DISABLE_VK_LAYER_LUNARG_override", "1")
    assert vulkan.probe(simulate=PARAVIRT)["shim"][vulkan.LAYER_DEVICE]["state"] == "active"


def test_an_override_layer_that_blacklists_capshim_is_named(vk_build, tmp_path, monkeypatch):
    path = _override(tmp_path, blacklisted_layers=[vulkan.LAYER_DEVICE])
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    got = vulkan.probe(simulate=PARAVIRT)["shim"][vulkan.LAYER_DEVICE]
    assert got["state"] == "inert" and f"{path} blacklists {vulkan.LAYER_DEVICE}" in got["reason"]


def test_an_override_layer_for_other_programs_or_turned_off_is_not_a_problem(tmp_path):
    _override(tmp_path, override_paths=["/nowhere"], app_keys=["/usr/bin/other"])
    env = {"XDG_DATA_HOME": str(tmp_path), "HOME": "/nonexistent"}
    found = vkloader.problems(env, ["/c/app"], LAYERS)
    assert len(found) == 1 and "for /usr/bin/other" in found[0]
    assert vkloader.problems({**env, "DISABLE_VK_LAYER_LUNARG_override": "1"}, ["/c/app"], LAYERS) == []


def test_verify_names_the_loader_setting(vk_build, tmp_path):
    path = _override(tmp_path, override_paths=[str(tmp_path)])
    r = run_capshim("verify", "--api", "vulkan", "--json", env={"XDG_DATA_HOME": str(tmp_path)})
    assert r.returncode == 1
    check = {c["check"]: c for c in json.loads(r.stdout)}["vulkan: loader settings"]
    assert check["status"] == "failed" and str(path) in check["detail"]
    r = run_capshim("verify", "--api", "vulkan", "--json", env={"VK_LAYER_PATH": "/x", "VK_LOADER_LAYERS_DISABLE": "~all~"})
    checks = {c["check"]: c for c in json.loads(r.stdout)}
    assert r.returncode == 0, checks
    detail = checks["vulkan: loader settings"]["detail"]
    assert "VK_LAYER_PATH is set" in detail and "VK_LOADER_LAYERS_DISABLE entry '~all~'" in detail
    assert checks["vulkan: answers change with a profile"]["status"] == "passed"


def test_a_set_user_id_program_is_named(tmp_path, monkeypatch):
    exe = tmp_path / "suid"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o4755)
    monkeypatch.setattr(vkloader.os, "getuid", lambda: exe.stat().st_uid + 1)
    found = vkloader.problems({"HOME": "/nonexistent", "XDG_DATA_DIRS": str(tmp_path)}, ["/c"], LAYERS, str(exe))
    assert len(found) == 1 and f"{exe} is set-user-ID" in found[0] and "elevated privileges" in found[0]
    monkeypatch.setattr(vkloader.os, "getuid", lambda: exe.stat().st_uid)
    assert vkloader.problems({"HOME": "/nonexistent", "XDG_DATA_DIRS": str(tmp_path)}, ["/c"], LAYERS, str(exe)) == []


def test_bench_names_the_override_layer_before_the_first_run_and_in_the_summary(vk_build, tmp_path):
    path = _override(tmp_path / "home", override_paths=[str(tmp_path)])
    w = tmp_path / "w"
    w.write_text("#!/bin/sh\necho '[{\"n_prompt\":512,\"n_gen\":0,\"samples_ts\":[100]}]'\n")
    w.chmod(0o755)
    r = run_capshim("bench", "--arm", "native=", "--arm", "vm=simulate:vulkan-paravirt", "--baseline", "native",
                    "-r", "1", "--warmup", "0", "--out", str(tmp_path / "b"), "--", str(w),
                    env={"XDG_DATA_HOME": str(tmp_path / "home")}, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    line = f"capshim: warning: arm vm will stay inert: the Vulkan Configurator's override layer {path}"
    assert "".join(line.split()) in "".join((r.stderr + r.stdout).split()), r.stderr  # wrapped at 80 columns
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert any(str(path) in w["warning"] for w in summary["warnings"] if w["arm"] is None), summary["warnings"]
    assert summary["arms"]["vm"]["state"] == "inert"


def _settings(home: Path, layers: list[dict], wrap: str = "settings_array") -> Path:
    folder = home / "vulkan" / "loader_settings.d"
    folder.mkdir(parents=True)
    body = {"layers": layers, "stderr_log": ["error"]}
    doc = {"file_format_version": "1.0.1", wrap: [body] if wrap == "settings_array" else body}
    path = folder / "vk_loader_settings.json"
    path.write_text(json.dumps(doc))
    return path


VALIDATION_ON = {"control": "on", "name": "VK_LAYER_KHRONOS_validation",
                 "path": "/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"}


def test_a_loader_settings_file_is_named_only_for_a_loader_that_reads_it(tmp_path, monkeypatch):
    path = _settings(tmp_path, [VALIDATION_ON])
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert vkloader.settings_file(os.environ) == path
    # the Debian 12 loader (1.3.239) does not read the file: nothing to say, and the layer loads
    assert vkloader.loader_version() == (1, 3, 239)
    assert vkloader.settings_problem(os.environ, LAYERS) is None
    assert vulkan.probe(simulate=PARAVIRT)["shim"][vulkan.LAYER_DEVICE]["state"] == "active"
    # a loader of 1.3.261 or later keeps only the listed layers
    monkeypatch.setattr(vkloader, "loader_version", lambda: (1, 4, 304))
    got = vkloader.settings_problem(os.environ, LAYERS)
    assert got is not None and str(path) in got and "loader 1.4.304" in got and vulkan.LAYER_DEVICE in got
    assert str(path) in vulkan.loader_check()["detail"] and vulkan.loader_check()["status"] == "failed"


@pytest.mark.parametrize("layers, wrap, named", [
    ([VALIDATION_ON, {"control": "unordered_layer_location"}], "settings_array", False),
    ([], "settings_array", False),                                    # no list: the environment's layers load
    ([VALIDATION_ON], "settings", True),                              # the single-object spelling
    ([{"control": "auto", "name": vulkan.LAYER_APP}, {"control": "on", "name": vulkan.LAYER_DEVICE}], "settings",
     False),
    ([{"control": "off", "name": vulkan.LAYER_APP}, {"control": "on", "name": vulkan.LAYER_DEVICE}], "settings",
     True),
])
def test_which_loader_settings_files_drop_the_layers(tmp_path, monkeypatch, layers, wrap, named):
    _settings(tmp_path, layers, wrap)
    monkeypatch.setattr(vkloader, "loader_version", lambda: (1, 4, 304))
    env = {"XDG_DATA_HOME": str(tmp_path), "HOME": "/nonexistent", "XDG_DATA_DIRS": str(tmp_path / "none"),
           "XDG_CONFIG_DIRS": str(tmp_path / "none")}
    assert (vkloader.settings_problem(env, LAYERS) is not None) == named
