"""Agent process records: pid, process group and start time of every live agent.

Revision ID: 0003_agent_processes
Revises: 0002_auth
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_agent_processes"
down_revision = "0002_auth"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_processes",
        sa.Column("pid", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("pgid", sa.Integer, nullable=False),
        sa.Column("start_time", sa.BigInteger, nullable=False),
        sa.Column("boot_id", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(64)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("agent_processes")
