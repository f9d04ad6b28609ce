"""No silent no-ops (issue 20, deliverable 5): an answer a profile asks for that the layer will
not give on this device (clamped by the direction, or equal to the device's own) is a warning
line in `profile check --device`, `run` and `probe`, for raise and lower alike, from one rule
(:func:`capshim.profiles.checks.no_effect`)."""

from __future__ import annotations

import json

import pytest

from capshim import profiles
from capshim.bench import plan
from capshim.bench.arms import Arm
from capshim.profiles import ondevice
from tests.conftest import run_capshim

HEAD = 'name = "t"\napi = "vulkan"\ndirection = "{d}"\nversion = 1\ndescription = "test"\n'


def parse(direction, body, top=""):
    return profiles.parse(HEAD.format(d=direction) + top + body, "t.toml")


# the issue's device: min and max subgroup size 8
DEVICE = {"device": {"name": "gpu", "apiVersion": "1.3.280"},
          "capabilities": {"apiVersion": "1.3.280", "minSubgroupSize": 8, "maxSubgroupSize": 8, "subgroupSize": 8,
                           "maxComputeSharedMemorySize": 32768, "shaderFloat16": True, "shaderInt8": False,
                           "subgroupSupportedOperations": 0x0F, "cooperativeMatrix": None},
          "extensions": {"VK_KHR_16bit_storage": 1, "VK_KHR_shader_float16_int8": 1}}


def test_the_issues_example_a_raise_of_a_minimum_is_named():
    found = profiles.check_against_device(parse("raise", "[capabilities]\nminSubgroupSize = 16\n"), DEVICE)
    assert [(f.key, f.severity, f.noop, f.message) for f in found] == [
        ("minSubgroupSize", "warn", "clamped", "minSubgroupSize = 16: no effect: the device already answers 8; a "
         "raise profile never lowers (minSubgroupSize is a minimum: less is stronger)")]


@pytest.mark.parametrize("direction, body, top, want", [
    # clamped by the direction: the application sees another value than the profile's
    ("raise", "minSubgroupSize = 16", "", "clamped"),                      # min: less is stronger
    ("lower", "minSubgroupSize = 4", "", "clamped"),
    ("raise", "maxComputeSharedMemorySize = 16384", "", "clamped"),
    ("lower", "maxComputeSharedMemorySize = 65536", "", "clamped"),
    ("lower", 'apiVersion = "1.3.999"', "", "clamped"),
    ("raise", 'apiVersion = "1.1"', "", "clamped"),
    ("raise", "subgroupSupportedOperations = 0x03", "", "clamped"),       # bits the device has already
    ("lower", "subgroupSupportedOperations = 0xFF", "", "clamped"),
    # equal to the device's own answer
    ("raise", "shaderFloat16 = true", "", "same"),                         # a feature it has
    ("lower", "shaderInt8 = false", "", "same"),                           # a feature it lacks
    ("raise", "minSubgroupSize = 8", "", "same"),
    ("lower", "maxComputeSharedMemorySize = 32768", "", "same"),
    ("lower", "subgroupSize = 8", 'override_exact = ["subgroupSize"]\n', "same"),
    ("lower", "cooperativeMatrix = false", "", "same"),                   # not reported: nothing to lower
    # answers the layer changes: nothing to say
    ("raise", "minSubgroupSize = 4", "", None),
    ("lower", "minSubgroupSize = 8", "", "same"),
    ("raise", "maxComputeSharedMemorySize = 65536", "", None),
    ("lower", "maxComputeSharedMemorySize = 16384", "", None),
    ("raise", "shaderInt8 = true", "", None),
    ("lower", "shaderFloat16 = false", "", None),
    ("raise", "subgroupSupportedOperations = 0xFF", "", None),
])
def test_one_rule_for_both_directions(direction, body, top, want):
    p = parse(direction, f"[capabilities]\n{body}\n", top)
    got = profiles.no_effect(p, DEVICE)
    assert [f.noop for f in got] == ([want] if want else []), [f.message for f in got]


@pytest.mark.parametrize("direction, body, want", [
    ("raise", "VK_KHR_16bit_storage = 1", "extension VK_KHR_16bit_storage = 1: no effect: the device already "
                                          "lists it with spec version 1"),
    ("raise", "VK_KHR_16bit_storage = 3", "extension VK_KHR_16bit_storage = 3: the device lists it with spec "
                                          "version 1, which the layer keeps (a raise adds only extensions the "
                                          "device lacks)"),
    ("lower", "VK_KHR_cooperative_matrix = false", "extension VK_KHR_cooperative_matrix = false: no effect: the "
                                                   "device does not list it"),
])
def test_extensions_that_change_nothing(direction, body, want):
    got = profiles.no_effect(parse(direction, f"[extensions]\n{body}\n"), DEVICE)
    assert [f.message for f in got] == [want]
    assert profiles.no_effect(parse("raise", "[extensions]\nVK_EXT_new = 1\n"), DEVICE) == []


def test_answers_already_given_are_one_line_and_clamped_ones_one_line_each():
    p = parse("raise", "[capabilities]\nminSubgroupSize = 16\nmaxComputeSharedMemorySize = 16384\n"
                       "shaderFloat16 = true\n[extensions]\nVK_KHR_16bit_storage = 1\n")
    found = profiles.check_against_device(p, DEVICE)
    assert [f.key for f in found] == ["minSubgroupSize", "maxComputeSharedMemorySize", "no effect"]
    assert found[2].message.endswith("shaderFloat16 = true, extension VK_KHR_16bit_storage = 1")
    assert found[2].message.startswith("2 answers change nothing: the device already gives them")


def test_the_app_role_over_simulate_is_judged_against_the_simulated_answers():
    sim = parse("lower", "[capabilities]\nmaxComputeSharedMemorySize = 16384\nshaderFloat16 = false\n")
    restore = ondevice.restore_profile(DEVICE, sim)
    after = profiles.answers_after(sim, DEVICE)
    assert after["capabilities"]["maxComputeSharedMemorySize"] == 16384 and after["capabilities"]["apiVersion"] == \
        "1.3.280"
    assert profiles.check_against_device(restore, DEVICE, base=after, base_name="--simulate s") == []
    same = parse("raise", "[capabilities]\nmaxComputeSharedMemorySize = 16384\n")
    found = profiles.check_against_device(same, DEVICE, base=after, base_name="--simulate s")
    assert [f.message for f in found] == ["1 answer changes nothing: --simulate s already gives it (or does not "
                                          "report, or list, what is lowered or hidden): maxComputeSharedMemorySize "
                                          "= 16384"]


# ---------- lavapipe's real values, through the three commands ----------

def _real_profile(stock_probe, tmp_path):
    dev = stock_probe["capabilities"]
    f = tmp_path / "r.toml"
    f.write_text(HEAD.format(d="raise") + f"[capabilities]\nminSubgroupSize = {dev['maxSubgroupSize'] * 2}\n"
                 f"maxComputeSharedMemorySize = {dev['maxComputeSharedMemorySize']}\n")
    return f, dev


def _warnings(stderr: str) -> list[str]:
    return [line.split("warning: ", 1)[1] for line in stderr.splitlines() if "warning: " in line]


def test_check_run_and_probe_give_the_same_lines_on_lavapipe(vk_build, stock_probe, tmp_path):
    f, dev = _real_profile(stock_probe, tmp_path)
    clamped = (f"--profile {f}: minSubgroupSize = {dev['maxSubgroupSize'] * 2}: no effect: the device already "
               f"answers {dev['minSubgroupSize']}; a raise profile never lowers (minSubgroupSize is a minimum: less "
               "is stronger)")
    same = (f"--profile {f}: 1 answer changes nothing: the device already gives it (or does not report, or list, "
            f"what is lowered or hidden): maxComputeSharedMemorySize = {dev['maxComputeSharedMemorySize']}")
    r = run_capshim("profile", "check", str(f), "--device", "0")
    assert r.returncode == 0 and _warnings(r.stderr) == [clamped, same], r.stderr
    r = run_capshim("probe", "--json", "--profile", str(f))
    assert r.returncode == 0 and _warnings(r.stderr) == [clamped, same], r.stderr
    assert [(e["flag"], e["key"], e["noop"]) for e in json.loads(r.stdout)["no_effect"]] == [
        ("--profile", "minSubgroupSize", "clamped"), ("--profile", "no effect", "same")]
    r = run_capshim("run", "--profile", str(f), "--", str(vk_build.probe))
    assert r.returncode == 0 and _warnings(r.stderr) == [clamped, same], r.stderr
    # without --device, profile check probes nothing and says only what the file alone shows
    r = run_capshim("profile", "check", str(f))
    assert r.returncode == 0 and r.stderr == ""


def test_profile_check_device_refuses_what_run_refuses(vk_build, tmp_path):
    f = tmp_path / "c.toml"
    f.write_text(HEAD.format(d="raise") + "[capabilities]\ncooperativeMatrix = true\n")
    r = run_capshim("profile", "check", str(f), "--device", "0")
    assert r.returncode == 2 and "cooperativeMatrix answered true" in r.stderr


def test_the_bench_identity_arm_answers_the_device_on_purpose(vk_build, stock_probe, capsys):
    arms = [Arm("native"), Arm("aa", identity=True), Arm("vm-unlocked", simulate=profiles.load("vulkan-paravirt"),
                                                      restore=True)]
    plan._resolve_on_device(arms, "vulkan")
    err = capsys.readouterr().err
    assert "arm aa" not in err and "arm vm-unlocked: profile:" not in err, err
