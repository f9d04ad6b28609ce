"""The Khronos registry as the source of the Vulkan keys' struct facts (issue 21, Deliver 3).

The committed registry_facts.toml is what vk.xml (vulkan-object, a test dependency) gives;
every key's type follows from its member's C type; a key that is one line in
capabilities.toml reaches the C table; what vk.xml does not back is refused by name.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import vulkan_object  # noqa: F401  the registry: a test dependency, never skipped

from capshim.native import build as nb
from capshim.profiles import generate, registry, table

ROOT = Path(__file__).resolve().parents[2]
TOML = ROOT / "src/capshim/profiles/capabilities.toml"
FACTS = ROOT / "src/capshim/profiles/registry_facts.toml"
ONE_LINE = ('  { key = "maxPushDescriptors", kind = "upper", unit = "descriptors", '
            'description = "descriptors in one push descriptor set layout" },\n')


@pytest.fixture(scope="module")
def vk():
    return registry.registry_object()


def _with_line(line: str) -> str:
    text = TOML.read_text()
    return text.replace("vulkan = [\n", "vulkan = [\n" + line, 1)


def _refused(vk, entry: dict, committed: str | None = None) -> str:
    with pytest.raises(registry.RegistryError) as e:
        registry.derive(vk, [entry], committed=committed)
    return str(e.value)


def test_committed_facts_are_the_registrys(vk):
    committed = registry.parse(FACTS.read_text())
    data = table.tomlread.loads(TOML.read_text(), "capabilities.toml", table.TOML_LIMITS)
    fresh = registry.derive(vk, data["vulkan"], data["flags"])
    assert registry.same(committed, fresh)
    assert list(committed.keys) == [e["key"] for e in data["vulkan"]]


def test_a_drifted_fact_fails_the_check_and_write_restores_it(tmp_path, capsys):
    for rel in ("src/capshim/native/vulkan/caps_table.h", "src/capshim/native/common/config_limits.h",
                "docs/capabilities.md", generate.FACTS):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    facts = tmp_path / generate.FACTS
    facts.write_text(facts.read_text().replace('until = "1.3"', 'until = "1.4"', 1))
    assert generate.main(["--root", str(tmp_path)]) == 1
    assert "registry_facts.toml: differs from capabilities.toml and vk.xml" in capsys.readouterr().err
    assert generate.main(["--root", str(tmp_path), "--write"]) == 0
    assert facts.read_text() == FACTS.read_text()


def test_types_follow_the_members_c_types():
    """VkBool32 -> bool, uint32_t -> u32, apiVersion -> version, a VkFlags type -> flags (unit: that type)."""
    facts, t = registry.load(), table.load()
    for k in t.keys["vulkan"]:
        kf = facts.keys[k.key]
        want = {"VkBool32": "bool", "uint32_t": "version" if k.key in registry.VERSION_MEMBERS else "u32"}
        assert k.type == want.get(kf.ctype, "flags"), k.key
    stages = t.entry("vulkan", "subgroupSupportedStages")
    assert (stages.type, stages.unit, stages.flag_names) == ("flags", "VkShaderStageFlags", "VkShaderStageFlagBits")
    assert t.entry("vulkan", "apiVersion").type == "version"


def test_guards_and_mirrors_come_from_the_registry():
    s = table.load().structs
    assert (s["VkPhysicalDevice16BitStorageFeatures"].core, s["VkPhysicalDevice16BitStorageFeatures"].until) == \
        ((1, 1), (1, 2))  # core in 1.1, the Vulkan11Features struct from 1.2
    ctl = s["VkPhysicalDeviceSubgroupSizeControlProperties"]
    assert (ctl.core, ctl.extension, ctl.until) == (None, "VK_EXT_subgroup_size_control", (1, 3))
    coop = s["VkPhysicalDeviceCooperativeMatrixFeaturesKHR"]
    assert coop.mirror == ("VkBool32 cooperativeMatrix", "VkBool32 cooperativeMatrixRobustBufferAccess")
    assert (coop.stype_value, coop.ctype) == (1000506000, "capshim_VkPhysicalDeviceCooperativeMatrixFeaturesKHR")
    assert not s["VkPhysicalDeviceVulkan13Features"].mirror  # in Debian 12's 1.3.239 headers


def test_a_key_vk_xml_has_is_one_line(vk):
    """maxPushDescriptors (Vulkan 1.4, VK_KHR_push_descriptor): one line, no struct, no type (the
    line docs/capabilities.md shows)."""
    assert ONE_LINE.rstrip("\n") in registry.ADDING_A_KEY
    text = _with_line(ONE_LINE)
    t = table.parse(text, table.registry_facts(text))
    k = t.entry("vulkan", "maxPushDescriptors")
    assert (k.type, k.structs) == ("u32", (("VkPhysicalDevicePushDescriptorProperties", "maxPushDescriptors"),
                                           ("VkPhysicalDeviceVulkan14Properties", "maxPushDescriptors")))
    push, v14 = t.structs["VkPhysicalDevicePushDescriptorProperties"], t.structs["VkPhysicalDeviceVulkan14Properties"]
    assert (push.extension, push.until, v14.core) == ("VK_KHR_push_descriptor", (1, 4), (1, 4))
    # Vulkan14Properties is newer than the baseline headers: declared from vk.xml's members
    assert "void *pCopySrcLayouts" in v14.mirror and "uint8_t optimalTilingLayoutUUID[16]" in v14.mirror
    header = table.render_caps_table_h(t)
    assert "X(maxPushDescriptors, CAPSHIM_U32, capshim_VkPhysicalDeviceVulkan14Properties," in header


@pytest.mark.slow
def test_mirrors_compile_against_the_baseline_headers(tmp_path):
    """The header with a Vulkan 1.4 key compiles against this machine's headers (Debian 12: 1.3.239),
    and the mirror's layout is the size vk.xml's members give."""
    text = _with_line(ONE_LINE)
    parsed = table.parse(text, table.registry_facts(text))
    (tmp_path / "caps_table.h").write_text(table.render_caps_table_h(parsed))
    (tmp_path / "config_limits.h").write_text(table.render_config_limits_h(parsed))
    (tmp_path / "t.c").write_text(
        '#include <stdio.h>\n#include "caps_table.h"\n'
        "int main(void) { printf(\"%zu %zu\\n\", CAPSHIM_NUM_FIELDS, sizeof(capshim_VkPhysicalDeviceVulkan14Properties));"
        " return 0; }\n")
    exe = tmp_path / "t"
    nb.run_compiler([nb.compiler(), "-std=gnu11", *nb.WARNINGS, "-I", str(tmp_path), "-o", str(exe), str(tmp_path / "t.c")])
    fields, size = map(int, subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert fields == sum(len(k.structs) for k in table.load().keys["vulkan"]) + 2
    # LP64: sType + padding + pNext (16), 19 four-byte members (76), count, pointer, count + 4 padding,
    # pointer (32), the 16-byte UUID, one VkBool32 and 4 bytes of tail padding (24)
    assert size == 144


# ---------- hostile inputs (docs/hostile-inputs.md, Registry) ----------

def test_a_misspelled_member_is_refused_with_the_closest_name(vk):
    msg = _refused(vk, {"key": "subgroupSupportedStages",
                        "structs": ["VkPhysicalDeviceSubgroupProperties:supportedStage"]})
    assert "VkPhysicalDeviceSubgroupProperties (vk.xml 1.4.366) has no member 'supportedStage'" in msg
    assert "did you mean 'supportedStages'?" in msg
    msg = _refused(vk, {"key": "shaderFlaot16"})
    assert "has a member 'shaderFlaot16' (did you mean 'shaderFloat16'?)" in msg


def test_a_struct_not_in_the_registry_is_refused_with_the_closest_name(vk):
    msg = _refused(vk, {"key": "shaderFloat16", "structs": ["VkPhysicalDeviceShaderFloat16Int8Feature"]})
    assert "struct VkPhysicalDeviceShaderFloat16Int8Feature is not in vk.xml 1.4.366" in msg
    assert "did you mean 'VkPhysicalDeviceShaderFloat16Int8Features'?" in msg
    assert "alias of VkPhysicalDeviceSubgroupSizeControlProperties" in _refused(
        vk, {"key": "minSubgroupSize", "structs": ["VkPhysicalDeviceSubgroupSizeControlPropertiesEXT"]})
    assert "VkApplicationInfo is not a structure of vkGetPhysicalDeviceProperties2/Features2" in _refused(
        vk, {"key": "apiVersion", "structs": ["VkApplicationInfo"]})


def test_a_registry_older_than_a_key_is_named(vk, tmp_path, monkeypatch, capsys):
    """An installed vk.xml that lacks a struct the table uses (here: 1.4.366 with the NV
    cooperative matrix 2 struct removed, called 1.4.300) is refused naming both versions;
    generate --write exits 2 and writes nothing."""
    old = copy.copy(vk)
    old.structs = {n: s for n, s in vk.structs.items() if n != "VkPhysicalDeviceCooperativeMatrix2FeaturesNV"}
    old.headerVersionComplete = "1.4.300"
    msg = _refused(old, {"key": "cooperativeMatrixBlockLoads"}, committed="1.4.366")
    assert "vk.xml 1.4.300 has a member 'cooperativeMatrixBlockLoads'" in msg
    assert "pip install 'vulkan-object>=1.4.366'" in msg
    monkeypatch.setattr(registry, "registry_object", lambda: old)
    facts = tmp_path / generate.FACTS
    facts.parent.mkdir(parents=True)
    facts.write_text(FACTS.read_text())
    assert generate.main(["--root", str(tmp_path), "--write"]) == 2
    err = capsys.readouterr().err
    assert "vk.xml 1.4.300 has a member 'cooperativeMatrixWorkgroupScope'" in err
    assert "the committed facts come from vk.xml 1.4.366, newer than the installed vulkan-object's 1.4.300" in err
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [facts.name]
    assert facts.read_text() == FACTS.read_text()


def test_a_key_in_several_structures_must_say_which(vk):
    msg = _refused(vk, {"key": "cooperativeMatrix"})
    assert ("several structures (VkPhysicalDeviceCooperativeMatrixFeaturesKHR, "
            "VkPhysicalDeviceCooperativeMatrixFeaturesNV): say which with structs = [...]") in msg


@pytest.mark.parametrize("key, shape", [("maxComputeWorkGroupSize", "uint32_t[3]"), ("maxSamplerAnisotropy", "float"),
                                        ("deviceName", "char[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE]")])
def test_a_type_the_layer_cannot_carry_is_refused(vk, key, shape):
    assert f"{key} is {shape} in vk.xml; the layer carries VkBool32, uint32_t and 32-bit VkFlags" in _refused(
        vk, {"key": key})


def test_stale_facts_name_the_command_and_import_falls_back_to_vk_xml(monkeypatch, capsys):
    """A key added but not regenerated: parse names the command; load (at import, which
    generate --write itself needs) reads vk.xml instead, with a warning."""
    text = _with_line(ONE_LINE)
    with pytest.raises(table.StaleFacts, match=r"vulkan key 'maxPushDescriptors': registry_facts.toml "
                                               r"\(vk.xml 1.4.366\) does not have it: run python -m "
                                               r"capshim.profiles.generate --write"):
        table.parse(text)
    monkeypatch.setattr(table, "shipped_text", lambda: text)
    table.load.cache_clear()
    try:
        assert table.load().entry("vulkan", "maxPushDescriptors").type == "u32"
    finally:
        table.load.cache_clear()
    assert "meanwhile the facts come from vk.xml 1.4.366 (vulkan-object)" in capsys.readouterr().err
    with pytest.raises(table.TableError, match="type comes from the Vulkan registry"):
        table.parse(TOML.read_text().replace('key = "shaderInt16", ', 'key = "shaderInt16", type = "bool", '))


def test_a_flag_bit_vk_xml_lacks_is_refused():
    text = TOML.read_text().replace("quad = 0x80", "quad = 0x40000000")
    with pytest.raises(table.TableError, match=r"flags.VkSubgroupFeatureFlagBits.quad = 0x40000000: not a bit"):
        table.parse(text)


def test_without_vulkan_object_the_check_still_runs_and_write_refuses(monkeypatch, tmp_path, capsys):
    """capshim never needs vulkan-object; the generator's check then compares caps_table.h and the
    docs with the committed facts (and says the facts were not checked); --write needs it."""
    def missing():
        raise registry.RegistryError("no vulkan-object")
    monkeypatch.setattr(registry, "registry_object", missing)
    assert generate.main(["--root", str(ROOT)]) == 0
    assert "registry_facts.toml was not checked against vk.xml" in capsys.readouterr().err
    assert generate.main(["--root", str(tmp_path), "--write"]) == 2
    assert "--write needs vulkan-object" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_capshim_runs_without_vulkan_object():
    """The catalog (at import) and a profile check read the committed facts: with vulkan-object
    made unimportable, both work."""
    code = ("import sys; sys.modules['vulkan_object'] = None\n"
            "from capshim.profiles import catalog, table\n"
            "from capshim.cli import main\n"
            "assert catalog.KEYS['vulkan']['subgroupSupportedStages'] == 'flags'\n"
            "assert table.load().registry == '1.4.366'\n"
            "main(['profile', 'check', 'vulkan-paravirt'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
