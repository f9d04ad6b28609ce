"""The Vulkan layer through the real loader and the machine's real driver (lavapipe in CI)."""

from __future__ import annotations

import json
import re
import os
import subprocess
from pathlib import Path

import pytest

from capshim import profiles, status
from capshim.backends import vulkan
from capshim.profiles import ondevice
from capshim.profiles.catalog import VULKAN_KEYS
from tests.conftest import run_capshim

PARAVIRT = profiles.load("vulkan-paravirt")


def lowered(kind, stock, cfg):
    if kind == "bool":
        return bool(stock) and bool(cfg)
    if kind == "flags":
        return stock & cfg
    return min(stock, cfg)


def test_probe_reports_every_catalog_key_in_order(stock_probe):
    assert list(stock_probe["capabilities"]) == list(VULKAN_KEYS)
    assert stock_probe["device"]["name"]
    assert stock_probe["extensions"]
    assert all(s["state"] == "absent" for s in stock_probe["shim"].values())


def test_simulate_changes_exactly_what_the_profile_says(stock_probe):
    sim = vulkan.probe(simulate=PARAVIRT)
    assert sim["shim"][vulkan.LAYER_DEVICE]["state"] == "active"
    assert sim["shim"][vulkan.LAYER_APP]["state"] == "absent"
    changed = 0
    for key, stock in stock_probe["capabilities"].items():
        got = sim["capabilities"][key]
        if key in PARAVIRT.capabilities and stock is not None:
            want = lowered(VULKAN_KEYS[key], stock, PARAVIRT.capabilities[key])
            assert got == want, key
            changed += got != stock
        else:
            assert got == stock, key
    assert changed >= 2  # shared memory and fp16 at least, on any device
    for ext, spec in stock_probe["extensions"].items():
        if ext in PARAVIRT.extensions:
            assert ext not in sim["extensions"]
        else:
            assert sim["extensions"][ext] == spec
    assert set(sim["extensions"]) <= set(stock_probe["extensions"])


def test_simulate_then_restore_gives_the_stock_answers(stock_probe):
    restore = ondevice.restore_profile(stock_probe, PARAVIRT)
    assert restore.direction == "raise"
    both = vulkan.probe(profile=restore, simulate=PARAVIRT)
    assert both["shim"][vulkan.LAYER_APP]["state"] == "active"
    assert both["shim"][vulkan.LAYER_DEVICE]["state"] == "active"
    assert both["capabilities"] == stock_probe["capabilities"]
    assert both["extensions"] == stock_probe["extensions"]


def _raw_env(vk_build, tmp_path, config_text, role="device"):
    cfg = tmp_path / f"{role}.cfg"
    cfg.write_text(config_text)
    layer, var = vulkan.ROLES[role]
    env = dict(os.environ)
    env.update({
        "VK_ADD_LAYER_PATH": str(vk_build.manifest_dirs[role]),
        "VK_INSTANCE_LAYERS": layer,
        var: str(cfg),
        "CAPSHIM_STATUS_FILE": str(tmp_path / "status.jsonl"),
    })
    return env


def _probe_raw(vk_build, env, *args):
    proc = subprocess.run([str(vk_build.probe), *args], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.parametrize("config, reason", [
    ("direction=lower\nmaxComputeSharedMemorySize=1009x\n", "not a whole number"),
    ("direction=lower\nmaxComputeSharedMemorySize=\n", "not a whole number"),
    ("direction=lower\nmaxComputeSharedMemorySize=-1\n", "not a whole number"),
    ("direction=lower\nmaxComputeSharedMemorySize= 16384\n", "only printable ASCII"),
    ("direction=lower\nmaxComputeSharedMemorySize=0x100000000\n", "does not fit in 32 bits"),
    ("direction=lower\nmaxComputeSharedMemorySize=99999999999999999999999\n", "not a whole number"),
    ("direction=lower\nshaderFloat16=2\n", "not 0 or 1"),
    ("direction=lower\nnoSuchKey=1\n", "unknown key"),
    ("maxComputeSharedMemorySize=16384\n", "'direction' is missing"),
    ("direction=sideways\n", "not 'raise' or 'lower'"),
    ("direction=lower\nshaderFloat16=0\nshaderFloat16=0\n", "given twice"),
    ("direction=lower\nextension.not-an-ext=0\n", "not an extension name"),
    ("direction=lower\r\nshaderFloat16=0\n", "only printable ASCII"),
    ("direction=lower\nshaderFloat16\n", "expected KEY=VALUE"),
])
def test_malformed_raw_config_stays_stock_and_is_invalid(vk_build, stock_probe, tmp_path, config, reason):
    env = _raw_env(vk_build, tmp_path, config)
    data, stderr = _probe_raw(vk_build, env)
    assert data["capabilities"] == stock_probe["capabilities"]
    assert data["extensions"] == stock_probe["extensions"]
    report = status.read(tmp_path / "status.jsonl")
    state = status.classify(report, vulkan.LAYER_DEVICE)
    assert state.state == "invalid"
    assert reason in state.reason
    assert "invalid configuration" in stderr


def test_valid_raw_config_hex_and_octal(vk_build, stock_probe, tmp_path):
    env = _raw_env(vk_build, tmp_path, "# comment with spaces\n\ndirection=lower\nmaxComputeSharedMemorySize=0x5000\n"
                                         "maxComputeWorkGroupInvocations=0200\n")
    data, _ = _probe_raw(vk_build, env)
    assert data["capabilities"]["maxComputeSharedMemorySize"] == min(0x5000, stock_probe["capabilities"]["maxComputeSharedMemorySize"])
    assert data["capabilities"]["maxComputeWorkGroupInvocations"] == 128
    assert status.classify(status.read(tmp_path / "status.jsonl"), vulkan.LAYER_DEVICE).state == "active"


def test_missing_config_variable_is_invalid(vk_build, stock_probe, tmp_path):
    env = _raw_env(vk_build, tmp_path, "direction=lower\n")
    env.pop("CAPSHIM_VK_DEVICE_CONFIG")
    data, _ = _probe_raw(vk_build, env)
    assert data["capabilities"] == stock_probe["capabilities"]
    state = status.classify(status.read(tmp_path / "status.jsonl"), vulkan.LAYER_DEVICE)
    assert state.state == "invalid" and "CAPSHIM_VK_DEVICE_CONFIG is not set" in state.reason


def test_status_records_changes_with_stock_and_reported(vk_build, stock_probe, tmp_path):
    env = _raw_env(vk_build, tmp_path, "direction=lower\nmaxComputeSharedMemorySize=20480\n")
    _probe_raw(vk_build, env)
    changes = status.read(tmp_path / "status.jsonl").changes(vulkan.LAYER_DEVICE)
    stock = stock_probe["capabilities"]["maxComputeSharedMemorySize"]
    assert {"query": "vkGetPhysicalDeviceProperties2", "key": "maxComputeSharedMemorySize",
            "stock": stock, "reported": 20480}.items() <= changes[-1].items() or any(
        c["query"] == "vkGetPhysicalDeviceProperties2" and c["stock"] == stock and c["reported"] == 20480
        for c in changes)


def test_raise_never_lowers_and_lower_never_raises(vk_build, stock_probe, tmp_path):
    stock_mem = stock_probe["capabilities"]["maxComputeSharedMemorySize"]
    env = _raw_env(vk_build, tmp_path, f"direction=raise\nmaxComputeSharedMemorySize={stock_mem // 2}\n", "app")
    data, _ = _probe_raw(vk_build, env)
    assert data["capabilities"]["maxComputeSharedMemorySize"] == stock_mem
    env = _raw_env(vk_build, tmp_path, f"direction=lower\nmaxComputeSharedMemorySize={stock_mem * 2}\n")
    data, _ = _probe_raw(vk_build, env)
    assert data["capabilities"]["maxComputeSharedMemorySize"] == stock_mem


def test_readded_extension_works_when_enabled(stock_probe, tmp_path):
    # An extension the device role hides must work again when the app role re-adds it,
    # because the driver below really has it.
    ext = next(e for e in ("VK_KHR_8bit_storage", "VK_KHR_16bit_storage", "VK_KHR_shader_float16_int8")
               if e in stock_probe["extensions"])
    hide = profiles.parse(f'name="hide"\napi="vulkan"\ndirection="lower"\nversion=1\ndescription="d"\n'
                          f"[extensions]\n{ext} = false\n", "hide.toml")
    add = profiles.parse(f'name="add"\napi="vulkan"\ndirection="raise"\nversion=1\ndescription="d"\n'
                         f"[extensions]\n{ext} = {stock_probe['extensions'][ext]}\n", "add.toml")
    hidden = vulkan.probe(simulate=hide, create_device=[ext])
    assert ext not in hidden["extensions"]
    assert hidden["create_device"]["result"] == -7  # VK_ERROR_EXTENSION_NOT_PRESENT
    back = vulkan.probe(simulate=hide, profile=add, create_device=[ext])
    assert back["extensions"][ext] == stock_probe["extensions"][ext]
    assert back["create_device"]["result"] == 0  # VK_SUCCESS


def test_layer_that_cannot_load_is_reported(vk_build, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    manifest = json.loads((vk_build.manifest_dirs["app"] / f"{vulkan.LAYER_APP}.json").read_text())
    manifest["layer"]["library_path"] = str(tmp_path / "missing" / "libcapshim_vulkan.so")
    (broken / "m.json").write_text(json.dumps(manifest))
    env = _raw_env(vk_build, tmp_path, "direction=raise\n", "app")
    env["VK_ADD_LAYER_PATH"] = str(broken)
    proc = subprocess.run([str(vk_build.probe)], env=env, capture_output=True, text=True, timeout=120)
    report = status.read(tmp_path / "status.jsonl")
    state = status.classify(report, vulkan.LAYER_APP)
    assert state.state == "inert" and "never loaded" in state.reason
    # the loader either skipped the layer (probe ran stock) or refused the instance: both are reported
    assert proc.returncode in (0, 1)


@pytest.mark.slow
def test_run_strict_exits_3_when_the_layer_stays_inert():
    r = run_capshim("run", "--strict", "--simulate", "vulkan-paravirt", "--", "true")
    assert r.returncode == 3, r.stderr
    assert "VK_LAYER_CAPSHIM_device stayed inert" in r.stderr


@pytest.mark.slow
def test_run_passes_the_exit_code_and_keeps_stdout_clean(vk_build, tmp_path):
    r = run_capshim("run", "--simulate", "vulkan-paravirt", "--", "sh", "-c", "exit 7")
    assert r.returncode == 7
    r = run_capshim("run", "--simulate", "vulkan-paravirt", "--status-file", str(tmp_path / "s.jsonl"), "--",
                    str(vk_build.probe))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)  # nothing but the probe's JSON on stdout
    assert data["capabilities"]["shaderFloat16"] is False
    banners = [line for line in r.stderr.splitlines() if line.startswith("capshim-vulkan:")]
    assert len(banners) == 1 and "VK_LAYER_CAPSHIM_device active" in banners[0]
    assert status.classify(status.read(tmp_path / "s.jsonl"), vulkan.LAYER_DEVICE).state == "active"
    r = run_capshim("run", "--quiet", "--simulate", "vulkan-paravirt", "--", str(vk_build.probe))
    assert not [line for line in r.stderr.splitlines() if line.startswith("capshim-vulkan:")]


@pytest.mark.slow
def test_run_bad_usage_exits_2():
    r = run_capshim("run", "--simulate", "no-such-profile", "--", "true")
    assert r.returncode == 2 and "--simulate" in r.stderr and "no such profile" in r.stderr
    r = run_capshim("run", "--simulate", "metal-apple9", "--", "true")
    assert r.returncode == 2 and "only the Vulkan layer" in r.stderr
    r = run_capshim("run", "--simulate", "vulkan-paravirt", "--", "/no/such/program")
    assert r.returncode == 2 and "cannot run" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("inherit", [False, True])
def test_children_are_stock_unless_inherit(vk_build, stock_probe, tmp_path, inherit):
    out = tmp_path / "child.json"
    args = ["run", "--simulate", "vulkan-paravirt"] + (["--inherit"] if inherit else []) + [
        "--", "sh", "-c", f'"{vk_build.probe}" > "{out}"']
    r = run_capshim(*args)
    assert r.returncode == 0, r.stderr
    child = json.loads(out.read_text())
    stock_mem = stock_probe["capabilities"]["maxComputeSharedMemorySize"]
    if inherit:
        assert child["capabilities"]["maxComputeSharedMemorySize"] == min(stock_mem, PARAVIRT.capabilities["maxComputeSharedMemorySize"])
        assert child["capabilities"]["shaderFloat16"] is False
    else:
        assert child["capabilities"] == stock_probe["capabilities"]


@pytest.mark.slow
def test_probe_cli_json_and_compare():
    r = run_capshim("probe", "--api", "vulkan", "--json", "--simulate", "vulkan-paravirt")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["shim"][vulkan.LAYER_DEVICE]["state"] == "active"
    r = run_capshim("probe", "--compare", "--json", "--simulate", "vulkan-paravirt")
    diff = json.loads(r.stdout)["differences"]
    assert diff["shaderFloat16"] == [True, False]
    r = run_capshim("probe", "--compare", "--simulate", "vulkan-paravirt")
    assert "maxComputeSharedMemorySize" in r.stdout and str(PARAVIRT.capabilities["maxComputeSharedMemorySize"]) in r.stdout
    r = run_capshim("probe", "--compare")
    assert r.returncode == 2 and "--compare needs" in r.stderr


VALIDATION = Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")


@pytest.mark.parametrize("where", ["below", "above"])
def test_layer_is_clean_under_khronos_validation(vk_build, stock_probe, tmp_path, where):
    assert VALIDATION.is_file(), "install vulkan-validationlayers (./setup.sh --dev does)"
    restore = ondevice.restore_profile(stock_probe, PARAVIRT)
    env = dict(os.environ)
    env.update(vulkan.launch_env(restore, PARAVIRT, tmp_path / "status.jsonl", tmp_path))
    ours = env["VK_ADD_LAYER_PATH"]
    # Debian's loader orders layers by manifest discovery; newer ones by VK_INSTANCE_LAYERS.
    if where == "above":
        env["VK_ADD_LAYER_PATH"] = f"{VALIDATION.parent}:{ours}"
        env["VK_INSTANCE_LAYERS"] = "VK_LAYER_KHRONOS_validation:" + env["VK_INSTANCE_LAYERS"]
    else:
        env["VK_ADD_LAYER_PATH"] = f"{ours}:{VALIDATION.parent}"
        env["VK_INSTANCE_LAYERS"] = env["VK_INSTANCE_LAYERS"] + ":VK_LAYER_KHRONOS_validation"
    env["VK_LOADER_DEBUG"] = "layer"
    proc = subprocess.run([str(vk_build.probe), "--create-device", "VK_KHR_8bit_storage"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert 'Insert instance layer "VK_LAYER_KHRONOS_validation"' in proc.stderr
    assert "Validation Error" not in proc.stderr and "Validation Error" not in proc.stdout, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["create_device"]["result"] == 0
    assert status.classify(status.read(tmp_path / "status.jsonl"), vulkan.LAYER_APP).state == "active"
    # The same setup does report a real error (VK_KHR_swapchain without the instance
    # extension VK_KHR_surface it requires): the check above can fail.
    bad = subprocess.run([str(vk_build.probe), "--create-device", "VK_KHR_swapchain"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert "Validation Error" in bad.stderr + bad.stdout


@pytest.mark.slow
def test_run_reports_child_only_use_and_a_missing_status_folder(vk_build, tmp_path):
    r = run_capshim("run", "--simulate", "vulkan-paravirt", "--", "sh", "-c", f'"{vk_build.probe}" >/dev/null')
    assert r.returncode == 0
    assert "only child processes used the GPU API" in r.stderr and "--inherit" in r.stderr
    r = run_capshim("run", "--status-file", str(tmp_path / "no" / "s.jsonl"), "--simulate", "vulkan-paravirt", "--",
                    "true")
    assert r.returncode == 0 and (tmp_path / "no" / "s.jsonl").is_file()  # the folder is created


def test_beyond_device_names_what_a_raise_profile_invents(stock_probe):
    mem = stock_probe["capabilities"]["maxComputeSharedMemorySize"]
    p = profiles.parse(f'name="x"\napi="vulkan"\ndirection="raise"\nversion=1\ndescription="d"\n'
                       f"[capabilities]\nmaxComputeSharedMemorySize = {mem * 2}\n"
                       f"[extensions]\nVK_FOO_bar = 1\n", "x.toml")
    over = ondevice.beyond_device(p, stock_probe)
    assert [str(b) for b in over] == [f"maxComputeSharedMemorySize {mem * 2} (device: {mem})",
                                      "extension VK_FOO_bar 1 (the device does not have it)"]
    assert [(b.key, b.what, b.device, b.reported) for b in over] == [
        ("maxComputeSharedMemorySize", "capability", mem, mem * 2), ("VK_FOO_bar", "extension", None, 1)]
    assert ondevice.beyond_device(p, stock_probe, "dropped")[1].note == "dropped"
    assert ondevice.beyond_device(ondevice.restore_profile(stock_probe, PARAVIRT), stock_probe) == []
    assert ondevice.beyond_device(PARAVIRT, stock_probe) == []  # a lower profile never goes beyond


@pytest.mark.slow
def test_layer_is_clean_under_valgrind_memcheck(vk_build, stock_probe, tmp_path):
    # Both roles, every hooked query and a device creation, under memcheck. glibc's
    # loader has reports of its own (stock runs show them too): none may come from us.
    restore = ondevice.restore_profile(stock_probe, PARAVIRT)
    env = dict(os.environ)
    env.update(vulkan.launch_env(restore, PARAVIRT, tmp_path / "status.jsonl", tmp_path, quiet=True))
    proc = subprocess.run(["valgrind", "--leak-check=no", "--num-callers=40", str(vk_build.probe),
                           "--create-device", "VK_KHR_8bit_storage"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["capabilities"] == stock_probe["capabilities"]
    blocks = proc.stderr.split("\n==")
    ours = [b for b in blocks if "libcapshim_vulkan" in b or re.search(r"\((layer\w*|config)\.c:", b)]
    assert ours == [], "\n".join(ours)[:3000]
    assert status.classify(status.read(tmp_path / "status.jsonl"), vulkan.LAYER_APP).state == "active"


@pytest.mark.slow
def test_verify_checks_the_built_layer(vk_build):
    checks = {c["check"]: c for c in vulkan.verify()}
    assert [c for c in checks.values() if c["status"] != "passed"] == []
    assert set(checks) == {"vulkan: architecture", "vulkan: exports", "vulkan: manifests", "vulkan: SHA256SUMS",
                           "vulkan: stock probe", "vulkan: answers change with a profile",
                           "vulkan: stock with a broken configuration", "vulkan: loader settings"}
    sums = vk_build.dir / "SHA256SUMS"
    good = sums.read_text()
    try:
        sums.write_text(good.replace(good[:8], "00000000", 1))
        r = run_capshim("verify", "--api", "vulkan", "--json")
        assert r.returncode == 1
        failed = [c["check"] for c in json.loads(r.stdout) if c["status"] == "failed"]
        assert failed == ["vulkan: SHA256SUMS"]
    finally:
        sums.write_text(good)


@pytest.mark.slow
def test_verify_names_the_check_that_failed(vk_build, monkeypatch):
    from capshim.errors import CapshimError

    real = vulkan.probe

    def broken_only(*args, **kw):
        if kw.get("extra_env"):
            raise CapshimError("the probe died")
        return real(*args, **kw)

    monkeypatch.setattr(vulkan, "probe", broken_only)
    checks = {c["check"]: c for c in vulkan.verify()}
    assert checks["vulkan: answers change with a profile"]["status"] == "passed"
    assert checks["vulkan: stock with a broken configuration"] == {
        "check": "vulkan: stock with a broken configuration", "status": "failed", "detail": "the probe died"}

    def no_driver(*args, **kw):
        raise CapshimError("no Vulkan driver")

    monkeypatch.setattr(vulkan, "probe", no_driver)
    checks = {c["check"]: c for c in vulkan.verify()}
    failed = {k: c["detail"] for k, c in checks.items() if c["status"] == "failed"}
    assert failed == {"vulkan: stock probe": "no Vulkan driver"}


@pytest.mark.slow
def test_a_reused_status_file_holds_only_this_runs_events(vk_build, tmp_path):
    sf = str(tmp_path / "s.jsonl")
    r = run_capshim("run", "--strict", "--status-file", sf, "--simulate", "vulkan-paravirt", "--", str(vk_build.probe))
    assert r.returncode == 0, r.stderr
    r = run_capshim("run", "--strict", "--status-file", sf, "--simulate", "vulkan-paravirt", "--", "true")
    assert r.returncode == 2 and "--force" in r.stderr  # an existing file is not emptied silently
    r = run_capshim("run", "--strict", "--force", "--status-file", sf, "--simulate", "vulkan-paravirt", "--", "true")
    assert r.returncode == 3  # the first run's "active" events must not count


def test_lower_limit_keys_follow_their_kind(stock_probe):
    # minSubgroupSize is a lower limit (less is stronger): a lower profile may raise it
    # but can never report a smaller minimum than the device has (config.c capshim_answer).
    dev_min = stock_probe["capabilities"]["minSubgroupSize"]
    if dev_min is None:
        pytest.fail("the device reports no minSubgroupSize (VK_EXT_subgroup_size_control / 1.3 expected on lavapipe)")
    mk = lambda v: profiles.parse(f'name="m"\napi="vulkan"\ndirection="lower"\nversion=1\ndescription="d"\n'
                                  f"[capabilities]\nminSubgroupSize = {v}\n", "m.toml")
    if dev_min > 1:
        stronger = vulkan.probe(simulate=mk(dev_min // 2))
        assert stronger["capabilities"]["minSubgroupSize"] == dev_min  # no claim of more capability
    weaker = vulkan.probe(simulate=mk(dev_min * 2))
    assert weaker["capabilities"]["minSubgroupSize"] == dev_min * 2
