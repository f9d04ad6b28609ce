"""Hostile inputs to the registry generator and the Metal host capture (issue 21, hostile pass;
docs/hostile-inputs.md rows 700-)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capshim import jsonread
from capshim.profiles import generate, metalhost
from tests.conftest import run_capshim

ROOT = Path(__file__).resolve().parents[2]
M1 = ROOT / "tests" / "fixtures" / "metal-host" / "m1-ultra.json"
GENERATED = ("src/capshim/native/vulkan/caps_table.h", "src/capshim/native/common/config_limits.h",
             "docs/capabilities.md", generate.FACTS)


def _copy_generated(root: Path) -> None:
    for rel in GENERATED:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes((ROOT / rel).read_bytes())


def test_a_generated_file_not_in_utf8_is_drift_not_a_traceback(tmp_path, capsys):
    _copy_generated(tmp_path)
    doc = tmp_path / "docs/capabilities.md"
    doc.write_bytes(doc.read_bytes() + b"\xff caf\xe9\n")  # a hand edit saved in Latin-1
    assert generate.main(["--root", str(tmp_path)]) == 1
    assert "capabilities.md: differs" in capsys.readouterr().err
    assert generate.main(["--root", str(tmp_path), "--write"]) == 0
    assert doc.read_bytes() == (ROOT / "docs/capabilities.md").read_bytes()


def test_a_generated_file_that_cannot_be_written_is_exit_2_naming_it(tmp_path, capsys):
    _copy_generated(tmp_path)
    doc = tmp_path / "docs/capabilities.md"
    doc.unlink()
    doc.mkdir()  # a folder where the generated file goes
    assert generate.main(["--root", str(tmp_path), "--write"]) == 2
    err = capsys.readouterr().err
    assert "capabilities.md" in err and "is a folder" in err and "Traceback" not in err


def test_a_capture_with_a_key_twice_is_refused(tmp_path):
    text = M1.read_text().replace('"apple": 1007,', '"apple": 1009, "apple": 1007,')
    path = tmp_path / "dup.json"
    path.write_text(text)
    with pytest.raises(jsonread.JsonShapeError) as exc:
        metalhost.read_capture(path)
    assert "$.stock.highest" in str(exc.value) and "'apple' appears twice" in str(exc.value)
    r = run_capshim("profile", "from-host", str(path))
    assert r.returncode == 2 and "appears twice" in r.stderr and r.stdout == ""


def test_a_metal_capture_is_not_a_khronos_profile(tmp_path):
    r = run_capshim("profile", "show", str(M1))
    assert r.returncode == 2 and "not a Vulkan Profiles file" in r.stderr and "Traceback" not in r.stderr
    cap = json.loads(M1.read_text())
    assert cap["api"] == "metal"


def test_host_text_in_check_host_output_is_escaped(tmp_path):
    """The capture's OS strings may hold any text (its schema bounds only their length) and a
    device name may hold a bidi override (not a control byte): neither reaches the terminal raw."""
    cap = json.loads(M1.read_text())
    cap["stock"]["device"] = "Apple \u202eM1"
    cap["os"]["version"] = "26.6\x1b[2J"
    path = tmp_path / "cap.json"
    path.write_text(json.dumps(cap))
    prof = tmp_path / "p.toml"
    r = run_capshim("profile", "from-host", str(path), "-o", str(prof))
    assert r.returncode == 0, r.stderr
    assert metalhost.read_capture(path).label() == "Apple \\u202eM1 (macOS 26.6\\x1b[2J)"
    r = run_capshim("profile", "check", "--host", str(path), str(prof))
    assert r.returncode == 0, r.stderr
    for text in (r.stdout, r.stderr):
        assert "\x1b" not in text and "\u202e" not in text
    assert "\\u202eM1" in r.stdout


@pytest.mark.parametrize("content", [b"\xff\xfe[keys]\n", None])
def test_shipped_facts_not_utf8_or_a_folder_are_stale_not_a_traceback(tmp_path, monkeypatch, content):
    """registry_facts.toml in an installed package that is not UTF-8 (bit rot, a Latin-1 edit) or
    is a folder: StaleFacts naming the file and the generator, as for a file that is not TOML
    (the import then falls back to vk.xml with a warning); was a UnicodeDecodeError traceback at
    import, from every command."""
    from types import SimpleNamespace

    from capshim.profiles import registry, table
    facts = tmp_path / registry.FACTS_FILE
    if content is None:
        facts.mkdir()
    else:
        facts.write_bytes(content)
    monkeypatch.setattr(registry, "resources", SimpleNamespace(files=lambda pkg: tmp_path))
    registry.load.cache_clear()
    try:
        with pytest.raises(table.StaleFacts) as exc:
            table.parse(table.shipped_text())
        assert registry.FACTS_FILE in str(exc.value) and "generate --write" in str(exc.value)
    finally:
        registry.load.cache_clear()
