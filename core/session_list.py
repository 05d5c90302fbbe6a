"""The session list in pages (issue 17 "Bounded by design"): newest first, by keyset cursor.

Sessions are ordered by (created_at, id), both descending; a cursor names the last session of
a page by that pair, and the next page holds the sessions strictly after it in that order. A
page is one index range (`ix_sessions_archived_created_id`), so its cost does not grow with
the number of sessions stored, and pages neither repeat nor skip a session when sessions are
created meanwhile (new ones sort before every cursor) or deleted (they drop out). A cursor
is opaque to clients: base64url of `v1:<created_at µs since the epoch>:<id>`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from c2.core.errors import InvalidCursorError
from c2.core.session import SessionRecord
from c2.core.store.database import ReadUnit

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
# The longest cursor this server returns (64-char id, 17-digit time, base64): longer is bad.
MAX_CURSOR = 128
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_MICROS = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
_ID_CHARS = 64
Position = tuple[datetime, str]  # (created_at, id) of the last session of a page


@dataclass(frozen=True)
class SessionPage:
    """One page of active sessions, newest first; `next_cursor` None: no older session."""

    records: list[SessionRecord]
    next_cursor: str | None

    def sessions_json(self) -> str:
        """The page's snapshots as a JSON array (each record's JSON is built once)."""
        return "[" + ",".join(record.snapshot_json for record in self.records) + "]"


def encode_cursor(record: SessionRecord) -> str:
    """The opaque cursor naming `record`'s place in the list (after it comes the next page)."""
    micros = (record.created_at - _EPOCH) // timedelta(microseconds=1)
    raw = f"v1:{micros}:{record.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """(created_at, id) a cursor names; InvalidCursorError when it is not one of ours."""
    try:
        if len(cursor) > MAX_CURSOR:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        version, micros_text, session_id = raw.split(":", 2)
        micros = int(micros_text) if micros_text.isdigit() else -1
        if version != "v1" or not 0 <= micros <= _MAX_MICROS:
            raise ValueError("not a position")
        if not 0 < len(session_id) <= _ID_CHARS or "\x00" in session_id:
            raise ValueError("not an id")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursorError("cursor is not one this server returned") from None
    return _EPOCH + timedelta(microseconds=micros), session_id


def clamp_limit(limit: int | None) -> int:
    """A page size within bounds; None is the default."""
    if limit is None:
        return DEFAULT_LIMIT
    return max(1, min(MAX_LIMIT, limit))


def read_session_page(read: ReadUnit, limit: int | None, after: Position | None) -> SessionPage:
    """The page of active sessions after position `after` (None: the newest), from one read."""
    size = clamp_limit(limit)
    # One row more than the page tells whether an older session exists.
    records = read.sessions.list_page(size + 1, after)
    more = len(records) > size
    records = records[:size]
    return SessionPage(records, encode_cursor(records[-1]) if more else None)
