"""Helpers for the report/bench tests: paths to fixtures, all inside the repository.

The seed's raw runs the tests need are copied under ``tests/fixtures/`` (each
folder's SOURCE.md says where from), so the suite passes on a fresh clone with
nothing beside it.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"

_CUA_FOLDERS = {
    "2026-08-09-m1-ultra": FIXTURES / "cua",
    "2026-08-10-m1-ultra-gemma4": FIXTURES / "cua-gemma4",
}


class _CuaRuns:
    """``cua_dir() / "<folder of the seed's evidence>"``: the copy of that folder under tests/fixtures/."""

    def __truediv__(self, folder: str) -> Path:
        return _CUA_FOLDERS[folder]


def cua_dir() -> _CuaRuns:
    """The seed's raw runs, by the folder names of ``cua-metal-evidence`` (copied into tests/fixtures/)."""
    return _CuaRuns()
