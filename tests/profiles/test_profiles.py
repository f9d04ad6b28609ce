"""Profiles: the schema, the direction rules, the built-ins and the CLI's errors."""

from __future__ import annotations

import json

import pytest

from capshim import profiles
from capshim.profiles.catalog import VULKAN_KEYS
from tests.conftest import run_capshim

HEAD = 'name = "t"\napi = "{api}"\ndirection = "{direction}"\nversion = 1\ndescription = "test"\n'


def prof(api="vulkan", direction="raise", body=""):
    return HEAD.format(api=api, direction=direction) + body


def test_builtins_load_and_match_the_brief():
    assert profiles.builtin_names() == ["a100-class", "metal-apple7", "metal-apple9", "metal-paravirt", "pascal-class",
                                        "t4-class", "vulkan-paravirt"]
    m = profiles.load("metal-apple9")
    assert (m.api, m.direction) == ("metal", "raise")
    assert m.capabilities == {"appleFamilyMax": 1009, "maxThreadgroupMemoryLength": 65536}
    v = profiles.load("vulkan-paravirt")
    assert (v.api, v.direction) == ("vulkan", "lower")
    assert v.capabilities["shaderFloat16"] == 0
    assert v.capabilities["integerDotProduct4x8BitPackedSignedAccelerated"] == 0
    assert 0 < v.capabilities["maxComputeSharedMemorySize"] < 32768
    assert v.extensions == {"VK_KHR_cooperative_matrix": 0, "VK_NV_cooperative_matrix": 0, "VK_NV_cooperative_matrix2": 0,
                            "VK_KHR_shader_bfloat16": 0}


@pytest.mark.parametrize("text, key, reason", [
    (prof("metal", body='[capabilities]\nappleFamilyMax = "1009x"\n'), "capabilities.appleFamilyMax", "Apple family"),
    (prof("metal", body="[capabilities]\nappleFamilyMax = 999\n"), "capabilities.appleFamilyMax", "1001..1999"),
    (prof(body="[capabilities]\nmaxComputeSharedMemorySize = \"65536\"\n"),
     "capabilities.maxComputeSharedMemorySize", "whole number"),
    (prof(body="[capabilities]\nmaxComputeSharedMemorySize = 4294967296\n"),
     "capabilities.maxComputeSharedMemorySize", "whole number"),
    (prof(body="[capabilities]\nnotACapability = 1\n"), "capabilities.notACapability", "unknown capability"),
    (prof(body="colour = 1\n"), "colour", "unknown key"),
    (prof(body="[capabilities]\nshaderFloat16 = 1\n"), "capabilities.shaderFloat16", "true or false"),
    (prof(body="[capabilities]\nshaderFloat16 = false\n"), "capabilities.shaderFloat16", "cannot turn a feature off"),
    (prof(direction="lower", body="[capabilities]\nshaderFloat16 = true\n"), "capabilities.shaderFloat16",
     "cannot turn a feature on"),
    (prof(body="[extensions]\nVK_KHR_cooperative_matrix = false\n"), "extensions.VK_KHR_cooperative_matrix",
     "cannot hide"),
    (prof(direction="lower", body="[extensions]\nVK_KHR_cooperative_matrix = 2\n"),
     "extensions.VK_KHR_cooperative_matrix", "can only hide"),
    (prof(body="[extensions]\nnot_an_extension = true\n"), "extensions.not_an_extension", "not an extension name"),
    (prof("metal", "lower", "[capabilities]\nmaxThreadgroupMemoryLength = 1\n"), "direction", "raise-only"),
    (prof(body="[capabilities]\nsubgroupSupportedOperations = [\"basic\", \"teleport\"]\n"),
     "capabilities.subgroupSupportedOperations", "flag names"),
    (HEAD.format(api="opencl", direction="raise"), "api", "must be one of"),
    (HEAD.format(api="cuda", direction="raise"), "direction", "CUDA profiles are lower-only"),
    ('name = "t"\napi = "vulkan"\n', "description", "missing"),
])
def test_invalid_profiles_name_key_value_and_reason(text, key, reason):
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(text, "bad.toml")
    assert exc.value.key == key
    assert reason in exc.value.reason
    assert "bad.toml" in str(exc.value)


def test_values_resolve_to_numbers():
    p = profiles.parse(prof(body='[capabilities]\napiVersion = "1.3.230"\n'
                                 'subgroupSupportedOperations = ["basic", "vote", "quad"]\n'
                                 "maxComputeSharedMemorySize = 0x10000\n"
                                 "[extensions]\nVK_KHR_cooperative_matrix = 2\nVK_KHR_shader_bfloat16 = true\n"),
                       "x.toml")
    assert p.capabilities["apiVersion"] == (1 << 22) | (3 << 12) | 230
    assert p.capabilities["subgroupSupportedOperations"] == 0x1 | 0x2 | 0x80
    assert p.capabilities["maxComputeSharedMemorySize"] == 65536
    assert p.extensions == {"VK_KHR_cooperative_matrix": 2, "VK_KHR_shader_bfloat16": 1}


def test_to_toml_round_trips():
    p = profiles.load("vulkan-paravirt")
    q = profiles.parse(profiles.to_toml(p), "rt.toml")
    assert (q.capabilities, q.extensions, q.direction) == (p.capabilities, p.extensions, p.direction)


@pytest.mark.slow
def test_cli_check_exit_codes(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text(prof(body="[capabilities]\nmaxComputeSharedMemorySize = 65536\n"))
    r = run_capshim("profile", "check", str(good))
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(prof("metal", body='[capabilities]\nappleFamilyMax = "1009x"\n'))
    r = run_capshim("profile", "check", str(bad))
    assert r.returncode == 2
    assert "capabilities.appleFamilyMax" in r.stderr and "1009x" in r.stderr and str(bad) in r.stderr
    assert "Traceback" not in r.stderr
    r = run_capshim("profile", "check", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "cannot read" in r.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n")
    r = run_capshim("profile", "check", str(broken))
    assert r.returncode == 2 and "not valid TOML" in r.stderr


@pytest.mark.slow
def test_cli_profiles_and_show():
    r = run_capshim("profiles", "--json")
    assert r.returncode == 0
    names = [p["name"] for p in json.loads(r.stdout)]
    assert names == ["a100-class", "metal-apple7", "metal-apple9", "metal-paravirt", "pascal-class", "t4-class",
                     "vulkan-paravirt"]
    r = run_capshim("profile", "show", "metal-apple9")
    assert json.loads(r.stdout)["capabilities"]["appleFamilyMax"] == 1009
    r = run_capshim("profile", "show", "no-such-profile")
    assert r.returncode == 2 and "no such profile" in r.stderr


def test_catalog_has_the_keys_the_brief_names():
    for key in ["maxComputeSharedMemorySize", "subgroupSize", "subgroupSupportedOperations", "shaderFloat16",
                "storageBuffer16BitAccess", "shaderInt8", "integerDotProduct4x8BitPackedSignedAccelerated",
                "cooperativeMatrix", "shaderBFloat16Type"]:
        assert key in VULKAN_KEYS


def test_generated_profiles_survive_quotes_and_backslashes():
    """Generated profiles are written with a TOML writer: a device name with a quote must not break a bench."""
    from capshim.profiles import ondevice

    paravirt = profiles.load("vulkan-paravirt")
    stock = {"device": {"name": 'GPU "fast" \\ edition\nline2'},
             "capabilities": {"maxComputeSharedMemorySize": 49152, "shaderFloat16": True, "apiVersion": "1.3.280"},
             "extensions": {"VK_KHR_cooperative_matrix": 2}}
    p = ondevice.restore_profile(stock, paravirt)
    assert p.description.endswith('GPU "fast" \\ edition line2')
    assert p.capabilities["maxComputeSharedMemorySize"] == 49152 and p.capabilities["shaderFloat16"]
    assert p.extensions["VK_KHR_cooperative_matrix"] == 2
    q = profiles.parse(profiles.to_toml(p), "rt.toml")
    assert q.description == p.description and q.capabilities == p.capabilities


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "big"])
def test_profile_check_is_bounded(tmp_path, target):
    """`profile check /dev/zero` grew memory without end; a FIFO would block."""
    import os

    if target == "fifo":
        target = str(tmp_path / "f")
        os.mkfifo(target)
    elif target == "big":
        target = str(tmp_path / "big.toml")
        with open(target, "w") as fh:
            fh.write("#" * (profiles.MAX_PROFILE_BYTES + 1))
    with pytest.raises(profiles.ProfileError, match="cannot read"):
        profiles.load(target)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [5, 950, 2000, 20000])
def test_deeply_nested_value_is_a_profile_error(depth, tmp_path):
    """A 2 KB profile of nested arrays is refused as a ProfileError, never a RecursionError."""
    text = prof(body="[capabilities]\nsubgroupSupportedOperations = " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(profiles.ProfileError, match="nested"):
        profiles.parse(text, "deep.toml")
    f = tmp_path / "deep.toml"
    f.write_text(text)
    for args in (["profile", "check", str(f)], ["profile", "show", str(f)]):
        r = run_capshim(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr and "deep.toml" in r.stderr, r.stderr
    if depth == 5:
        assert "capabilities.subgroupSupportedOperations" in r.stderr


@pytest.mark.slow
def test_a_20000_item_array_is_a_fast_exit_2_naming_the_key(tmp_path):
    """issue 18: a 20,000-item array (mixed items, which jsonschema's uniqueItems compares
    pair by pair) kept `profile check` busy for minutes."""
    import time

    items = ", ".join(["1", '"basic"'] * 10_000)
    f = tmp_path / "big.toml"
    f.write_text(prof(body=f"[capabilities]\nsubgroupSupportedOperations = [{items}]\n"))
    start = time.monotonic()
    r = run_capshim("profile", "check", str(f))
    assert time.monotonic() - start < 30
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "key 'capabilities.subgroupSupportedOperations'" in r.stderr and "20000 items" in r.stderr, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("body, key, words", [
    # issue 18: passed profile check, and the layer refused "24576.0" (exit 2 now, naming the key)
    ("[capabilities]\nmaxComputeSharedMemorySize = 24576.0\n", "capabilities.maxComputeSharedMemorySize",
     "expected a whole number 0..4294967295 (write 24576"),
    # issue 18: a TypeError traceback in the power-of-two rule
    ('override_exact = ["subgroupSize"]\n[capabilities]\nsubgroupSize = 8.0\n', "capabilities.subgroupSize",
     "expected a whole number"),
    ("[capabilities]\napiVersion = 4206592.0\n", "capabilities.apiVersion", "expected a version"),
    ("[capabilities]\nsubgroupSupportedOperations = 255.0\n", "capabilities.subgroupSupportedOperations",
     "expected a whole number or a list of flag names"),
    ("[extensions]\nVK_KHR_x = 2.0\n", "extensions.VK_KHR_x", "expected false, true or a spec version"),
    ("[capabilities]\nmaxComputeSharedMemorySize = 1e300\n", "capabilities.maxComputeSharedMemorySize",
     "expected a whole number"),
    ("[capabilities]\nmaxComputeSharedMemorySize = nan\n", "capabilities.maxComputeSharedMemorySize",
     "expected a whole number"),
])
def test_floats_are_refused_where_the_layer_takes_whole_numbers(tmp_path, body, key, words):
    f = tmp_path / "p.toml"
    f.write_text(prof(body=body))
    r = run_capshim("profile", "check", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"key '{key}'" in r.stderr and words in r.stderr, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("top, body, key, words", [
    ("", "[capabilities]\nmaxComputeWorkGroupInvocatons = 256\n", "capabilities.maxComputeWorkGroupInvocatons",
     "unknown capability for api 'vulkan' (did you mean 'maxComputeWorkGroupInvocations'?)"),
    ("", "[capabilities]\nshaderfloat16 = true\n", "capabilities.shaderfloat16",
     "unknown capability for api 'vulkan' (did you mean 'shaderFloat16'?)"),
    ("", "[capabilities]\nappleFamilyMax = 1009\n", "capabilities.appleFamilyMax",
     "a capability of api 'metal'; this profile's api is 'vulkan'"),
    ("", "[capabilites]\nshaderFloat16 = true\n", "capabilites", "unknown key (did you mean 'capabilities'?)"),
    ("", "[capabilities]\nnotACapabilityAtAll = 1\n", "capabilities.notACapabilityAtAll",
     "unknown capability for api 'vulkan'"),
])
def test_a_misspelt_key_gets_a_suggestion(tmp_path, top, body, key, words):
    f = tmp_path / "p.toml"
    f.write_text(prof(body=top + body))
    r = run_capshim("profile", "check", str(f))
    assert r.returncode == 2 and f"key '{key}': {words}" in r.stderr, r.stderr
    if "notACapability" in key:
        assert "did you mean" not in r.stderr


def test_a_misspelt_required_key_is_named_with_a_suggestion():
    text = prof().replace("description =", "descripton =")
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(text, "p.toml")
    assert exc.value.key == "descripton" and "did you mean 'description'?" in exc.value.reason


@pytest.mark.slow
@pytest.mark.parametrize("api", ['["vulkan"]', "{a = 1}", "1.0"])
def test_an_api_that_is_not_a_string_is_exit_2(tmp_path, api):
    f = tmp_path / "p.toml"
    f.write_text(prof().replace('api = "vulkan"', f"api = {api}"))
    r = run_capshim("profile", "check", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "key 'api'" in r.stderr, r.stderr


@pytest.mark.parametrize("body, key, words", [
    ('"capabilities.shaderFloat16" = true\n', '"capabilities.shaderFloat16"', "quoted, it is one key"),
    ("[[capabilities]]\nshaderFloat16 = true\n", "capabilities", "expected a table"),
    ('override_exact = "subgroupSize"\n', "override_exact", "expected a list of exact keys (subgroupSize)"),
    ('[extensions]\n"VK_KHR_x\\u202e" = true\n', 'extensions."VK_KHR_x\\u202e"', "not an extension name"),
    ("[capabilities]\nmaxComputeSharedMemorySize = 2024-01-01\n", "capabilities.maxComputeSharedMemorySize",
     "expected a whole number"),
    ("[capabilities]\nmaxComputeSharedMemorySize = " + "9" * 4000 + "\n", "capabilities.maxComputeSharedMemorySize",
     "expected a whole number"),
    ("[extensions]\n" + "".join(f"VK_E{i} = true\n" for i in range(20_000)), "extensions",
     "a table of 20000 keys (at most 256)"),
])
def test_odd_toml_shapes_name_the_key_as_toml_writes_it(body, key, words):
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(prof(body=body), "p.toml")
    assert exc.value.key == key and words in exc.value.reason, str(exc.value)
    assert len(str(exc.value)) < 400


def test_a_byte_order_mark_is_named():
    with pytest.raises(profiles.ProfileError, match="byte-order mark"):
        profiles.parse("\ufeff" + prof(), "p.toml")
