"""Core tables: sessions, transcript parts, the event log, idempotency records.

Revision ID: 0001_core
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_core"
down_revision = None
branch_labels = None
depends_on = None

_bigkey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("provider", sa.String(200), nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("title_origin", sa.String(16), nullable=False),
        sa.Column("model", sa.Text),
        sa.Column("cwd", sa.Text, nullable=False),
        sa.Column("project_path", sa.Text),
        sa.Column("worktree_path", sa.Text),
        sa.Column("worktree_baseline_json", sa.Text),
        sa.Column("worktree_identity_json", sa.Text),
        sa.Column("worktree_discarded", sa.Boolean, nullable=False),
        sa.Column("permission_mode", sa.String(32), nullable=False),
        sa.Column("sandbox_policy", sa.String(32), nullable=False),
        sa.Column("activity_json", sa.Text),
        sa.Column("acp_session_id", sa.Text),
        sa.Column("models_json", sa.Text),
        sa.Column("config_options_json", sa.Text),
        sa.Column("context_window_json", sa.Text),
        sa.Column("archived", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_sessions_archived_created", "sessions", ["archived", "created_at"])
    op.create_table(
        "parts",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("role", sa.String(8), nullable=False),
        sa.Column("part_json", sa.Text, nullable=False),
    )
    op.create_index("ix_parts_session_role_seq", "parts", ["session_id", "role", "seq"])
    op.create_table(
        "events",
        sa.Column("seq", _bigkey, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(64)),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_events_session_seq", "events", ["session_id", "seq"])
    op.create_index("ix_events_created_at", "events", ["created_at"])
    op.create_table(
        "idempotency",
        sa.Column("device_id", sa.String(64), primary_key=True),
        sa.Column("request_id", sa.String(128), primary_key=True),
        sa.Column("op_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("body_json", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    for table in ("idempotency", "events", "parts", "sessions"):
        op.drop_table(table)
