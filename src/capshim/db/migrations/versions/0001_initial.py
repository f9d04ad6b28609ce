"""Initial schema: bundles, arms, runs, samples, results.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bundles",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("source", sa.Text),
        sa.Column("created_utc", sa.String(32)),
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
    )
    op.create_table(
        "arms",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("bundle_id", sa.Integer, sa.ForeignKey("bundles.id", ondelete="CASCADE"), nullable=False,
                  index=True),
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
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("bundle_id", sa.Integer, sa.ForeignKey("bundles.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("arm", sa.Text, nullable=False),
        sa.Column("run", sa.Integer),
        sa.Column("exit_code", sa.Integer),
        sa.Column("signal", sa.Text),
        sa.Column("timed_out", sa.Boolean),
        sa.Column("extra", sa.JSON),
    )
    op.create_table(
        "samples",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("bundle_id", sa.Integer, sa.ForeignKey("bundles.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("role", sa.String(8), nullable=False),
        sa.Column("arm", sa.Text, nullable=False),
        sa.Column("run", sa.Integer),
        sa.Column("sample", sa.Integer),
        sa.Column("test", sa.Text, nullable=False),
        sa.Column("tok_s", sa.Float, nullable=False),
        sa.Column("extra", sa.JSON),
    )
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("bundle_id", sa.Integer, sa.ForeignKey("bundles.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("arm", sa.Text, nullable=False),
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


def downgrade() -> None:
    for t in ("results", "samples", "runs", "arms", "bundles"):
        op.drop_table(t)
