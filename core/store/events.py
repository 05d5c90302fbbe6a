"""The durable event log: append in the producing transaction, replay after a sequence.

Payloads are stored as the exact wire JSON of the event so replay and live delivery send
byte-identical frames and nothing is re-serialized per client.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, func, insert, select

from c2.core.session import utcnow
from c2.core.store.tables import EventRow

_EVENTS = EventRow.__table__  # type: ignore[attr-defined]
# Built once: constructing Core statements per call costs more than executing them.
_INSERT = insert(_EVENTS)


@dataclass(frozen=True, slots=True)
class CommittedEvent:
    """An event as committed: its seq, session and wire JSON."""

    seq: int
    session: str | None
    payload: str  # wire JSON of the Event


@dataclass(frozen=True, slots=True)
class LogBounds:
    """The oldest and newest seq the log holds."""

    first: int | None  # oldest retained seq
    last: int  # newest seq, 0 when the log is empty


class EventLog:
    """The append-only event log on one connection."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def append_encoded(self, session: str | None, payload: str) -> CommittedEvent:
        """Insert one encoded event; its seq is assigned by the database in this transaction."""
        result = self._conn.execute(
            _INSERT, {"session_id": session, "payload": payload, "created_at": utcnow()}
        )
        seq = result.inserted_primary_key[0]  # type: ignore[index]
        return CommittedEvent(seq=int(seq), session=session, payload=payload)

    def bounds(self) -> LogBounds:
        """The oldest and newest seq retained."""
        row = self._conn.execute(select(func.min(_EVENTS.c.seq), func.max(_EVENTS.c.seq))).one()
        return LogBounds(first=row[0], last=row[1] or 0)

    def last_seq(self) -> int:
        """The newest seq, 0 when the log is empty."""
        return int(self._conn.execute(select(func.max(_EVENTS.c.seq))).scalar() or 0)

    def count_between(self, first: int, last: int) -> int:
        """How many events have first <= seq <= last (did a batch's COMMIT land?)."""
        query = select(func.count()).where(_EVENTS.c.seq >= first, _EVENTS.c.seq <= last)
        return int(self._conn.execute(query).scalar() or 0)

    def after(
        self, seq: int, *, session: str | None = None, limit: int = 500
    ) -> list[CommittedEvent]:
        """Events with a sequence greater than `seq`, oldest first (optionally one session's)."""
        query = select(_EVENTS.c.seq, _EVENTS.c.session_id, _EVENTS.c.payload).where(
            _EVENTS.c.seq > seq
        )
        if session is not None:
            query = query.where(_EVENTS.c.session_id == session)
        rows = self._conn.execute(query.order_by(_EVENTS.c.seq).limit(limit)).all()
        return [CommittedEvent(seq=r[0], session=r[1], payload=r[2]) for r in rows]

    def prune(self, older_than: timedelta, now: datetime | None = None) -> int:
        """Drop events past the retention window; returns how many were removed."""
        cutoff = (now or utcnow()) - older_than
        # Keep the newest event so the log's high-water mark survives an idle period.
        newest = self.last_seq()
        result = self._conn.execute(
            delete(_EVENTS).where(_EVENTS.c.created_at < cutoff, _EVENTS.c.seq < newest)
        )
        return int(result.rowcount or 0)
