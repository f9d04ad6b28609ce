"""Indexes for the queries of list and trend: bundles by start time, results by arm.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_bundles_created_utc", "bundles", ["created_utc"])
    op.create_index("ix_results_arm", "results", ["arm"])


def downgrade() -> None:
    op.drop_index("ix_results_arm", "results")
    op.drop_index("ix_bundles_created_utc", "bundles")
