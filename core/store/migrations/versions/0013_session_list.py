"""The session list's index covers its whole order (created_at, then id), so a page of the
list is one index range however many sessions are stored (issue 17). It replaces the
(archived, created_at) index, which is its prefix.

Revision ID: 0013_session_list
Revises: 0012_webhook_claims
"""

from __future__ import annotations

from alembic import op

revision = "0013_session_list"
down_revision = "0012_webhook_claims"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_sessions_archived_created_id", "sessions", ["archived", "created_at", "id"])
    op.drop_index("ix_sessions_archived_created", table_name="sessions")


def downgrade() -> None:
    op.create_index("ix_sessions_archived_created", "sessions", ["archived", "created_at"])
    op.drop_index("ix_sessions_archived_created_id", table_name="sessions")
