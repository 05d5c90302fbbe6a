"""Each streamed chunk writes fewer b-trees: on SQLite `parts` keeps its rows in its primary
key's b-tree (WITHOUT ROWID) instead of a table plus a key index, and `events` loses its index
on `created_at`, which only retention read (it now bisects by seq: EventLog.prune). Together
~1.1 µs of SQLite's ~5.6 µs per chunk (docs/decisions.md, "sixteenth sitting").

Rebuilding `parts` copies the transcript once, at the upgrade.

Revision ID: 0015_lean_chunk_rows
Revises: 0014_user_parts_index
"""

from __future__ import annotations

from alembic import op

revision = "0015_lean_chunk_rows"
down_revision = "0014_user_parts_index"
branch_labels = None
depends_on = None

_USER_INDEX = "CREATE INDEX ix_parts_user ON parts (session_id, seq) WHERE role = 'user'"


def _rebuild_parts(without_rowid: bool) -> None:
    suffix = " WITHOUT ROWID" if without_rowid else ""
    op.execute(
        "CREATE TABLE parts_rebuilt (session_id VARCHAR(64) NOT NULL, seq BIGINT NOT NULL,"
        " role VARCHAR(8) NOT NULL, part_json TEXT NOT NULL, PRIMARY KEY (session_id, seq))"
        + suffix
    )
    op.execute(
        "INSERT INTO parts_rebuilt (session_id, seq, role, part_json)"
        " SELECT session_id, seq, role, part_json FROM parts ORDER BY session_id, seq"
    )
    op.execute("DROP TABLE parts")  # and its index
    op.execute("ALTER TABLE parts_rebuilt RENAME TO parts")
    op.execute(_USER_INDEX)


def upgrade() -> None:
    op.drop_index("ix_events_created_at", table_name="events")
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_parts(without_rowid=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_parts(without_rowid=False)
    op.create_index("ix_events_created_at", "events", ["created_at"])
