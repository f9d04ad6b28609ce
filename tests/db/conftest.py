"""Fixtures of the results-store tests: a real PostgreSQL server, and one store URL per backend.

The server is the Debian package's (``postgresql``, installed by ./setup.sh --dev):
``initdb`` into a fresh folder, started with ``pg_ctl`` listening only on a
Unix socket in that folder (no TCP port), trust authentication, and stopped
and removed when the session ends. As root it runs as the ``postgres`` user
(the server refuses to run as root).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from capshim.evidence import Bundle
from capshim.evidence.files import ATTESTATION_FILE

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "evidence"
BUNDLES = ["h200-tinyllama-r10", "h200-ablation", "lavapipe-default"]


def distinct_copy(src: Path, dest: Path, n: int) -> Path:
    """A copy of a bundle whose report.md says which copy it is, sealed again: another bundle (another key)."""
    shutil.copytree(src, dest)
    with open(dest / "report.md", "a") as fh:
        fh.write(f"\ncopy {n}\n")
    Bundle(dest, {}).write_sums()
    (dest / ATTESTATION_FILE).unlink(missing_ok=True)  # an edited copy is a new, unsigned bundle
    return dest


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path:
        return path
    pytest.fail(f"PostgreSQL's {name} is not installed: install the Debian package postgresql (./setup.sh --dev does)")


class PgServer:
    """A running PostgreSQL server: ``url(db)`` gives a SQLAlchemy URL over its socket."""

    def __init__(self, root: Path):
        self.root = root
        self.data = root / "data"
        self.sock = root
        # runuser lives in /usr/sbin, which a PATH without the sbin folders lacks
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        self._as = [runuser, "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self._n = itertools.count(1)

    def _run(self, *argv):
        r = subprocess.run([*self._as, *argv], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}\n{log}")
        return r

    def start(self):
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "capshim", "--auth=trust", "-E", "UTF8",
                  "--no-sync")
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-o",
                  f"-k {self.sock} -c listen_addresses='' -F", "start")

    def stop(self):
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, db: str) -> str:
        return f"postgresql://capshim@/{db}?host={self.sock}"

    def new_database(self) -> str:
        """Create an empty database and return its URL."""
        import psycopg

        name = f"t{next(self._n)}"
        with psycopg.connect(f"dbname=postgres user=capshim host={self.sock}", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


@pytest.fixture(scope="session")
def pg_server():
    root = Path(tempfile.mkdtemp(prefix="capshim-pg-"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    srv = PgServer(root)
    try:
        srv.start()
        yield srv
    finally:
        try:
            if (srv.data / "postmaster.pid").exists():
                srv.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def db_url(request, tmp_path):
    """An empty store: a SQLite file, or a fresh database on the test PostgreSQL server.

    The PostgreSQL cases are in the slow tier (the server's initdb and start take 10-25 s on the
    2-core machine); the fast tier runs the same tests on SQLite."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.sqlite'}"
    return request.getfixturevalue("pg_server").new_database()
