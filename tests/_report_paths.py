"""Helpers for the report/bench tests: paths to fixtures and to the shared data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
CUA = REPO.parent / "shared" / "data" / "cua-metal-evidence"


def cua_dir() -> Path:
    """The seed's raw runs; CI puts a copy of shared/ beside the clone. Missing is a failure."""
    if not (CUA / "SOURCE.md").is_file():
        pytest.fail(f"the seed's evidence is missing: expected {CUA} (a copy of shared/ beside the "
                    "repository clone, holding data/cua-metal-evidence/)")
    return CUA
