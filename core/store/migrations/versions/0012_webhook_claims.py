"""Webhook deliveries carry the sender that claimed them (issue 18): a delivery is sent only
by the member whose conditional update claimed it, so no two members send it at once.

Revision ID: 0012_webhook_claims
Revises: 0011_pairing_failures
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_webhook_claims"
down_revision = "0011_pairing_failures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_column("claimed_by")
