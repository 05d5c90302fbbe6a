"""Session lineage (a forked session's parent and turn, and whether its agent still needs the
parent's turns as a primer) and the durable follow-up queue (issue 14).

Revision ID: 0009_checkpoints
Revises: 0008_notifications
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_checkpoints"
down_revision = "0008_notifications"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("lineage_json", sa.Text, nullable=True))
    op.create_table(
        "queue_items",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("doc_json", sa.Text, nullable=False),
        sa.Column("request_id", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_queue_items_session_position", "queue_items", ["session_id", "position"])
    op.create_table(
        "queue_state",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("queue_state")
    op.drop_index("ix_queue_items_session_position", table_name="queue_items")
    op.drop_table("queue_items")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("lineage_json")
