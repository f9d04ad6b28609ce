"""Fixtures for the backend tests: sanitized Metal builds (GNU runtime)."""


import pytest


from tests.backends.metal_harness import Harness, build_sanitized  # noqa: E402


@pytest.fixture(scope="session")
def metal_arts(tmp_path_factory):
    """ASan+UBSan builds of the shim, stand-in, probe, driver and fuzz driver."""
    return build_sanitized(tmp_path_factory.mktemp("metal-asan"))


@pytest.fixture
def shim(metal_arts, tmp_path):
    """Runs the test driver, one fresh process per call."""
    return Harness(metal_arts, tmp_path)
