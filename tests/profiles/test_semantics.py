"""Capability semantics: kinds decide directions, exact keys need an opt-in, answers stay consistent."""

from __future__ import annotations

import pytest

from capshim import profiles
from capshim.profiles.checks import answer
from tests.conftest import run_capshim

HEAD = 'name = "t"\napi = "vulkan"\ndirection = "{direction}"\nversion = 1\ndescription = "test"\n'


def prof(direction="raise", body="", top=""):
    return HEAD.format(direction=direction) + top + body


def parse(direction="raise", body="", top=""):
    return profiles.parse(prof(direction, body, top), "t.toml")


# ---------- answers by kind ----------

@pytest.mark.parametrize("kind, vtype, direction, device, value, want", [
    ("upper", "u32", "raise", 32768, 65536, 65536),
    ("upper", "u32", "lower", 32768, 65536, 32768),
    ("lower", "u32", "lower", 8, 4, 8),      # a lower profile cannot make min smaller (stronger)
    ("lower", "u32", "lower", 8, 16, 16),
    ("lower", "u32", "raise", 8, 16, 8),     # a raise profile cannot make min larger (weaker)
    ("lower", "u32", "raise", 8, 4, 4),
    ("exact", "u32", "lower", 8, 4, 4),
    ("feature", "bool", "lower", True, 0, False),
    ("feature", "bool", "raise", False, 1, True),
    ("upper", "flags", "lower", 0xFF, 0x0F, 0x0F),
    ("upper", "flags", "raise", 0xF0, 0x0F, 0xFF),
    ("version", "version", "lower", (1 << 22) | (3 << 12), (1 << 22) | (1 << 12), (1 << 22) | (1 << 12)),
])
def test_answers_follow_the_kind(kind, vtype, direction, device, value, want):
    assert answer(kind, vtype, direction, device, value) == want


def test_a_lower_profile_never_answers_stronger_than_the_device():
    strength = {"feature": 1, "upper": 1, "version": 1, "lower": -1}
    for kind, sign in strength.items():
        vtype = "bool" if kind == "feature" else "u32"
        for device in (0, 1, 8, 64):
            for value in (0, 1, 4, 8, 128):
                got = answer(kind, vtype, "lower", bool(device) if vtype == "bool" else device, value)
                assert sign * int(got) <= sign * device, (kind, device, value)


# ---------- what profile check decides alone ----------

def test_an_exact_key_needs_override_exact():
    with pytest.raises(profiles.ProfileError) as exc:
        parse("lower", "[capabilities]\nsubgroupSize = 4\n")
    assert exc.value.key == "capabilities.subgroupSize" and "override_exact" in exc.value.reason
    p = parse("lower", "[capabilities]\nsubgroupSize = 4\n", 'override_exact = ["subgroupSize"]\n')
    assert p.override_exact == ("subgroupSize",) and p.capabilities["subgroupSize"] == 4
    assert profiles.parse(profiles.to_toml(p), "rt.toml").override_exact == ("subgroupSize",)
    assert p.to_dict()["override_exact"] == ["subgroupSize"]


@pytest.mark.parametrize("top, key, words", [
    ('override_exact = ["maxSubgroupSize"]\n', "override_exact[0]", "must be one of subgroupSize"),
    ('override_exact = ["subgroupSize"]\n', "override_exact", "does not set"),
])
def test_override_exact_names_only_exact_keys_the_profile_sets(top, key, words):
    with pytest.raises(profiles.ProfileError) as exc:
        parse("raise", "[capabilities]\nmaxSubgroupSize = 64\n", top)
    assert exc.value.key == key and words in exc.value.reason


EXACT = 'override_exact = ["subgroupSize"]\n'


@pytest.mark.parametrize("body, top, key", [
    ("minSubgroupSize = 16\nmaxSubgroupSize = 8\n", "", "capabilities.maxSubgroupSize"),
    ("minSubgroupSize = 16\nsubgroupSize = 8\n", EXACT, "capabilities.subgroupSize"),
    ("subgroupSize = 64\nmaxSubgroupSize = 32\n", EXACT, "capabilities.maxSubgroupSize"),
])
def test_subgroup_sizes_in_one_profile_are_ordered(body, top, key):
    with pytest.raises(profiles.ProfileError) as exc:
        parse("raise", "[capabilities]\n" + body, top)
    assert exc.value.key == key and "minSubgroupSize <= subgroupSize <= maxSubgroupSize" in exc.value.reason


@pytest.mark.parametrize("value", [0, 3, 24])
def test_subgroup_sizes_are_powers_of_two(value):
    with pytest.raises(profiles.ProfileError) as exc:
        parse("raise", f"[capabilities]\nmaxSubgroupSize = {value}\n")
    assert exc.value.key == "capabilities.maxSubgroupSize" and "power of two" in exc.value.reason


@pytest.mark.slow
def test_profile_check_says_what_the_layer_will_do(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(prof("lower", "[capabilities]\nmaxComputeSharedMemorySize = 16384\nminSubgroupSize = 16\n"
                               "[extensions]\nVK_KHR_cooperative_matrix = false\n"))
    r = run_capshim("profile", "check", str(f))
    assert r.returncode == 0, r.stderr
    assert "maxComputeSharedMemorySize: at most 16384" in r.stdout
    assert "minSubgroupSize: at least 16" in r.stdout  # less is stronger: lowering raises the minimum
    assert "extension VK_KHR_cooperative_matrix: hidden" in r.stdout
    assert "warning: extension VK_KHR_cooperative_matrix is hidden but cooperativeMatrix, " \
           "cooperativeMatrixRobustBufferAccess keep the device's answer" in r.stderr


# ---------- against a device ----------

@pytest.mark.slow
def test_a_raise_profile_cannot_make_min_subgroup_size_exceed_max(stock_probe):
    dev = stock_probe["capabilities"]
    p = parse("raise", f"[capabilities]\nminSubgroupSize = {dev['maxSubgroupSize'] * 2}\n")
    # not refused: the layer answers min(device, profile) for a minimum; but never silent (issue 20)
    found = profiles.check_against_device(p, stock_probe)
    assert [(f.key, f.severity, f.noop) for f in found] == [("minSubgroupSize", "warn", "clamped")]
    assert found[0].message == (f"minSubgroupSize = {dev['maxSubgroupSize'] * 2}: no effect: the device already "
                                f"answers {dev['minSubgroupSize']}; a raise profile never lowers (minSubgroupSize "
                                "is a minimum: less is stronger)")


@pytest.mark.slow
def test_an_exact_change_below_the_minimum_is_refused(stock_probe):
    dev = stock_probe["capabilities"]
    p = parse("lower", f"[capabilities]\nsubgroupSize = {dev['minSubgroupSize'] // 2}\n",
              'override_exact = ["subgroupSize"]\n')
    findings = profiles.check_against_device(p, stock_probe)
    refuse = [f for f in findings if f.severity == "refuse"]
    assert [(f.key, f.device, f.reported) for f in refuse] == \
        [("subgroupSize", dev["subgroupSize"], dev["minSubgroupSize"] // 2)]
    assert "minSubgroupSize" in refuse[0].message
    warn = [f for f in findings if f.severity == "warn"]
    assert [f.key for f in warn] == ["subgroupSize"] and "exact property" in warn[0].message


@pytest.mark.slow
def test_an_exact_change_within_the_range_only_warns(stock_probe):
    dev = dict(stock_probe, capabilities={**stock_probe["capabilities"], "minSubgroupSize": 4,
                                          "subgroupSize": 8, "maxSubgroupSize": 32})
    p = parse("lower", "[capabilities]\nsubgroupSize = 16\n", 'override_exact = ["subgroupSize"]\n')
    findings = profiles.check_against_device(p, dev)
    assert [(f.key, f.device, f.reported, f.severity) for f in findings] == [("subgroupSize", 8, 16, "warn")]


@pytest.mark.slow
def test_a_feature_without_its_extension_is_refused(stock_probe):
    assert "VK_KHR_cooperative_matrix" not in stock_probe["extensions"]  # lavapipe 22.3
    p = parse("raise", "[capabilities]\ncooperativeMatrix = true\n")
    findings = profiles.check_against_device(p, stock_probe)
    assert [(f.key, f.severity) for f in findings] == [("cooperativeMatrix", "refuse")]
    assert "VK_KHR_cooperative_matrix" in findings[0].message
    p = parse("raise", "[capabilities]\ncooperativeMatrix = true\n[extensions]\nVK_KHR_cooperative_matrix = 2\n")
    assert profiles.check_against_device(p, stock_probe) == []


@pytest.mark.slow
def test_a_core_feature_needs_no_extension(stock_probe):
    p = parse("raise", "[capabilities]\nshaderFloat16 = true\n")
    found = profiles.check_against_device(p, stock_probe)
    assert [f for f in found if f.severity == "refuse"] == []
    if stock_probe["capabilities"]["shaderFloat16"]:  # lavapipe has it: equal to stock, said (issue 20)
        assert [f.message.rsplit(": ", 1)[-1] for f in found] == ["shaderFloat16 = true"]


def test_hiding_an_extension_but_not_its_features_warns_where_the_device_has_them():
    device = {"device": {"apiVersion": "1.3.280"},
              "capabilities": {"cooperativeMatrix": True, "cooperativeMatrixRobustBufferAccess": True},
              "extensions": {"VK_KHR_cooperative_matrix": 2}}
    p = parse("lower", "[capabilities]\ncooperativeMatrix = false\n[extensions]\nVK_KHR_cooperative_matrix = false\n")
    findings = profiles.check_against_device(p, device)
    assert [(f.key, f.severity) for f in findings] == [("extension VK_KHR_cooperative_matrix", "warn")]
    assert "cooperativeMatrixRobustBufferAccess" in findings[0].message


@pytest.mark.slow
def test_builtin_paravirt_is_consistent_on_this_device(stock_probe):
    findings = profiles.check_against_device(profiles.load("vulkan-paravirt"), stock_probe)
    assert [f for f in findings if f.severity == "refuse"] == []


@pytest.mark.slow
def test_the_c_answer_is_the_python_answer(tmp_path):
    """capshim_answer (config.c, for the layer) and checks.answer agree on a grid of cases."""
    import itertools
    import subprocess

    from capshim.native import build as nb
    from capshim.profiles.table import KINDS

    src = tmp_path / "answer.c"
    src.write_text('#include <stdio.h>\n#include "config.h"\nint main(void) {\n'
                   "    int t, k, d; unsigned s, c;\n"
                   '    while (scanf("%d %d %d %u %u", &t, &k, &d, &s, &c) == 5)\n'
                   '        printf("%u\\n", capshim_answer(t, k, d, s, c));\n    return 0;\n}\n')
    vk = nb.source_dir(nb.COMMON)
    exe = tmp_path / "answer"
    nb.run_compiler([nb.compiler(), "-std=gnu11", *nb.WARNINGS, "-I", str(vk), "-o", str(exe), str(src),
                     str(vk / "config.c")])
    types = {"bool": 1, "u32": 2, "flags": 3, "version": 4}
    cases = []
    for kind, vtype in [("feature", "bool"), ("upper", "u32"), ("upper", "flags"), ("lower", "u32"),
                        ("exact", "u32"), ("version", "version")]:
        values = (0, 1) if vtype == "bool" else (0, 4, 8, 0x30, 4206592)
        for direction, stock, cfg in itertools.product(("raise", "lower"), values, values):
            cases.append((kind, vtype, direction, stock, cfg))
    stdin = "".join(f"{types[t]} {KINDS.index(k) + 1} {1 if d == 'raise' else -1} {s} {c}\n"
                    for k, t, d, s, c in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.split()
    assert len(out) == len(cases)
    for case, got in zip(cases, out):
        kind, vtype, direction, stock, cfg = case
        assert int(got) == int(answer(kind, vtype, direction, bool(stock) if vtype == "bool" else stock, cfg)), case


@pytest.mark.slow
def test_check_against_device_reads_probe_json_as_the_cli_prints_it(vk_build):
    import json

    r = run_capshim("probe", "--api", "vulkan", "--json")
    assert r.returncode == 0, r.stderr
    device = json.loads(r.stdout)
    p = parse("raise", "[capabilities]\ncooperativeMatrix = true\nmaxComputeSharedMemorySize = 65536\n")
    findings = profiles.check_against_device(p, device)
    assert [(f.key, f.device, f.reported, f.severity) for f in findings] == \
        [("cooperativeMatrix", None, True, "refuse")]
    assert set(findings[0].to_dict()) == {"key", "device", "reported", "severity", "message"}


# ---------- hostile inputs: lower profiles that cannot lower, answers below the spec ----------

SYNTHETIC = {"device": {"apiVersion": "1.3.280"},
             "capabilities": {"apiVersion": "1.3.280", "minSubgroupSize": 8, "maxSubgroupSize": 32,
                              "maxComputeSharedMemorySize": 32768, "shaderFloat16": False,
                              "subgroupSupportedOperations": 0x0F},
             "extensions": {}}


def test_a_lower_profile_that_asks_for_more_than_the_device_warns():
    p = parse("lower", '[capabilities]\nminSubgroupSize = 4\napiVersion = "1.3.999"\n'
                       "maxComputeSharedMemorySize = 65536\nsubgroupSupportedOperations = 0xFF\n")
    findings = profiles.check_against_device(p, SYNTHETIC)
    assert [(f.key, f.severity) for f in findings] == [
        ("minSubgroupSize", "warn"), ("apiVersion", "warn"), ("maxComputeSharedMemorySize", "warn"),
        ("subgroupSupportedOperations", "warn")]
    by_key = {f.key: f.message for f in findings}
    assert by_key["minSubgroupSize"] == ("minSubgroupSize = 4: no effect: the device already answers 8; "
                                         "a lower profile never raises (minSubgroupSize is a minimum: less is "
                                         "stronger)")
    assert "apiVersion = 1.3.999: no effect: the device already answers 1.3.280" in by_key["apiVersion"]
    assert "the device already answers 32768" in by_key["maxComputeSharedMemorySize"]


def test_a_lower_profile_that_lowers_does_not_warn_and_one_that_matches_says_so_in_one_line():
    p = parse("lower", '[capabilities]\nminSubgroupSize = 16\napiVersion = "1.2"\n'
                       "maxComputeSharedMemorySize = 16384\nsubgroupSupportedOperations = 0x03\n")
    assert profiles.check_against_device(p, SYNTHETIC) == []
    # issue 20: equal to the device's own answer is a no-op too, named (all such answers in one line)
    p = parse("lower", "[capabilities]\nminSubgroupSize = 8\nmaxComputeSharedMemorySize = 32768\n"
                       "shaderFloat16 = false\n")
    found = profiles.check_against_device(p, SYNTHETIC)
    assert [(f.key, f.noop) for f in found] == [("no effect", "same")]
    assert found[0].message == ("3 answers change nothing: the device already gives them (or does not report, or "
                                "list, what is lowered or hidden): minSubgroupSize = 8, maxComputeSharedMemorySize "
                                "= 32768, shaderFloat16 = false")


@pytest.mark.slow
def test_run_warns_about_a_lower_profile_with_no_effect(vk_build, stock_probe, tmp_path):
    dev = stock_probe["capabilities"]["maxComputeSharedMemorySize"]
    f = tmp_path / "p.toml"
    f.write_text(prof("lower", f"[capabilities]\nmaxComputeSharedMemorySize = {dev * 2}\n"))
    r = run_capshim("probe", "--api", "vulkan", "--simulate", str(f), "--json")
    assert r.returncode == 0, r.stderr
    assert (f"maxComputeSharedMemorySize = {dev * 2}: no effect: the device already answers {dev}; "
            "a lower profile never raises") in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("body, words", [
    ("maxComputeWorkGroupInvocations = 1", "value 1: below the Vulkan spec's required minimum 128"),
    ("maxComputeSharedMemorySize = 1024", "value 1024: below the Vulkan spec's required minimum 16384"),
    ("apiVersion = 0", "value 0: version 0 is no Vulkan version"),
    ("apiVersion = 4294967295", "value 4294967295: variant 7 in bits 29..31"),
])
def test_profile_check_refuses_answers_no_conformant_device_gives(tmp_path, body, words):
    f = tmp_path / "p.toml"
    f.write_text(prof("lower", f"[capabilities]\n{body}\n"))
    r = run_capshim("profile", "check", str(f))
    assert r.returncode == 2
    assert f"key 'capabilities.{body.split()[0]}'" in r.stderr and words in r.stderr


@pytest.mark.slow
def test_a_raise_keeps_the_device_spec_version_of_an_extension_it_lists(stock_probe):
    """Found by the property test: `profile check` said "listed with spec version 1" and
    beyond_device counted a higher one as beyond the device, but the layer keeps the device's
    own spec version of an extension it lists (it adds only those the device lacks)."""
    from capshim.backends import vulkan
    from capshim.profiles import ondevice

    have = stock_probe["extensions"]["VK_EXT_subgroup_size_control"]
    p = parse("raise", f"[extensions]\nVK_EXT_subgroup_size_control = {have + 1}\nVK_CAPSHIM_x = 3\n")
    assert "where the device lacks it" in profiles.describe(p)[0]
    got = vulkan.probe(profile=p)["extensions"]
    assert got["VK_EXT_subgroup_size_control"] == have and got["VK_CAPSHIM_x"] == 3
    assert [b.key for b in ondevice.beyond_device(p, stock_probe)] == ["VK_CAPSHIM_x"]
    warned = [f for f in profiles.check_against_device(p, stock_probe) if f.key.startswith("extension ")]
    assert [(f.severity, f.key) for f in warned] == [("warn", "extension VK_EXT_subgroup_size_control")]
    assert f"spec version {have}, which the layer keeps" in warned[0].message
