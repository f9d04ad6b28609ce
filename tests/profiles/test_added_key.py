"""A capability added as one table entry works end to end on the real driver (lavapipe in CI).

shaderSubgroupExtendedTypes (VkPhysicalDeviceVulkan12Features,
VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures) was added to
capabilities.toml and nothing else: the probe reports it and the layer lowers it.
"""

from __future__ import annotations

import pytest

from capshim import profiles
from capshim.backends import vulkan

pytestmark = pytest.mark.slow  # every test here runs a real component (tests/test_tiers.py)

KEY = "shaderSubgroupExtendedTypes"
LOWER = """name = "no-subgroup-extended-types"
api = "vulkan"
direction = "lower"
version = 1
description = "hide subgroup operations on extended types"

[capabilities]
shaderSubgroupExtendedTypes = false
"""


def test_probe_reports_the_new_key(stock_probe):
    assert stock_probe["capabilities"][KEY] is True  # lavapipe (Mesa 22.3) supports it


def test_a_lower_profile_hides_it_and_nothing_else(stock_probe):
    sim = vulkan.probe(simulate=profiles.parse(LOWER, "test:no-subgroup-extended-types"))
    assert sim["shim"][vulkan.LAYER_DEVICE]["state"] == "active"
    assert sim["capabilities"][KEY] is False
    assert {k: v for k, v in sim["capabilities"].items() if k != KEY} == \
        {k: v for k, v in stock_probe["capabilities"].items() if k != KEY}


def _as_vulkan_11(hide=""):
    return profiles.parse(LOWER.replace('"hide subgroup', '"answer Vulkan 1.1; hide subgroup')
                          .replace("shaderSubgroupExtendedTypes = false", 'apiVersion = "1.1.0"')
                          + (f"[extensions]\n{hide} = false\n" if hide else ""), "test:vulkan-1.1")


def test_below_vulkan_12_the_probe_asks_the_extension_struct(stock_probe):
    """The table's guards reach the probe: on a device that answers 1.1 the key comes from
    VkPhysicalDeviceShaderSubgroupExtendedTypesFeatures, and only while its extension is listed."""
    assert "VK_KHR_shader_subgroup_extended_types" in stock_probe["extensions"]
    sim = vulkan.probe(simulate=_as_vulkan_11())
    assert sim["capabilities"]["apiVersion"] == "1.1.0"
    assert sim["capabilities"][KEY] is True
    sim = vulkan.probe(simulate=_as_vulkan_11("VK_KHR_shader_subgroup_extended_types"))
    assert sim["capabilities"][KEY] is None
