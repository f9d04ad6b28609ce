"""A corrupted cached layer library is never used: checked against its SHA256SUMS, then rebuilt (issue 9)."""

from __future__ import annotations

import shutil

from capshim import paths
from capshim.backends import vulkan


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
