"""Only prompts (user rows) are indexed by role: the (session_id, role, seq) index over every
transcript row becomes a partial index over user rows, which turn numbering and paging look up.
A streamed chunk then writes two b-trees of `parts` instead of three, and SQLite's COMMIT, the
writer's largest cost, has fewer pages to write (docs/decisions.md, "fifth slice").

Revision ID: 0014_user_parts_index
Revises: 0013_session_list
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_user_parts_index"
down_revision = "0013_session_list"
branch_labels = None
depends_on = None

_USER_ROWS = sa.text("role = 'user'")  # as core/store/tables.py USER_ROWS, frozen here


def upgrade() -> None:
    op.create_index(
        "ix_parts_user",
        "parts",
        ["session_id", "seq"],
        sqlite_where=_USER_ROWS,
        postgresql_where=_USER_ROWS,
    )
    op.drop_index("ix_parts_session_role_seq", table_name="parts")


def downgrade() -> None:
    op.create_index("ix_parts_session_role_seq", "parts", ["session_id", "role", "seq"])
    op.drop_index("ix_parts_user", table_name="parts")
