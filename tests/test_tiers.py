"""The test tiers (``pytest -m "not slow"`` and the rest) and the signs of life of long steps.

``slow`` marks every test that runs a real component: a bench on the machine's Vulkan device
(lavapipe), a real llama.cpp or ncnn, the llama-bench build, PostgreSQL, valgrind, a C/Objective-C or
zig compile. The fast tier keeps at least one test of every test module (checked here), with
fakes and fixtures where the behaviour under test is not the real run.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from capshim.bench import llamacpp_build
from capshim.errors import BuildError
from tests.conftest import REPO

#: Test modules with no fast test, and why (each must stay without one: the test below says so).
ALL_SLOW: dict[str, str] = {}


def test_a_long_build_step_says_how_far_it_is(tmp_path):
    """The llama-bench compile (minutes) prints its CMake percentage, at least every 30 s and at each tenth."""
    said: list[str] = []
    log = tmp_path / "build.log"
    lines = "".join(f"[{p:3d}%] Building object {p}\n" for p in (1, 5, 9, 10, 22, 50, 100))
    llamacpp_build._run(["sh", "-c", 'printf "%s" "$0"', lines], log=log, say=said.append)
    assert said[0].startswith("$ sh -c")  # the command first
    assert [s.split("%")[0] for s in said[1:]] == ["1", "22", "50", "100"]
    assert log.read_text().count("Building object") == 7  # the log keeps every line
    with pytest.raises(BuildError, match=r"(?s)exit 3.*log: .*build.log\n.*Building object 100$"):
        llamacpp_build._run(["sh", "-c", "exit 3"], log=log, say=said.append)


def test_a_progress_line_reaches_the_terminal_whatever_the_capture(tmp_path):
    """tests/conftest.py's ``progress`` prints through pytest's capture (no ``-s``)."""
    (tmp_path / "test_p.py").write_text("def test_p(progress):\n    progress('step one of a long build')\n")
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
                                          "from tests.conftest import progress  # noqa: F401\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[capshim tests] step one of a long build" in r.stdout
