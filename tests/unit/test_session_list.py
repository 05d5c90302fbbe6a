"""The session list's pages (core/session_list.py): cursors and the cost of a page (SQLite)."""

from __future__ import annotations

import base64
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event

from c2.core.errors import InvalidCursorError
from c2.core.session import SessionRecord
from c2.core.session_list import decode_cursor, encode_cursor, read_session_page
from c2.core.store.database import ReadUnit, Store, sqlite_url


def test_session_list_cursor_names_the_last_session_exactly() -> None:
    """A cursor decodes to the (created_at, id) of the session it was made from."""
    rec = SessionRecord(id="0b0c:odd:id", provider="codex", cwd="/tmp")
    created, session_id = decode_cursor(encode_cursor(rec))
    assert (created, session_id) == (rec.created_at, rec.id)


def _b64(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 !",
        _b64("v2:1:abc"),
        _b64("v1:-5:abc"),
        _b64("v1:12:"),
        _b64("v1:99999999999999999999:abc"),
        _b64("v1:1:" + "x" * 65),
        _b64("v1:1:a\x00b"),
        _b64("v1:1"),
        base64.urlsafe_b64encode(b"v1:1:\xff").decode(),
        "A" * 129,
    ],
)
def test_session_list_rejects_cursors_it_did_not_make(cursor: str) -> None:
    """Anything but a cursor of this format is InvalidCursorError (a 422, never a 500)."""
    with pytest.raises(InvalidCursorError):
        decode_cursor(cursor)


def test_session_list_page_is_one_index_range(tmp_path: Path, store: Store) -> None:
    """First and later pages are an index SEARCH without a sort, whatever is stored."""
    base = SessionRecord(id="base", provider="codex", cwd="/tmp").created_at

    def seed(uow: Any) -> None:
        for i in range(40):
            rec = SessionRecord(
                id=f"s{i:02d}", provider="codex", cwd="/tmp", created_at=base + timedelta(i // 4)
            )
            uow.sessions.insert(rec)

    store.write_sync(seed)
    engine = create_engine(sqlite_url(tmp_path))
    statements: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if "FROM sessions" in statement:
            statements.append((statement, params))

    event.listen(engine, "before_cursor_execute", capture)
    with engine.connect() as conn:
        first = read_session_page(ReadUnit(conn), 5, None)
        assert first.next_cursor is not None
        read_session_page(ReadUnit(conn), 5, decode_cursor(first.next_cursor))
        event.remove(engine, "before_cursor_execute", capture)
        assert len(statements) == 2
        for statement, params in statements:
            plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
            details = [str(row[-1]) for row in plan]
            assert details and all(
                d.startswith("SEARCH sessions USING INDEX ix_sessions_archived_created_id")
                for d in details
            ), details
            assert not any("TEMP B-TREE" in d for d in details), details
    engine.dispose()
