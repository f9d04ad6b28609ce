"""capshim.paths: the one cache-root rule, hashing, atomic publish, SHA256SUMS, bounded reads."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import pytest

from capshim import paths
from capshim.bench import llamacpp_build, model, runner
from capshim.native import build as nb


def test_cache_root_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSHIM_CACHE_DIR", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_root() == tmp_path / "own"
    monkeypatch.setenv("CAPSHIM_CACHE_DIR", "")
    assert paths.cache_root() == tmp_path / "xdg" / "capshim"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert paths.cache_root() == Path.home() / ".cache" / "capshim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert paths.cache_root() == Path.home() / ".cache" / "capshim"


def test_every_caller_uses_the_one_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSHIM_CACHE_DIR", str(tmp_path / "c"))
    assert paths.cache_root() == tmp_path / "c"
    assert model.capshim_cache_dir() == tmp_path / "c"
    assert llamacpp_build.default_cache_dir() == tmp_path / "c" / "llama-bench"
    src = tmp_path / "a.c"
    src.write_text("int x;")
    d = nb.build_dir("vulkan", [src], [["cc", "-O2"]])
    assert d.parent == tmp_path / "c" / "native"
    # a changed flag or source gives another folder
    assert nb.build_dir("vulkan", [src], [["cc", "-O3"]]) != d
    src.write_text("int y;")
    assert nb.build_dir("vulkan", [src], [["cc", "-O2"]]) != d


def test_model_hash_in_bundle_is_the_digest_not_the_json_sidecar(tmp_path):
    """The runner once read the JSON sidecar as text and wrote '{"sha256":' as the model hash."""
    m = tmp_path / "m.gguf"
    m.write_bytes(b"GGUF" + b"\0" * 100)
    want = hashlib.sha256(m.read_bytes()).hexdigest()
    assert paths.cached_sha256(m) == want  # writes the JSON sidecar
    assert json.loads((tmp_path / "m.gguf.sha256").read_text())["sha256"] == want
    paths._MEMO.clear()
    assert runner._model_sha(m) == want
    # a sidecar of another shape (old plain text, junk, a user's file) is ignored and left as it is
    (tmp_path / "m.gguf.sha256").write_text('{"sha256": 5}')
    paths._MEMO.clear()
    assert runner._model_sha(m) == want
    assert (tmp_path / "m.gguf.sha256").read_text() == '{"sha256": 5}'


def test_a_sidecar_nested_deep_is_hashed_again_not_a_traceback(tmp_path):
    """A 4,096-byte sidecar of ``[`` (deeper than Python's recursion limit) once raised RecursionError."""
    m = tmp_path / "m.gguf"
    m.write_bytes(b"GGUF" + b"\0" * 100)
    (tmp_path / "m.gguf.sha256").write_text("[" * 4096)
    paths._MEMO.clear()
    assert paths.cached_sha256(m) == hashlib.sha256(m.read_bytes()).hexdigest()
    assert (tmp_path / "m.gguf.sha256").read_text() == "[" * 4096  # not capshim's: left as it is


def test_atomic_write_full_disk_leaves_nothing(tmp_path, monkeypatch):
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.fh.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(paths.os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))
    with pytest.raises(paths.StorageError) as info:
        paths.atomic_write(tmp_path / "x.json", b"{}")
    assert info.value.exit_code == 4 and "x.json" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_with_no_room_for_its_temporary_file_is_exit_4(tmp_path, monkeypatch):
    """A full disk can refuse the temporary file itself (no free inode or block for the folder)."""
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(paths.tempfile, "mkstemp", full)
    with pytest.raises(paths.StorageError) as info:
        paths.atomic_write(tmp_path / "x.json", b"{}")
    assert str(info.value) == f"{tmp_path / 'x.json'}: cannot write: No space left on device (nothing partial was left)"


def test_sums_write_and_check(tmp_path):
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"b")
    paths.write_sums(tmp_path, ["a", "sub/b"])
    assert paths.check_sums(tmp_path) == []
    assert paths.verified_sums(tmp_path, ["a"]) == []
    (tmp_path / "a").write_bytes(b"A")
    assert paths.check_sums(tmp_path) == ["a: checksum mismatch"]
    assert paths.verified_sums(tmp_path, ["a"]) == ["a: checksum mismatch"]
    (tmp_path / "SHA256SUMS").write_text("0" * 64 + "  ../etc/passwd\nnonsense\n")
    probs = paths.check_sums(tmp_path)
    assert any("outside" in p for p in probs) and any("malformed" in p for p in probs)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/full", "/dev/null", "fifo", "folder"])
def test_read_limited_refuses_non_regular(tmp_path, target):
    if target == "fifo":
        target = tmp_path / "f"
        os.mkfifo(target)
    elif target == "folder":
        target = tmp_path
    with pytest.raises(OSError) as info:
        paths.read_limited(target, 1024)  # returns at once: no block on the FIFO, no endless read
    assert info.value.errno in (errno.EINVAL, errno.EISDIR)


def test_read_limited_caps_size(tmp_path):
    f = tmp_path / "big"
    f.write_bytes(b"x" * 5000)
    assert paths.read_limited(f, 5000) == b"x" * 5000
    with pytest.raises(OSError) as info:
        paths.read_limited(f, 4999)
    assert info.value.errno == errno.EFBIG


def test_publish_dir_keeps_the_winner_or_replaces(tmp_path):
    final = tmp_path / "build-abc"
    a = paths.new_tmp_dir(final)
    (a / "x").write_text("a")
    paths.publish_dir(a, final)
    b = paths.new_tmp_dir(final)
    (b / "x").write_text("b")
    paths.publish_dir(b, final)  # another process won the race: theirs stays
    assert (final / "x").read_text() == "a" and not b.exists()
    c = paths.new_tmp_dir(final)
    (c / "x").write_text("c")
    paths.publish_dir(c, final, replace=True)
    assert (final / "x").read_text() == "c"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build-abc"]  # nothing left aside
