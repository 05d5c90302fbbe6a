"""Follow-up queue tables and their repository (issue 14 part 3).

`queue_items`: prompts waiting to run as their session's next turns, in `position` order.
`queue_state`: a session's queue is paused (and why) until a client resumes it; no row means
not paused. Every schema change here needs an Alembic revision in migrations/versions/.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, Column, Connection, DateTime, Index, Text, delete, func, select
from sqlalchemy import insert as sql_insert
from sqlalchemy import update as sql_update
from sqlmodel import Field, SQLModel


class QueueItemRow(SQLModel, table=True):
    """A waiting prompt of a session's queue."""

    __tablename__ = "queue_items"

    id: str = Field(primary_key=True, max_length=64)
    session_id: str = Field(max_length=64)
    position: int = Field(sa_column=Column(BigInteger, nullable=False))
    doc_json: str = Field(sa_column=Column(Text, nullable=False))
    request_id: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))

    __table_args__ = (Index("ix_queue_items_session_position", "session_id", "position"),)


class QueueStateRow(SQLModel, table=True):
    """A paused queue: why, since when."""

    __tablename__ = "queue_state"

    session_id: str = Field(primary_key=True, max_length=64)
    reason: str = Field(max_length=32)
    paused_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


_ITEMS = QueueItemRow.__table__  # type: ignore[attr-defined]
_STATE = QueueStateRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class StoredItem:
    """A waiting prompt as stored (its doc as JSON)."""

    id: str
    session: str
    position: int
    doc_json: str
    request_id: str | None


class QueueRepository:
    """Sessions' queues: waiting items in order, and their pauses."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def items(self, session: str) -> list[StoredItem]:
        """The session's waiting items, in order."""
        rows = self._conn.execute(
            select(_ITEMS).where(_ITEMS.c.session_id == session).order_by(_ITEMS.c.position)
        ).all()
        return [StoredItem(r.id, r.session_id, r.position, r.doc_json, r.request_id) for r in rows]

    def append(
        self, item_id: str, session: str, doc_json: str, request_id: str | None, now: datetime
    ) -> None:
        """Append an item at the end of the session's queue."""
        top = self._conn.execute(
            select(func.max(_ITEMS.c.position)).where(_ITEMS.c.session_id == session)
        ).scalar()
        position = 0 if top is None else int(top) + 1
        self._conn.execute(
            sql_insert(_ITEMS).values(
                id=item_id,
                session_id=session,
                position=position,
                doc_json=doc_json,
                request_id=request_id,
                created_at=now,
            )
        )

    def push_front(self, item: StoredItem, now: datetime) -> None:
        """Put a taken item back at the head (its turn could not start)."""
        low = self._conn.execute(
            select(func.min(_ITEMS.c.position)).where(_ITEMS.c.session_id == item.session)
        ).scalar()
        position = 0 if low is None else int(low) - 1
        self._conn.execute(
            sql_insert(_ITEMS).values(
                id=item.id,
                session_id=item.session,
                position=position,
                doc_json=item.doc_json,
                request_id=item.request_id,
                created_at=now,
            )
        )

    def replace_doc(self, session: str, item_id: str, doc_json: str) -> bool:
        """Replace a waiting item's doc; False when it is not waiting."""
        done = self._conn.execute(
            sql_update(_ITEMS)
            .where(_ITEMS.c.session_id == session, _ITEMS.c.id == item_id)
            .values(doc_json=doc_json)
        )
        return done.rowcount > 0

    def remove(self, session: str, item_id: str) -> bool:
        """Remove a waiting item; False when it is not waiting."""
        done = self._conn.execute(
            delete(_ITEMS).where(_ITEMS.c.session_id == session, _ITEMS.c.id == item_id)
        )
        return done.rowcount > 0

    def paused(self, session: str) -> str | None:
        """The pause reason, None when the queue is not paused."""
        reason = self._conn.execute(
            select(_STATE.c.reason).where(_STATE.c.session_id == session)
        ).scalar()
        return None if reason is None else str(reason)

    def pause(self, session: str, reason: str, now: datetime) -> None:
        """Pause the session's queue for `reason`."""
        self._conn.execute(delete(_STATE).where(_STATE.c.session_id == session))
        self._conn.execute(
            sql_insert(_STATE).values(session_id=session, reason=reason, paused_at=now)
        )

    def resume(self, session: str) -> None:
        """Unpause the session's queue."""
        self._conn.execute(delete(_STATE).where(_STATE.c.session_id == session))

    def sessions_with_items(self) -> list[str]:
        """The sessions whose queues hold items."""
        rows = self._conn.execute(select(_ITEMS.c.session_id).distinct()).all()
        return [str(r[0]) for r in rows]

    def forget(self, session: str) -> None:
        """Drop the session's items and pause."""
        self._conn.execute(delete(_ITEMS).where(_ITEMS.c.session_id == session))
        self._conn.execute(delete(_STATE).where(_STATE.c.session_id == session))
