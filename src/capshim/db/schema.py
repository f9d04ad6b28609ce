"""The results store's tables (SQLAlchemy Core), as of the newest migration.

The schema is created and moved forward only by the Alembic migrations in
``capshim/db/migrations/versions`` (one file per version); this module is the
read/write view the store uses and must match the head revision (a test
checks that). Tables:

- ``bundles``: one row per stored bundle or set of external files, keyed by
  ``key`` (:func:`capshim.db.ingest.bundle_key`: SHA-256 of its SHA256SUMS's
  sorted pairs); machine, workload and model facts;
  ``config`` (llama-bench settings that must match to compare), ``settings``,
  ``metadata`` and ``summary`` as JSON; ``signed_by``: who signed it
  (``[{"key", "key_type", "principal", "signed_utc"}]``, [] unsigned; revision 0003).
- ``arms``: one row per arm of a bundle: state, profile and simulate names and
  SHA-256s, spec.
- ``runs``: one row per recorded run (exit code, signal, timed out, rest as JSON).
- ``samples``: one row per sample (tok/s); ``role`` ``arm`` or ``host``.
- ``results``: per arm and test, the figures of the bundle's summary (median,
  speedup and % of host with their 95% intervals) exactly as ``report`` shows them.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["metadata", "bundles", "arms", "runs", "samples", "results", "HEAD"]

#: The Alembic revision this module matches.
HEAD = "0003"

metadata = sa.MetaData()

bundles = sa.Table(
    "bundles", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("source", sa.Text),
    sa.Column("created_utc", sa.String(32), index=True),
    sa.Column("added_utc", sa.String(32), nullable=False),
    sa.Column("host", sa.Text),
    sa.Column("os", sa.Text),
    sa.Column("device", sa.Text),
    sa.Column("driver", sa.Text),
    sa.Column("workload_build", sa.Text),
    sa.Column("workload_commit", sa.Text),
    sa.Column("workload_sha256", sa.String(64)),
    sa.Column("model", sa.Text),
    sa.Column("model_sha256", sa.String(64)),
    sa.Column("capshim_version", sa.Text),
    sa.Column("baseline", sa.Text),
    sa.Column("host_name", sa.Text),
    sa.Column("host_source", sa.Text),
    sa.Column("config", sa.JSON),
    sa.Column("settings", sa.JSON),
    sa.Column("metadata", sa.JSON),
    sa.Column("summary", sa.JSON),
    sa.Column("signed_by", sa.JSON),
)

arms = sa.Table(
    "arms", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bundle_id", sa.Integer, sa.ForeignKey("bundles.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("profile_name", sa.Text),
    sa.Column("profile_sha256", sa.String(64)),
    sa.Column("simulate_name", sa.Text),
    sa.Column("simulate_sha256", sa.String(64)),
    sa.Column("spec", sa.JSON),
    sa.UniqueConstraint("bundle_id", "name"),
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bundle_id", sa.Integer, sa.ForeignKey("bundles.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("arm", sa.Text, nullable=False),
    sa.Column("run", sa.Integer),
    sa.Column("exit_code", sa.Integer),
    sa.Column("signal", sa.Text),
    sa.Column("timed_out", sa.Boolean),
    sa.Column("extra", sa.JSON),
)

samples = sa.Table(
    "samples", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bundle_id", sa.Integer, sa.ForeignKey("bundles.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("role", sa.String(8), nullable=False),
    sa.Column("arm", sa.Text, nullable=False),
    sa.Column("run", sa.Integer),
    sa.Column("sample", sa.Integer),
    sa.Column("test", sa.Text, nullable=False),
    sa.Column("tok_s", sa.Float, nullable=False),
    sa.Column("extra", sa.JSON),
)

results = sa.Table(
    "results", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bundle_id", sa.Integer, sa.ForeignKey("bundles.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("arm", sa.Text, nullable=False, index=True),
    sa.Column("test", sa.Text, nullable=False),
    sa.Column("n", sa.Integer),
    sa.Column("median", sa.Float),
    sa.Column("min", sa.Float),
    sa.Column("max", sa.Float),
    sa.Column("speedup", sa.Float),
    sa.Column("speedup_lo", sa.Float),
    sa.Column("speedup_hi", sa.Float),
    sa.Column("pct_of_host", sa.Float),
    sa.Column("pct_lo", sa.Float),
    sa.Column("pct_hi", sa.Float),
    sa.UniqueConstraint("bundle_id", "arm", "test"),
)
