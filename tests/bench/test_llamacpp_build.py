"""The llama-bench build's unpacking on every Python it supports (the build itself: test_llamabench_live.py).

Debian 12's Python is 3.11.2, whose tarfile has no extraction filters (PEP 706 came in 3.11.4): a fresh
machine's first `pytest` failed with "extractall() got an unexpected keyword argument 'filter'".
"""

from __future__ import annotations

import io
import tarfile

import pytest

from capshim.bench import llamacpp_build
from capshim.errors import BuildError


def _sdist(path, members):
    """A .tar.gz with ``members``: (name, text) files, or (name, "->target") symbolic links."""
    with tarfile.open(path, "w:gz") as tf:
        for name, text in members:
            info = tarfile.TarInfo(name)
            if text.startswith("->"):
                info.type, info.linkname = tarfile.SYMTYPE, text[2:]
                tf.addfile(info)
            else:
                data = text.encode()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("filters", [True, False], ids=["with-filters", "python-3.11.2"])
def test_unpack_works_with_and_without_tarfiles_filters(tmp_path, monkeypatch, filters):
    if not filters:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    sdist = _sdist(tmp_path / "llama_cpp_python-0.3.36.tar.gz",
                   [("llama_cpp_python-0.3.36/vendor/llama.cpp/CMakeLists.txt", "project(x)")])
    llama = llamacpp_build._unpack(sdist, tmp_path / "src", say=lambda m: None)
    assert (llama / "CMakeLists.txt").read_text() == "project(x)"


@pytest.mark.parametrize("member", [("../evil", "x"), ("/abs/evil", "x"), ("ok/link", "->../../outside")])
def test_unpack_without_filters_refuses_what_the_data_filter_refuses(tmp_path, monkeypatch, member):
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    sdist = _sdist(tmp_path / "llama_cpp_python-0.3.36.tar.gz", [member])
    with pytest.raises(BuildError, match="refusing to unpack"):
        llamacpp_build._unpack(sdist, tmp_path / "src", say=lambda m: None)
    assert not (tmp_path / "evil").exists()
