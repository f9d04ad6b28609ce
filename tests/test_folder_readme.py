"""A sealed folder's README.md: documentation outside the seal (the rule in capshim.evidence.files.DOC_FILE),
written by `capshim evidence readme`, and each committed folder's README is what it writes now."""

from __future__ import annotations

import os
import shutil
import threading

import pytest
from click.testing import CliRunner

from capshim import evidence, folder_readme, paths
from capshim.cli import main
from capshim.evidence import study
from tests.conftest import REPO

EVIDENCE = REPO / "evidence"
#: The committed sealed folders at the top of evidence/ (bundles and studies; not their nested bundles).
TOP = sorted(p for p in EVIDENCE.iterdir() if (p / "SHA256SUMS").is_file())


def _copy(tmp_path, name="lavapipe-default-warmup-round"):
    dst = tmp_path / name
    shutil.copytree(EVIDENCE / name, dst, symlinks=True)
    (dst / "README.md").unlink(missing_ok=True)
    return dst


def _verify(folder):
    return study.verify(folder) if study.is_study(folder) else evidence.verify(folder)


def test_the_sealed_folders_are_committed():
    assert len(TOP) == 23 and {"h200-aa-geomean", "h200-tinyllama-aa", "h200-torch-sdpa", "h200-cuda-clients"} <= {p.name for p in TOP}


@pytest.mark.parametrize("folder", TOP, ids=lambda p: p.name)
def test_committed_readme_is_what_evidence_readme_writes_now(folder, monkeypatch):
    """Stale tables cannot stay: the facts and tables are generated, only the "by hand" part is kept."""
    monkeypatch.chdir(REPO)
    rel = folder.relative_to(REPO)
    assert folder_readme.stale(rel) == []
    assert _verify(rel) == []
    assert "README.md" in evidence.unsealed_documentation(rel)


def test_verify_names_the_readme_as_not_sealed_and_a_study_too(tmp_path):
    b = _copy(tmp_path)
    (b / "README.md").write_text("# notes\n")
    assert evidence.verify(b) == []
    r = CliRunner().invoke(main, ["evidence", "verify", str(b)])
    assert r.exit_code == 0 and "not sealed: README.md (documentation" in r.output
    s = _copy(tmp_path, "lavapipe-ablate-default")
    (s / "README.md").write_text("# study\n")
    (s / "bench" / "README.md").write_text("# nested\n")
    assert study.verify(s) == []
    r = CliRunner().invoke(main, ["evidence", "verify", str(s)])
    assert r.exit_code == 0 and "not sealed: README.md" in r.output and "not sealed: bench/README.md" in r.output


def test_tampering_with_a_sealed_file_still_fails_with_a_readme(tmp_path):
    b = _copy(tmp_path)
    folder_readme.write(b, "It shows nothing.")
    (b / "results.csv").write_text("arm,run\n")
    assert evidence.verify(b) == ["results.csv: checksum mismatch"]
    with pytest.raises(evidence.EvidenceError, match="does not verify"):  # no README for a broken folder
        folder_readme.write(b, "x")


def test_a_readme_elsewhere_in_the_folder_is_an_unlisted_file(tmp_path):
    b = _copy(tmp_path)
    (b / "raw" / "README.md").write_text("planted\n")
    assert evidence.verify(b) == ["raw/README.md: not listed in SHA256SUMS"]


def test_a_readme_listed_in_the_seal_is_outside_the_layout(tmp_path):
    b = _copy(tmp_path)
    (b / "README.md").write_text("sealed by hand\n")
    listed, _ = paths.read_sums(b)
    paths.write_sums(b, sorted([*listed, "README.md"]))
    assert any(p.startswith("README.md: not part of a bundle's layout") for p in evidence.verify(b))
    (b / "README.md").write_text("changed\n")
    assert "README.md: checksum mismatch" in evidence.verify(b)


def test_a_new_seal_never_lists_the_readme(tmp_path):
    b = _copy(tmp_path)
    (b / "README.md").write_text("# notes\n")
    assert "README.md" not in evidence.bundle_files(b)
    evidence.seal.write_sums(b)
    assert "README.md" not in paths.read_sums(b)[0] and evidence.verify(b) == []


def test_readme_link_fifo_and_huge_are_refused_without_hanging(tmp_path):
    b = _copy(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_text("# elsewhere\n")
    (b / "README.md").symlink_to(outside)
    assert any(p.startswith("README.md: is a link") for p in evidence.verify(b))
    assert evidence.unsealed_documentation(b) == []
    (b / "README.md").unlink()
    os.mkfifo(b / "README.md")
    done = threading.Event()

    def check():  # nothing opens the FIFO: verify, the notes, the check and the writer return
        assert any(p.startswith("README.md: is not a regular file") for p in evidence.verify(b))
        assert evidence.unsealed_documentation(b) == []
        assert "missing, or not a regular file" in folder_readme.stale(b)[0]
        done.set()

    t = threading.Thread(target=check, daemon=True)
    t.start()
    assert done.wait(60), "a FIFO named README.md blocked verify"
    (b / "README.md").unlink()
    (b / "README.md").write_bytes(b"x" * (evidence.DOC_LIMIT + 1))
    assert evidence.verify(b) == [f"README.md: {evidence.DOC_LIMIT + 1} bytes, over the 256 KiB a folder's "
                                  "documentation may have (it is outside the seal, so only words belong there)"]
    r = CliRunner().invoke(main, ["evidence", "verify", str(b)])
    assert r.exit_code == 1 and "over the 256 KiB" in r.output


def test_writing_over_a_fifo_or_link_named_readme_is_refused_without_opening_it(tmp_path):
    b = _copy(tmp_path)
    os.mkfifo(b / "README.md")
    with pytest.raises(evidence.EvidenceError, match="README.md: is not a regular file"):
        folder_readme.write(b, "Words.")  # the folder does not verify: nothing written, the FIFO never opened
    assert (b / "README.md").is_fifo()
    target = tmp_path / "target.md"
    target.write_text("keep\n")
    (b / "README.md").unlink()
    (b / "README.md").symlink_to(target)
    with pytest.raises(evidence.EvidenceError, match="README.md: is a link"):
        folder_readme.write(b, "Words.")
    assert target.read_text() == "keep\n"


def test_the_hand_part_is_kept_and_the_table_is_generated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    b = _copy(tmp_path)
    rel = b.relative_to(tmp_path)
    folder_readme.write(rel)
    assert folder_readme.stale(rel) == [f"{rel}/README.md: the \"by hand\" part is not written"]
    text = (b / "README.md").read_text().replace(folder_readme.PLACEHOLDER, "It shows the path columns.")
    (b / "README.md").write_text(text.replace("| vm-unlocked | pp512 | 428.17 |", "| vm-unlocked | pp512 | 999 |"))
    assert "differs from what" in folder_readme.stale(rel)[0]
    r = CliRunner().invoke(main, ["evidence", "readme", "--check", str(rel)])
    assert r.exit_code == 1 and "write it again" in r.output
    r = CliRunner().invoke(main, ["evidence", "readme", str(rel)])
    assert r.exit_code == 0, r.output
    out = (b / "README.md").read_text()
    assert "It shows the path columns." in out and "| vm-unlocked | pp512 | 428.17 |" in out
    assert "`capshim bench`" in out and "llvmpipe (LLVM 15.0.6, 256 bits) (cpu" in out
    assert f"`capshim report {rel} --format md`" in out
    r = CliRunner().invoke(main, ["evidence", "readme", "--check", str(rel)])
    assert r.exit_code == 0 and r.output.startswith("ok: 1 README.md")


def test_readme_of_what_is_not_a_sealed_folder_is_exit_2(tmp_path):
    r = CliRunner().invoke(main, ["evidence", "readme", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "not a folder" in r.output
    (tmp_path / "plain").mkdir()
    r = CliRunner().invoke(main, ["evidence", "readme", str(tmp_path / "plain")])
    assert r.exit_code == 2 and "does not verify" in r.output
