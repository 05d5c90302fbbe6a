"""Cluster members (issue 18): the instance registry with its leases, cluster-wide settings
(the instance-to-instance key), each session's owner, each agent record's instance, and the
member process that claimed an idempotency key while its op runs.

Revision ID: 0010_cluster
Revises: 0009_checkpoints
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_cluster"
down_revision = "0009_checkpoints"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_instances",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "cluster_settings",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("owner", sa.String(64), nullable=True))
    with op.batch_alter_table("agent_processes") as batch:
        batch.add_column(sa.Column("instance_id", sa.String(64), nullable=True))
    with op.batch_alter_table("idempotency") as batch:
        batch.add_column(sa.Column("claimant", sa.String(80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("idempotency") as batch:
        batch.drop_column("claimant")
    with op.batch_alter_table("agent_processes") as batch:
        batch.drop_column("instance_id")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("owner")
    op.drop_table("cluster_settings")
    op.drop_table("cluster_instances")
