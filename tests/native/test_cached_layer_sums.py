"""The native build cache: a corrupted cached library is rebuilt (issue 9); a full cache disk is exit 4
naming the file or folder, with no temporary build folder left (issue 18)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from capshim import paths
from capshim.backends import vulkan
from capshim.native import build as nb
from tests.conftest import REPO


@pytest.mark.slow
def test_corrupted_cached_library_is_rebuilt(tmp_path, monkeypatch, vk_build, capsys):
    monkeypatch.setenv("CAPSHIM_CACHE_DIR", str(tmp_path / "cache"))
    # seed the private cache with a copy of the built folder (no compile needed)
    target = paths.cache_root() / "native" / vk_build.dir.name
    shutil.copytree(vk_build.dir, target)
    b = vulkan.build()
    assert b.dir == target and paths.check_sums(target) == []
    good = b.library.read_bytes()
    data = bytearray(good)
    data[len(data) // 2] ^= 0xFF  # one flipped byte: same size
    b.library.write_bytes(bytes(data))
    b2 = vulkan.build()
    assert "does not match its SHA256SUMS" in capsys.readouterr().err
    assert paths.check_sums(b2.dir) == [] and b2.library.is_file()


# --- a full cache disk (issue 18): exit 4 naming the file or folder, no .tmp-* left -----------------

FULL_DISK_DRIVER = textwrap.dedent("""
    import errno, os, pathlib, sys
    cache = os.environ["CAPSHIM_CACHE_DIR"]
    real = {name: getattr(pathlib.Path, name) for name in ("write_bytes", "write_text")}

    def full(name):
        def write(self, *a, **k):
            if str(self).startswith(cache):
                raise OSError(errno.ENOSPC, "No space left on device")  # as write() gives it: no file name
            return real[name](self, *a, **k)
        return write

    for name in real:
        setattr(pathlib.Path, name, full(name))
    from capshim.cli import main
    sys.argv = ["capshim", *sys.argv[1:]]
    main()
""")


@pytest.mark.slow
def test_a_full_cache_disk_while_building_is_exit_4_naming_the_folder(tmp_path):
    """``capshim build`` on a full cache disk once said "cannot write the output" and left a .tmp-* folder."""
    driver = tmp_path / "full_disk.py"
    driver.write_text(FULL_DISK_DRIVER)
    cache = tmp_path / "cache"
    env = dict(os.environ, CAPSHIM_CACHE_DIR=str(cache), CPATH=os.environ.get("CPATH") or "/usr/include",
               PYTHONPATH=str(REPO / "src") + os.pathsep + str(REPO))
    r = subprocess.run([sys.executable, str(driver), "build", "--api", "vulkan", "--force"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 4, r.stderr
    assert "Traceback" not in r.stderr and "cannot write the output" not in r.stderr
    assert f"{cache}/native/vulkan-" in r.stderr and "cannot write: No space left on device" in r.stderr
    assert not [p for p in cache.rglob("*") if ".tmp-" in p.name]


def test_a_full_disk_while_publishing_keeps_the_old_build_and_no_tmp(tmp_path, monkeypatch):
    final = tmp_path / "native" / "x-abc"
    final.mkdir(parents=True)
    (final / "lib.so").write_text("old")
    real = os.rename

    def rename(src, dst):
        if ".tmp-" in os.fspath(src):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(nb.paths.StorageError) as info:
        with nb.staging(final) as tmp:
            (tmp / "lib.so").write_text("new")
            nb.publish(tmp, final, replace=True)
    assert info.value.exit_code == 4
    assert str(info.value).startswith(f"{final}: cannot write: No space left on device")
    assert (final / "lib.so").read_text() == "old"  # the old build is put back
    assert sorted(p.name for p in final.parent.iterdir()) == ["x-abc"]  # no .tmp-*, no .old-*


def test_a_compiler_that_runs_out_of_space_is_exit_4(tmp_path):
    cc = tmp_path / "cc"
    cc.write_text("#!/bin/sh\necho 'ld: final link failed: No space left on device' >&2\nexit 1\n")
    cc.chmod(0o755)
    with pytest.raises(nb.paths.StorageError) as info:
        nb.run_compiler([str(cc), "x.c"], tmp_path)
    assert info.value.exit_code == 4 and str(info.value).startswith(f"{tmp_path}: cannot write: No space left")


def test_a_compile_error_leaves_no_tmp_folder(tmp_path):
    final = tmp_path / "native" / "y-abc"
    with pytest.raises(nb.BuildError):
        with nb.staging(final) as tmp:
            (tmp / "bad.c").write_text("int x = ;\n")
            nb.run_compiler(["cc", "-c", "bad.c"], tmp)
    assert list(final.parent.iterdir()) == []
