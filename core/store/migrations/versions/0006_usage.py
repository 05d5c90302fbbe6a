"""Usage ledger and budgets: what each turn used, budgets per session and per device.

Revision ID: 0006_usage
Revises: 0005_device_scopes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_usage"
down_revision = "0005_device_scopes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "turn_usage",
        sa.Column("turn_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("provider", sa.String(200), nullable=False),
        sa.Column("acp_session_id", sa.Text),
        sa.Column("input_tokens", sa.BigInteger),
        sa.Column("output_tokens", sa.BigInteger),
        sa.Column("total_tokens", sa.BigInteger),
        sa.Column("thought_tokens", sa.BigInteger),
        sa.Column("cached_read_tokens", sa.BigInteger),
        sa.Column("cached_write_tokens", sa.BigInteger),
        sa.Column("cost_amount", sa.Float),
        sa.Column("cost_currency", sa.String(16)),
        sa.Column("cost_cumulative", sa.Float),
        sa.Column("context_used", sa.BigInteger),
        sa.Column("context_size", sa.BigInteger),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_turn_usage_session_started", "turn_usage", ["session_id", "started_at"])
    op.create_index("ix_turn_usage_ended", "turn_usage", ["ended_at"])
    op.create_table(
        "budgets",
        sa.Column("owner_kind", sa.String(8), primary_key=True),
        sa.Column("owner_id", sa.String(64), primary_key=True),
        sa.Column("max_cost", sa.Float),
        sa.Column("max_tokens", sa.BigInteger),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("crossed", sa.Boolean, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("budgets")
    op.drop_index("ix_turn_usage_ended", table_name="turn_usage")
    op.drop_index("ix_turn_usage_session_started", table_name="turn_usage")
    op.drop_table("turn_usage")
