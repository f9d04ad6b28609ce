"""capshim's small commands are instant: they import heavy libraries only where those are used (issue 28).

``capshim --help`` (every command's too), ``profiles``, ``db list`` and ``evidence verify`` must
take at most 0.5 s on the 2-core machine. The fast tier checks the cause, in a fresh interpreter
per command: which heavy libraries the command left in ``sys.modules`` (scipy alone is 0.7 s with
warm bytecode caches, 3 s without). The slow tier times the commands against ``python -c pass``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from capshim.cli.app import COMMANDS
from capshim.cli.db import COMMANDS as DB_COMMANDS
from tests.conftest import REPO

#: Libraries that cost 0.1-0.7 s each to import (python -X importtime, warm caches, the 2-core machine).
HEAVY = ("scipy", "numpy", "matplotlib", "sqlalchemy", "alembic", "jsonschema", "gguf", "psycopg", "pynvml",
         "cyllama", "hypothesis")
#: A small committed bundle for `evidence verify`.
BUNDLE = REPO / "evidence" / "h200-aa-geomean"
#: The most each timed command may take on the quiet 2-core machine, over the interpreter's own start, in seconds.
BUDGET_S = 0.5
#: ``python -c pass`` there: 12 ms of CPU (measured 2026-12-02 at load 2-7). A busy machine slows the
#: interpreter's start and a command's imports alike (at load 9 both took 1.6-1.8 times their CPU time at load
#: 2-7), so the budget is scaled by how much slower the start is now: a ratio to ``python -c pass``.
PASS_REF_S = 0.012

# Runs the CLI as `capshim ARGS` would, once per argument list given as JSON on stdin (all in this one
# interpreter: the modules add up), then writes the heavy modules imported to the file named by argv[1].
_PROBE = """
import json, sys
from capshim.cli.app import main
out = sys.argv[1]
todo = json.loads(sys.stdin.read())
codes = []
for args in todo["commands"]:
    try:
        main.main(args, prog_name="capshim", standalone_mode=True)
    except SystemExit as exc:
        codes.append(exc.code)
    else:
        codes.append(0)
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(todo["heavy"]))
open(out, "w").write(json.dumps({"codes": codes, "heavy": heavy}))
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """The children's environment: this checkout's capshim and a results store of their own, already at
    the newest schema (made here: a migration imports Alembic)."""
    tmp = tmp_path_factory.mktemp("import-cost")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["CAPSHIM_DB"] = str(tmp / "results.sqlite")
    proc = subprocess.run([sys.executable, "-m", "capshim.cli", "db", "list"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return env


def _heavy_imports(commands: list[list[str]], env: dict, tmp_path: Path) -> dict:
    """``{"codes": [exit code per command], "heavy": [heavy libraries imported]}`` of one fresh interpreter
    that ran ``commands`` one after the other."""
    out = tmp_path / "probe.json"
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(out)], capture_output=True, text=True, env=env,
                          input=json.dumps({"commands": commands, "heavy": HEAVY}), timeout=300)
    assert out.is_file(), f"no result ({proc.stderr[-2000:]})"
    return json.loads(out.read_text())


def _every_help() -> list[list[str]]:
    helps = [["--help"]] + [[name, "--help"] for name in COMMANDS]
    return helps + [["db", name, "--help"] for name in DB_COMMANDS] + [["evidence", "verify", "--help"]]


def test_help_of_every_command_imports_no_heavy_library(env, tmp_path):
    """--help of the program and of each command, all in one interpreter: click and capshim only."""
    helps = _every_help()
    r = _heavy_imports(helps, env, tmp_path)
    failed = [" ".join(a) for a, code in zip(helps, r["codes"]) if code not in (0, None)]
    assert not failed, f"--help failed: {failed}"
    assert not r["heavy"], f"--help imported {r['heavy']}"


@pytest.mark.parametrize(("args", "allowed"), [
    (["profiles"], {"jsonschema"}),  # the built-in profiles are validated when read
    (["db", "list"], {"sqlalchemy"}),  # the store is read through SQLAlchemy; Alembic only to migrate
    (["evidence", "verify", str(BUNDLE)], {"jsonschema"}),  # summary.json is checked against its schema
], ids=["profiles", "db-list", "evidence-verify"])
def test_small_commands_import_only_what_they_use(args, allowed, env, tmp_path):
    """No scipy, numpy or matplotlib for listing or checksums; no Alembic for a store already at HEAD."""
    r = _heavy_imports([args], env, tmp_path)
    assert r["codes"] == [0], f"capshim {' '.join(args)} exited {r['codes']}"
    assert set(r["heavy"]) <= allowed, f"capshim {' '.join(args)} imported {sorted(set(r['heavy']) - allowed)}"


def _cpu(argv: list[str], env: dict, runs: int) -> float:
    """The median CPU time (user + system, seconds) of ``runs`` runs of ``argv``: what the command costs
    itself (the wall time of a busy 2-core machine is mostly the other jobs); the median, because the
    kernel may account a process of a few milliseconds in whole clock ticks."""
    import statistics

    took = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(argv, capture_output=True, env=env, timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert proc.returncode == 0, f"{argv}: exit {proc.returncode}: {proc.stderr[-1000:]!r}"
        took.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(took)


@pytest.mark.slow
def test_small_commands_take_at_most_half_a_second_over_python_itself(env):
    """Each command's CPU time (median of 5, bytecode caches warm) is at most BUDGET_S over ``python -c pass``
    on the quiet machine, scaled by how much slower ``python -c pass`` is now (see PASS_REF_S).

    A user's Python writes bytecode caches on first use; where the environment says not to
    (``PYTHONDONTWRITEBYTECODE``), the children write theirs under pytest's temporary folder instead.
    """
    env = dict(env)
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env["PYTHONPYCACHEPREFIX"] = str(Path(env["CAPSHIM_DB"]).parent / "pycache")
    commands = [["--help"], ["bench", "--help"], ["db", "compare", "--help"], ["profiles"], ["db", "list"],
                ["evidence", "verify", str(BUNDLE)]]
    base = _cpu([sys.executable, "-c", "pass"], env, runs=9)
    allowed = base + BUDGET_S * max(1.0, base / PASS_REF_S)
    took = {}
    for args in commands:
        argv = [sys.executable, "-m", "capshim.cli", *args]
        subprocess.run(argv, capture_output=True, env=env, timeout=300)  # warm: writes the bytecode caches
        took[" ".join(args)] = round(_cpu(argv, env, runs=5), 3)
    over = {cmd: t for cmd, t in took.items() if t > allowed}
    assert not over, (f"over {allowed:.3f} s of CPU (python -c pass: {base:.3f} s, {PASS_REF_S} s quiet; "
                      f"{BUDGET_S} s budget): {over} (all: {took})")
