"""Failed pairing attempts kept in the database, so cluster members share the pairing-attempt
limit (issue 18): one row per failure, pruned past the limit's window.

Revision ID: 0011_pairing_failures
Revises: 0010_cluster
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_pairing_failures"
down_revision = "0010_cluster"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pairing_failures",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
        sa.Column("client", sa.Text, nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_pairing_failures_client", "pairing_failures", ["client", "failed_at"])
    op.create_index("ix_pairing_failures_failed_at", "pairing_failures", ["failed_at"])


def downgrade() -> None:
    op.drop_index("ix_pairing_failures_failed_at", "pairing_failures")
    op.drop_index("ix_pairing_failures_client", "pairing_failures")
    op.drop_table("pairing_failures")
