"""Search across every session: parse the query, read hits in one consistent snapshot, say
where each hit's transcript page is, and highlight it.

Hits come in one ranked list: messages still being streamed first (matched in memory, since
they become documents only when they end; core/store/search.py), then documents by rank
(bm25 on SQLite, ts_rank on PostgreSQL). A cursor is a position in that list, so a page may
repeat or skip a hit when the index changed between two pages.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from c2.core.errors import InvalidCursorError, SessionNotFoundError
from c2.core.search.query import Matcher, Query, parse, to_fts5, to_tsquery
from c2.core.search.snippets import snippet
from c2.core.store.database import ReadUnit, Store
from c2.core.store.search import Doc, SearchReader
from c2.core.transcript import ENTRY_BYTES, PAGE_BYTES

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
_MAX_OFFSET = 10_000


def encode_cursor(offset: int) -> str:
    """The opaque cursor of the page starting at `offset`."""
    return base64.urlsafe_b64encode(f"o{offset}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> int:
    """The offset a cursor names (0 without one); InvalidSearchCursorError if malformed."""
    if cursor is None:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        offset = int(raw[1:]) if raw[:1] == "o" and raw[1:].isdigit() else -1
    except (binascii.Error, UnicodeDecodeError, ValueError):
        offset = -1
    if not 0 < offset <= _MAX_OFFSET:
        raise InvalidCursorError("cursor is not one this server returned")
    return offset


class SearchService:
    """`GET /v1/search` over the store's index."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def search(
        self, q: str | None, session: str | None, limit: int | None, cursor: str | None
    ) -> dict[str, Any]:
        """`GET /v1/search`: ranked hits with snippets, one page, and the next page's cursor."""
        query = parse(q)
        offset = decode_cursor(cursor)
        size = max(1, min(MAX_LIMIT, limit or DEFAULT_LIMIT))
        return await self._store.read(lambda read: _search(read, query, session, offset, size))


def _search(
    read: ReadUnit, query: Query, session: str | None, offset: int, size: int
) -> dict[str, Any]:
    if session is not None:
        # No stored id holds a NUL (and PostgreSQL refuses one in a parameter).
        record = None if "\x00" in session else read.sessions.get(session)
        if record is None or record.archived:
            raise SessionNotFoundError(f"no session {session}", session=session)
    reader = SearchReader(read.conn)
    matcher = Matcher(query)
    streaming = [doc for doc in reader.open_messages(session) if matcher.matches(doc.body)]
    docs: list[Doc] = streaming[offset : offset + size + 1]
    rest = size + 1 - len(docs)
    if rest > 0:
        match = to_fts5(query) if read.conn.dialect.name == "sqlite" else to_tsquery(query)
        docs += reader.ranked(match, session, max(0, offset - len(streaming)), rest)
    more = len(docs) > size
    docs = docs[:size]
    anchored = [(doc.session, doc.seq) for doc in docs if doc.seq is not None]
    pages = iter(reader.pages_before(anchored, PAGE_BYTES, ENTRY_BYTES))
    hits = [
        {
            "session": doc.session,
            "transcript_seq": doc.seq,
            "before": None if doc.seq is None else next(pages),
            "kind": doc.kind,
            "snippet": snippet(doc.body, query),
        }
        for doc in docs
    ]
    next_cursor = encode_cursor(offset + size) if more and offset + size <= _MAX_OFFSET else None
    return {"kind": "search", "hits": hits, "next_cursor": next_cursor}
