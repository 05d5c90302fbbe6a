"""Search across every session: documents, their word index, open messages; existing
transcripts and titles are indexed here (core/store/search.py).

SQLite indexes words in a contentless FTS5 table, PostgreSQL in a tsvector column with a GIN
index; both receive the tokens of core/search/tokens.py.

Revision ID: 0007_search
Revises: 0006_usage
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007_search"
down_revision = "0006_usage"
branch_labels = None
depends_on = None

_KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    columns: list[sa.Column[object]] = [
        sa.Column("id", _KEY, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.BigInteger),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("doc_key", sa.Text),
        sa.Column("body", sa.Text, nullable=False),
    ]
    if not sqlite:
        columns.append(sa.Column("tsv", postgresql.TSVECTOR, nullable=False))
    op.create_table("search_docs", *columns)
    op.create_index("ix_search_docs_session_key", "search_docs", ["session_id", "doc_key"])
    if sqlite:
        op.execute(
            "CREATE VIRTUAL TABLE search_fts USING fts5("
            "terms, grams, sess, content='', tokenize='ascii')"
        )
    else:
        # No pending list: every query would scan the entries inserted since the last vacuum
        # (measured: most of a query's time after a day's writes); inserts update the index.
        op.create_index(
            "ix_search_docs_tsv",
            "search_docs",
            ["tsv"],
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        )
    op.create_table(
        "search_state",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("open_kind", sa.String(16)),
        sa.Column("open_seq", sa.BigInteger),
        sa.Column("turn_seq", sa.BigInteger),
    )
    from c2.core.store.search import reindex_session

    sessions = conn.execute(sa.text("SELECT id, title FROM sessions ORDER BY id")).all()
    for session_id, title in sessions:
        reindex_session(conn, str(session_id), str(title))


def downgrade() -> None:
    op.drop_table("search_state")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE search_fts")
    op.drop_index("ix_search_docs_session_key", table_name="search_docs")
    op.drop_table("search_docs")
