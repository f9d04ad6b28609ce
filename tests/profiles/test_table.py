"""The capability table: generated files stay in step, the C side sees the same kinds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from capshim.native import build as nb
from capshim.profiles import catalog, generate, table

ROOT = Path(__file__).resolve().parents[2]
TOML = ROOT / "src/capshim/profiles/capabilities.toml"


def test_generated_files_match_the_table():
    assert generate.main(["--root", str(ROOT)]) == 0


def test_drift_is_detected_and_rewritten(tmp_path, capsys):
    for rel in ("src/capshim/native/vulkan/caps_table.h", "src/capshim/native/common/config_limits.h",
                "docs/capabilities.md"):
        (tmp_path / rel).parent.mkdir(parents=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    header = tmp_path / "src/capshim/native/vulkan/caps_table.h"
    header.write_text(header.read_text().replace("CAPSHIM_SEM_LOWER)", "CAPSHIM_SEM_UPPER)", 1))
    assert generate.main(["--root", str(tmp_path)]) == 1
    assert "caps_table.h: differs" in capsys.readouterr().err
    assert generate.main(["--root", str(tmp_path), "--write"]) == 0
    assert generate.main(["--root", str(tmp_path)]) == 0


def test_catalog_is_the_table():
    t = table.load()
    assert list(catalog.VULKAN_KEYS) == [k.key for k in t.keys["vulkan"]]
    assert catalog.KINDS["vulkan"]["minSubgroupSize"] == "lower"
    assert catalog.KINDS["vulkan"]["subgroupSize"] == "exact"
    assert catalog.KINDS["vulkan"]["maxSubgroupSize"] == "upper"
    assert catalog.FLAG_NAMES["subgroupSupportedOperations"]["quad"] == 0x80
    assert len(catalog.VULKAN_KEYS) <= catalog.LIMITS["values_max"]


@pytest.mark.parametrize("edit, words", [
    (('kind = "lower"', 'kind = "sideways"'), "kind must be one of"),
    (('structs = ["VkPhysicalDeviceSubgroupProperties:supportedStages"',
      'structs = ["VkNoSuchStruct"'), "registry_facts.toml .*places it in"),
    (('key = "maxSubgroupSize"', 'key = "minSubgroupSize"'), "duplicate"),
    (('key = "shaderInt64", kind = "feature"', 'key = "shaderInt64", kind = "upper"'), "a feature is a bool"),
    (('key = "apiVersion", kind = "version"', 'key = "apiVersion", kind = "upper"'), "a version kind is a version"),
])
def test_table_mistakes_are_named(edit, words):
    text = TOML.read_text()
    assert edit[0] in text
    with pytest.raises(table.TableError, match=words):
        table.parse(text.replace(edit[0], edit[1], 1))


@pytest.mark.slow
def test_c_header_kinds_match_python(tmp_path):
    """Compile a program against the generated header; it prints every field with its kind."""
    src = tmp_path / "kinds.c"
    src.write_text('#include <stdio.h>\n#include "caps_table.h"\n'
                   "#define KEY(key, type, kind) printf(\"key %s %d %d\\n\", #key, type, kind);\n"
                   "int main(void) {\n"
                   "    for (size_t i = 0; i < CAPSHIM_NUM_FIELDS; i++)\n"
                   "        printf(\"field %s %d %d\\n\", capshim_fields[i].key, capshim_fields[i].kind,"
                   " capshim_fields[i].sem);\n"
                   "    CAPSHIM_KEYS(KEY)\n    return 0;\n}\n")
    exe = tmp_path / "kinds"
    nb.run_compiler([nb.compiler(), "-std=gnu11", *nb.WARNINGS, "-I", str(nb.source_dir("vulkan")), "-I", str(nb.source_dir(nb.COMMON)),
                     "-o", str(exe), str(src)])
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    types = {"bool": 1, "u32": 2, "flags": 3, "version": 4}
    want = {k.key: (types[k.type], table.KINDS.index(k.kind) + 1) for k in table.load().keys["vulkan"]}
    keys = [line.split() for line in out if line.startswith("key ")]
    assert [k[1] for k in keys] == list(want)
    fields = [line.split() for line in out if line.startswith("field ")]
    assert {f[1] for f in fields} == set(want)
    for row in keys + fields:
        assert (int(row[2]), int(row[3])) == want[row[1]], row
