"""Agent sessions: ACP session modes and the session's MCP servers (kept for revival).

Revision ID: 0004_agent_sessions
Revises: 0003_agent_processes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_agent_sessions"
down_revision = "0003_agent_processes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("modes_json", sa.Text))
        batch.add_column(sa.Column("mcp_servers_json", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("mcp_servers_json")
        batch.drop_column("modes_json")
