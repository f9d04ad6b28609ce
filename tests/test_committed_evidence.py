"""Every evidence bundle committed under evidence/ verifies (checksums, layout, no links)."""

from __future__ import annotations

import pytest

from capshim import evidence
from tests.conftest import REPO

BUNDLES = sorted(p.parent for p in (REPO / "evidence").rglob("SHA256SUMS"))


def test_the_committed_bundles_are_found():
    names = {b.relative_to(REPO / "evidence").as_posix() for b in BUNDLES}
    assert {"h200-tinyllama-aa", "h200-ablate-llama8b/bench", "h200-tune-llama8b/confirm"} <= names


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.relative_to(REPO / "evidence").as_posix())
def test_committed_bundle_verifies(bundle):
    assert evidence.verify(bundle) == []
