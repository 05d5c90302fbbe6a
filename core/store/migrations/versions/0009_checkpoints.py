"""Session lineage: a forked session's parent and turn, and whether its agent still needs the
parent's turns as a primer (issue 14).

Revision ID: 0009_checkpoints
Revises: 0006_usage
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_checkpoints"
down_revision = "0006_usage"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("lineage_json", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("lineage_json")
