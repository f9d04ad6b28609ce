"""One version number (issue 19): ``capshim --version``, the package metadata, the Vulkan layer's
manifests (implementation_version, description) and the shims' ``loaded`` status event all come
from ``capshim.__version__``; they disagreed (0.1.0 vs layer version 1)."""

from __future__ import annotations

import json
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from capshim import __version__
from capshim.backends import vulkan
from capshim.native import build as nb
from tests.conftest import REPO, run_capshim


def test_version_is_defined_once():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "capshim.__version__"}
    files = [REPO / "pyproject.toml", REPO / "setup.sh",
             *(p for p in (REPO / "src" / "capshim").rglob("*") if p.suffix in (".py", ".c", ".h", ".m", ".json", ".toml"))]
    hits = [str(p.relative_to(REPO)) for p in files if f'"{__version__}"' in p.read_text(errors="replace")]
    assert hits == ["src/capshim/__init__.py"], f"capshim's version written outside capshim/__init__.py: {hits}"


def test_cli_and_package_metadata_agree():
    r = run_capshim("--version", timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"capshim, version {__version__}"
    try:
        installed = metadata.version("capshim")
    except metadata.PackageNotFoundError:
        pytest.skip("capshim is not installed in this environment (only PYTHONPATH)")
    assert installed == __version__


def test_version_number_of_the_manifest():
    assert nb.version_number("0.1.0") == 100 and nb.version_number("1.2.3") == 10203
    assert nb.version_number("0.2.0rc1") == 200
    for bad in ("1.2", "1.100.0", "x.y.z"):
        with pytest.raises(ValueError, match="MAJOR.MINOR.PATCH"):
            nb.version_number(bad)
    assert nb.VERSION_DEFINE == f'-DCAPSHIM_VERSION_STRING="{__version__}"'


def test_the_vulkan_layer_reports_capshims_version(vk_build, tmp_path):
    for role, (layer, _var) in vulkan.ROLES.items():
        m = json.loads((vk_build.manifest_dirs[role] / f"{layer}.json").read_text())["layer"]
        assert m["implementation_version"] == str(nb.version_number())
        assert m["description"].startswith(f"capshim {__version__} ")
    status = tmp_path / "status.jsonl"
    r = run_capshim("run", "--profile", "vulkan-paravirt", "--status-file", str(status), "--",
                    "vulkaninfo", "--summary", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = [e for e in map(json.loads, status.read_text().splitlines()) if e.get("event") == "loaded"]
    assert loaded and all(e["version"] == __version__ for e in loaded), loaded


def test_the_native_sources_refuse_a_build_without_the_version(tmp_path):
    src = Path(nb.source_dir("vulkan"))
    for name in ("layer.h",):  # every layer_*.c includes it first
        assert "#error" in (src / name).read_text() and "CAPSHIM_VERSION_STRING" in (src / name).read_text()
    metal_src = (Path(nb.source_dir("metal")) / "metal_shim.c").read_text()
    assert '#error "CAPSHIM_VERSION_STRING is not defined' in metal_src
