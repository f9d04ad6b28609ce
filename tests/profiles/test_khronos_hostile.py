"""Hostile Khronos Vulkan Profiles files (issue 21, hostile pass; docs/hostile-inputs.md rows 700-).

Each test is one input a user (or a file from the internet) may give to ``--profile``,
``--simulate`` or ``capshim profile import|show|check``: it must be refused naming the file and
the JSON path, or read with every oddity listed, never a traceback, a hang or a silent answer.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from capshim import profiles
from capshim.profiles import khronos
from capshim.profiles.model import parse_version
from tests.conftest import run_capshim

BLOCK = {"b": {"features": {"VkPhysicalDeviceShaderFloat16Int8Features": {"shaderFloat16": True}}}}


def write(tmp_path, profiles_, blocks=None, name="p.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"capabilities": BLOCK if blocks is None else blocks, "profiles": profiles_}))
    return str(path)


@pytest.mark.parametrize("prof, where", [
    ({"capabilities": 5}, "$.profiles.A.capabilities"),
    ({"capabilities": [{"b": 1}]}, "$.profiles.A.capabilities[0]"),
    ({"capabilities": [[["b"]]]}, "$.profiles.A.capabilities[0]"),
    ({"capabilities": ["b"], "optionals": 3}, "$.profiles.A.optionals"),
    ({"capabilities": ["b"], "profiles": 5}, "$.profiles.A.profiles"),
    ({"capabilities": ["b"], "requires": "Bxy"}, "$.profiles.A.requires"),
    (5, "$.profiles.A"),
])
def test_a_profile_of_the_wrong_shape_is_refused_naming_the_json_path(tmp_path, prof, where):
    path = write(tmp_path, {"A": prof})
    with pytest.raises(profiles.ProfileError) as exc:
        khronos.read(path)
    assert path in str(exc.value) and where in str(exc.value)
    r = run_capshim("profile", "import", path, "--direction", "raise", "-o", str(tmp_path / "x.toml"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and where in r.stderr
    assert not (tmp_path / "x.toml").exists()


def test_a_diamond_of_requirements_is_read_once_per_profile(tmp_path):
    # P0 requires P1 twice, P1 requires P2 twice, ...: 2**40 paths, 41 profiles.
    profs = {f"P{i}": {"capabilities": ["b"], "profiles": [f"P{i + 1}", f"P{i + 1}"]} for i in range(40)}
    profs["P40"] = {"capabilities": ["b"], "api-version": "1.2.0"}
    start = time.monotonic()
    r = khronos.read(write(tmp_path, profs) + "#P0")
    assert time.monotonic() - start < 5
    assert r.capabilities == {"shaderFloat16": True, "apiVersion": parse_version("1.2.0")}
    assert len(r.notes) <= 2 * 41


def test_mutual_requirement_is_a_cycle(tmp_path):
    path = write(tmp_path, {"A": {"capabilities": ["b"], "profiles": ["B"]},
                            "B": {"capabilities": ["b"], "requires": ["A"]}})
    with pytest.raises(profiles.ProfileError) as exc:
        khronos.read(path + "#A")
    assert "A -> B -> A" in str(exc.value)


@pytest.mark.parametrize("api", ["1.-3", "1.3_0", "1. 3", "\uff11.3", "1.3.-1", -1, 2 ** 40, 1.3, True, ["1.3"]])
def test_a_bad_api_version_is_listed_never_a_wrong_or_dropped_answer(tmp_path, api):
    r = khronos.read(write(tmp_path, {"A": {"capabilities": ["b"], "api-version": api}}))
    assert "apiVersion" not in r.capabilities
    assert any(u.startswith("A.api-version") for u in r.unsupported), r.unsupported
    assert khronos.one_direction(r, "raise").capabilities == {"shaderFloat16": 1}


@pytest.mark.parametrize("text", ["1.-3", "1.3_0", "1. 3", "\uff11.3", " 1.3", "1.3.-1", "1..3"])
def test_parse_version_takes_only_ascii_digits(text):
    with pytest.raises(ValueError):
        parse_version(text)


@pytest.mark.parametrize("value", [-1, 2 ** 40, True])
def test_parse_version_refuses_an_integer_that_is_no_32_bit_version(value):
    with pytest.raises(ValueError):
        parse_version(value)


@pytest.mark.parametrize("mask", [-1, 2 ** 40])
def test_a_flag_mask_out_of_32_bits_is_listed_naming_the_member(tmp_path, mask):
    blocks = {"b": {"properties": {"VkPhysicalDeviceSubgroupProperties": {"supportedOperations": mask}}}}
    r = khronos.read(write(tmp_path, {"A": {"capabilities": ["b"]}}, blocks))
    assert "subgroupSupportedOperations" not in r.capabilities
    assert any(u.startswith("VkPhysicalDeviceSubgroupProperties.supportedOperations") for u in r.unsupported)


def test_control_bytes_in_names_and_labels_are_escaped(tmp_path):
    blocks = {"b\x1b[2J": {"extensions": {"VK_KHR_x\x1b]0;pwn\x07": 1},
                           "features": {"VkPhysicalDeviceShaderFloat16Int8Features": {"shaderFloat16": True}}}}
    path = write(tmp_path, {"A\x1b[31m": {"label": "red\x1b[31m\x00\u202e", "capabilities": ["b\x1b[2J"]}}, blocks)
    r = khronos.read(path)
    for line in r.unsupported + r.notes + [r.label]:
        assert "\x1b" not in line and "\x00" not in line and "\u202e" not in line
    p = khronos.one_direction(r, "raise")  # the label and the name go into the profile's description
    assert p.capabilities == {"shaderFloat16": 1} and "\\x1b" in p.description
    out = tmp_path / "x.toml"
    res = run_capshim("profile", "import", path, "--direction", "raise", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stderr and "\\x1b" in res.stderr and out.exists()


def test_duplicate_keys_are_refused_naming_the_path(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('{"capabilities": {"b": {"features": {"VkPhysicalDeviceShaderFloat16Int8Features": '
                    '{"shaderFloat16": true, "shaderFloat16": false}}}}, "profiles": {"A": {"capabilities": ["b"]}}}')
    with pytest.raises(profiles.ProfileError) as exc:
        khronos.read(str(path))
    assert "shaderFloat16" in str(exc.value) and "twice" in str(exc.value)
    assert "$.capabilities.b.features.VkPhysicalDeviceShaderFloat16Int8Features" in str(exc.value)


def test_import_of_nothing_answerable_writes_nothing(tmp_path):
    path = write(tmp_path, {"A": {"capabilities": ["b"]}}, {"b": {"formats": {"VK_FORMAT_R8_UNORM": {}}}})
    out = tmp_path / "x.toml"
    r = run_capshim("profile", "import", path, "--direction", "lower", "-o", str(out))
    assert r.returncode == 2 and "nothing written" in r.stderr and not out.exists()
    assert "formats" in r.stderr


@pytest.mark.parametrize("ref, want", [
    ("d#x/h.json", ("d#x/h.json", None)),          # a '#' in a folder name is part of the path
    ("d#x/h.json#VP_A", ("d#x/h.json", "VP_A")),
    ("h.json#VP_A#B", ("h.json", "VP_A#B")),         # held: a name with '#' is the name
    ("h.json#", ("h.json", None)),
    ("H.JSON#VP_A", ("H.JSON", "VP_A")),            # the suffix in capitals is still JSON
    ("p.toml", ("p.toml", None)),
])
def test_split_ref_finds_the_json_file_whatever_the_hashes(ref, want):
    assert khronos.split_ref(ref) == want
    assert khronos.is_khronos_ref(ref) == (want[0] != "p.toml")


def test_a_file_in_a_folder_with_a_hash_takes_a_profile_name(tmp_path):
    folder = tmp_path / "runs#1"
    folder.mkdir()
    path = write(folder, {"A": {"capabilities": ["b"]}, "B": {"capabilities": ["b"]}}, name="VP.JSON")
    assert khronos.read(path + "#B").name == "B"
    r = run_capshim("profile", "show", path + "#A")
    assert r.returncode == 0 and '"khronos_profile": "A"' in r.stdout, r.stderr
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.load(path)  # a bench arm's TOML profile: the way to use a Khronos file, not a TOML error
    assert "profile import" in str(exc.value)


def test_a_capture_of_a_file_without_api_version_invents_none(tmp_path):
    blocks = {"b": {"properties": {"VkPhysicalDeviceProperties": {"limits": {"maxComputeSharedMemorySize": 16384}}}}}
    path = write(tmp_path, {"A": {"capabilities": ["b"]}}, blocks)
    out = tmp_path / "cap.json"
    r = run_capshim("profile", "capture", "--from", path, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "api-version" not in json.loads(out.read_text())["profiles"]["A"]  # was "1.0.0": a lower answer
    assert "apiVersion" in r.stderr and "states none" in r.stderr
    again = khronos.read(str(out))
    assert "apiVersion" not in again.capabilities and again.capabilities["maxComputeSharedMemorySize"] == 16384


def test_a_chain_of_requirements_deeper_than_the_limit_is_refused(tmp_path):
    n = 3000  # deeper than Python's recursion limit
    profs = {f"P{i}": {"capabilities": ["b"], "profiles": [f"P{i + 1}"]} for i in range(n)}
    profs[f"P{n}"] = {"capabilities": ["b"]}
    path = write(tmp_path, profs)
    with pytest.raises(profiles.ProfileError) as exc:
        khronos.read(path + "#P0")
    assert f"deeper than {khronos.MAX_REQUIRES_DEPTH}" in str(exc.value) and len(str(exc.value)) < 600
    r = run_capshim("profile", "show", path + "#P0")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    ok = {f"P{i}": {"capabilities": ["b"], "profiles": [f"P{i + 1}"]} for i in range(khronos.MAX_REQUIRES_DEPTH)}
    ok[f"P{khronos.MAX_REQUIRES_DEPTH}"] = {"capabilities": ["b"]}
    assert khronos.read(write(tmp_path, ok, name="ok.json") + "#P0").capabilities == {"shaderFloat16": True}


@pytest.mark.parametrize("fmt, name", [("toml", "x.json"), ("json", "x.toml"), ("toml", "x.JSON")])
def test_capture_refuses_a_format_its_file_name_would_be_read_as_the_other(tmp_path, fmt, name):
    """capshim reads FILE.json as a Khronos file and FILE.toml as TOML: a TOML capture named
    x.json could never be used (--simulate x.json: invalid JSON)."""
    src = write(tmp_path, {"A": {"capabilities": ["b"], "api-version": "1.3.0"}})
    r = run_capshim("profile", "capture", "--from", src, "--format", fmt, "-o", str(tmp_path / name))
    assert r.returncode == 2 and "--format" in r.stderr and name in r.stderr
    assert not (tmp_path / name).exists()


def test_capture_from_a_fifo_or_to_a_folder_or_dangling_link_is_refused(tmp_path):
    src = write(tmp_path, {"A": {"capabilities": ["b"], "api-version": "1.3.0"}})
    os.mkfifo(tmp_path / "f.json")
    r = run_capshim("profile", "capture", "--from", str(tmp_path / "f.json"), timeout=60)
    assert r.returncode == 2 and "not a regular file" in r.stderr
    (tmp_path / "link.json").symlink_to(src)
    assert run_capshim("profile", "capture", "--from", str(tmp_path / "link.json")).returncode == 0
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    for out, why in (("dir.json", "is a folder"), ("dangling.json", "is a symbolic link")):  # contracts.output
        r = run_capshim("profile", "capture", "--from", src, "-o", str(tmp_path / out))
        assert r.returncode == 2 and why in r.stderr
    assert not (tmp_path / "nowhere.json").exists()


def test_a_device_index_the_machine_lacks_is_named(tmp_path):
    src = write(tmp_path, {"A": {"capabilities": ["b"], "api-version": "1.3.0"}})
    r = run_capshim("profile", "import", src, "--device", "9", "-o", str(tmp_path / "x.toml"))
    assert r.returncode == 2 and "--device 9" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.toml").exists()


@pytest.mark.parametrize("names, mask, listed", [
    (["VK_SUBGROUP_FEATURE_XBASIC_BIT"], 0, 1),                 # was read as BASIC: it ends in "basic"
    (["VK_SHADER_STAGE_COMPUTE_BIT_AND_BASIC_BIT"], 0, 1),
    (["VK_SUBGROUP_FEATURE_BASIC"], 0, 1),                      # no _BIT: not a FlagBits name
    (["VK_SUBGROUP_FEATURE_BASIC_BIT", "VK_SUBGROUP_FEATURE_ROTATE_CLUSTERED_BIT_KHR"], 1 | 1024, 0),
    (["VK_SUBGROUP_FEATURE_PARTITIONED_BIT_NV", "VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT"], 256 | 32, 0),
])
def test_flag_names_must_be_the_vulkan_names_whole(tmp_path, names, mask, listed):
    blocks = {"b": {"properties": {"VkPhysicalDeviceSubgroupProperties": {"supportedOperations": names}}}}
    r = khronos.read(write(tmp_path, {"A": {"capabilities": ["b"]}}, blocks))
    assert r.capabilities["subgroupSupportedOperations"] == mask
    assert len([u for u in r.unsupported if "flag " in u]) == listed


def test_stage_names_take_their_vendor_aliases(tmp_path):
    names = ["VK_SHADER_STAGE_MESH_BIT_NV", "VK_SHADER_STAGE_TASK_BIT_EXT", "VK_SHADER_STAGE_COMPUTE_BIT",
             "VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT"]
    blocks = {"b": {"properties": {"VkPhysicalDeviceSubgroupProperties": {"supportedStages": names}}}}
    r = khronos.read(write(tmp_path, {"A": {"capabilities": ["b"]}}, blocks))
    assert r.capabilities["subgroupSupportedStages"] == 128 | 64 | 32 | 2 and not r.unsupported


def test_a_key_stated_twice_answers_the_stronger_and_says_so(tmp_path):
    """A profile that requires another (or lists two blocks, or one block naming a feature in two
    structures) must be met by a device meeting both: the stronger value, not the last one read."""
    blocks = {"base": {"features": {"VkPhysicalDeviceShaderFloat16Int8Features": {"shaderFloat16": True}},
                       "properties": {"VkPhysicalDeviceProperties": {"limits": {"maxComputeSharedMemorySize": 32768}},
                                      "VkPhysicalDeviceSubgroupSizeControlProperties": {"minSubgroupSize": 8}},
                       "extensions": {"VK_KHR_cooperative_matrix": 2}},
              "top": {"features": {"VkPhysicalDeviceVulkan12Features": {"shaderFloat16": False}},
                      "properties": {"VkPhysicalDeviceProperties": {"limits": {"maxComputeSharedMemorySize": 16384}},
                                     "VkPhysicalDeviceSubgroupSizeControlProperties": {"minSubgroupSize": 32}},
                      "extensions": {"VK_KHR_cooperative_matrix": 1}}}
    profs = {"BASE": {"capabilities": ["base"]}, "TOP": {"profiles": ["BASE"], "capabilities": ["top"]}}
    r = khronos.read(write(tmp_path, profs, blocks) + "#TOP")
    assert r.capabilities["shaderFloat16"] is True
    assert r.capabilities["maxComputeSharedMemorySize"] == 32768
    assert r.capabilities["minSubgroupSize"] == 8        # a lower-is-stronger limit: the smaller
    assert r.extensions["VK_KHR_cooperative_matrix"] == 2
    said = "\n".join(r.notes)
    for key in ("shaderFloat16", "maxComputeSharedMemorySize", "minSubgroupSize"):
        assert f"{key} stated twice" in said


def test_import_with_two_different_profile_names_is_refused(tmp_path):
    src = write(tmp_path, {"A": {"capabilities": ["b"]}, "B": {"capabilities": ["b"]}})
    out = tmp_path / "x.toml"
    r = run_capshim("profile", "import", src + "#A", "--profile", "B", "--direction", "raise", "-o", str(out))
    assert r.returncode == 2 and "#A" in r.stderr and "--profile B" in r.stderr and not out.exists()
    r = run_capshim("profile", "import", src + "#A", "--profile", "A", "--direction", "raise", "-o", str(out))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("out", ["-", ".toml", "sub/", "sub/.toml"])
def test_a_split_import_needs_a_file_name_to_derive_two_from(tmp_path, stock_probe, out):
    """A file that splits is written as X-lower.toml and X-raise.toml: '-o -' (stdout) wrote files
    named '--lower.toml' and '--raise.toml' (and suggested '--simulate --lower.toml'), '-o .toml'
    hidden '-lower.toml' files."""
    (tmp_path / "sub").mkdir()
    h200 = Path(__file__).resolve().parents[1] / "fixtures" / "khronos" / "h200-handmade.json"
    r = run_capshim("profile", "import", str(h200), "-o", out, cwd=tmp_path)
    assert r.returncode == 2 and "X-lower.toml" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["sub"]


def test_many_blocks_are_read_once_each(tmp_path):
    n = 20000  # about 2 MiB; the 16 MiB limit holds 150,000 of these (read in about 7 s)
    blocks = {f"b{i}": BLOCK["b"] for i in range(n)}
    r = khronos.read(write(tmp_path, {"A": {"capabilities": list(blocks)}}, blocks))
    assert r.capabilities == {"shaderFloat16": True} and not r.unsupported


def test_floats_for_ints_odd_flag_items_and_odd_profile_names_held(tmp_path):
    blocks = {"b": {"properties": {"VkPhysicalDeviceProperties": {"limits": {"maxComputeSharedMemorySize": 32768.0}},
                                   "VkPhysicalDeviceSubgroupProperties": {"supportedOperations": [1, None, {"a": 1}]}}}}
    r = khronos.read(write(tmp_path, {"A": {"capabilities": ["b"]}}, blocks))
    assert "maxComputeSharedMemorySize" not in r.capabilities
    assert sum("supportedOperations: flag" in u for u in r.unsupported) == 3
    path = write(tmp_path, {"A\x1b[31m": {}, "B\x00": {}}, {}, name="n.json")
    with pytest.raises(profiles.ProfileError) as exc:
        khronos.read(path)
    assert "A\\x1b[31m, B\\x00" in str(exc.value) and "\x1b" not in str(exc.value)


def test_a_features2_or_properties2_wrapper_of_another_shape_is_listed_not_dropped(tmp_path):
    blocks = {"b": {"properties": {"VkPhysicalDeviceProperties2": {"limits": {"maxComputeSharedMemorySize": 16384}}},
                    "features": {"VkPhysicalDeviceFeatures2": {"features": {"shaderFloat64": True},
                                                               "shaderFloat16": True}}}}
    r = khronos.read(write(tmp_path, {"A": {"capabilities": ["b"]}}, blocks))
    text = "\n".join(r.unsupported)
    assert "VkPhysicalDeviceProperties2.limits" in text and "VkPhysicalDeviceFeatures2.shaderFloat16" in text
    assert r.capabilities == {"shaderFloat64": True}  # the wrapped struct still read


def test_a_known_section_of_the_wrong_type_is_said_so_not_unknown(tmp_path):
    blocks = {"b": {"extensions": ["VK_KHR_x"], "features": [], "properties": 5}}
    r = khronos.read(write(tmp_path, {"A": {"capabilities": ["b"]}}, blocks))
    for section in ("extensions", "features", "properties"):
        assert f"b.{section}: not an object" in r.unsupported
    assert not any("unknown section" in u for u in r.unsupported)


def test_a_file_of_many_profiles_is_named_in_one_short_line(tmp_path):
    path = write(tmp_path, {f"VP_{i:05d}": {} for i in range(20000)})
    for ref in (path, path + "#VP_NOPE"):
        with pytest.raises(profiles.ProfileError) as exc:
            khronos.read(ref)
        assert len(str(exc.value)) < 1000 and "VP_00000" in str(exc.value) and "more)" in str(exc.value)
