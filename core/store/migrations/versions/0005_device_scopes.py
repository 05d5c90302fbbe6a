"""Device scopes: each device and each pairing token carries its scopes.

Devices and unredeemed tokens that exist before this revision keep full scopes.

Revision ID: 0005_device_scopes
Revises: 0004_agent_sessions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_device_scopes"
down_revision = "0004_agent_sessions"
branch_labels = None
depends_on = None

ALL_SCOPES = "read,approve,operate,admin"


def upgrade() -> None:
    for table in ("devices", "pairing_tokens"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("scopes", sa.Text, nullable=False, server_default=ALL_SCOPES)
            )


def downgrade() -> None:
    for table in ("devices", "pairing_tokens"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("scopes")
