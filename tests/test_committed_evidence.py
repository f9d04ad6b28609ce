"""Every evidence bundle and study folder committed under evidence/ verifies (checksums, layout, no links)."""

from __future__ import annotations

import json

import pytest

from capshim import evidence
from capshim.evidence import study
from tests.conftest import REPO

SEALED = sorted(p.parent for p in (REPO / "evidence").rglob("SHA256SUMS"))
STUDIES = [p for p in SEALED if study.is_study(p)]
BUNDLES = [p for p in SEALED if not study.is_study(p)]
#: The output folders of ablate, tune and kernels committed here (each sealed as a study after its run).
STUDY_NAMES = {"h200-ablate-tinyllama", "h200-ablate-llama8b", "h200-tune-tinyllama", "h200-tune-llama8b",
               "h200-tune-llama8b-dims", "kernels-lavapipe-gemma3",
               "lavapipe-ablate-default", "lavapipe-tune-default"}
SEALED_BY_THEIR_RUN = {"lavapipe-ablate-default", "lavapipe-tune-default"}
#: Study kinds a script seals at the end of its run (scripts/cuda-clients/table.py), never afterwards.
KINDS_SEALED_BY_THEIR_RUN = {"cuda-clients"}


def _name(p):
    return p.relative_to(REPO / "evidence").as_posix()


def test_the_committed_bundles_are_found():
    names = {_name(b) for b in BUNDLES}
    assert {"h200-tinyllama-aa", "h200-ablate-llama8b/bench", "h200-tune-llama8b/confirm"} <= names


def test_every_committed_study_folder_is_sealed_as_a_study():
    tops = {p.name for p in (REPO / "evidence").iterdir()
            if p.is_dir() and any((p / f).exists() for f in ("ablation.json", "tune.json", "kernels.json"))}
    assert tops == STUDY_NAMES
    tables = {p.name for p in (REPO / "evidence").iterdir() if p.is_dir() and (p / "clients.json").exists()}
    assert {_name(s) for s in STUDIES} == STUDY_NAMES | tables
    for name in tables:  # a cuda-clients table is sealed as that kind of study, with its run's facts
        doc = study.read_study(REPO / "evidence" / name)
        assert doc["kind"] == "cuda-clients" and doc["bundles"] == [] and doc["facts"]["command"], name


@pytest.mark.parametrize("bundle", BUNDLES, ids=_name)
def test_committed_bundle_verifies(bundle):
    assert evidence.verify(bundle) == []


@pytest.mark.parametrize("folder", STUDIES, ids=_name)
def test_committed_study_verifies(folder):
    assert study.verify(folder) == []
    doc = json.loads((folder / "study.json").read_text())
    if _name(folder) in SEALED_BY_THEIR_RUN or doc["kind"] in KINDS_SEALED_BY_THEIR_RUN:
        assert doc["sealed_after"] is False
    else:  # sealed after the run, and says so (the seal proves integrity from then on, not from the run)
        assert doc["sealed_after"] is True and "not since the run" in doc["note"]
    if (folder / "run.txt").exists():
        assert "  run.txt\n" in (folder / "SHA256SUMS").read_text()


#: The H200 folders at the top of evidence/ that are sealed: each is signed with the project key,
#: whose public half is evidence/allowed_signers (docs/evidence.md, "The committed evidence").
H200_SEALED = sorted(p for p in SEALED if p.parent == REPO / "evidence" and p.name.startswith("h200-"))


def test_the_signed_h200_folders_are_found():
    assert {p.name for p in H200_SEALED} >= {"h200-tinyllama-r10", "h200-cuda-clients", "h200-tune-llama8b"}


@pytest.mark.parametrize("folder", H200_SEALED, ids=_name)
def test_committed_h200_folder_is_signed_by_the_project_key(folder):
    from capshim.evidence import signing

    checks = signing.check(folder, REPO / "evidence" / "allowed_signers")
    assert checks and all(c.problem is None for c in checks), [c.problem for c in checks]
    assert {c.principal for c in checks} == {"evidence@capshim"}
