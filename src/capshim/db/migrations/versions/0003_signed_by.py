"""Who signed each bundle: ``bundles.signed_by`` (JSON list), read from its attestations.intoto.jsonl.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("bundles", sa.Column("signed_by", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bundles") as batch:
        batch.drop_column("signed_by")
