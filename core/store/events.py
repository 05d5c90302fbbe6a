"""The durable event log: append in the producing transaction, replay after a sequence.

Payloads are stored as the exact wire JSON of the event so replay and live delivery send
byte-identical frames and nothing is re-serialized per client.

Sequences with several writers (a cluster, or `c2 pair` next to a server on PostgreSQL):
`claim_sequences` takes a transaction-level advisory lock, then reads max(seq). The lock is
held until the transaction ends, so the transactions that append events commit one at a time,
in sequence order: an event is visible before the next sequence is even read, and a reader that
saw seq N can never later find a committed event below N. PostgreSQL makes a transaction
visible before it releases its locks, and the writer runs READ COMMITTED, so the max() (its
own statement, after the lock) sees the previous holder's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import Connection, bindparam, delete, func, insert, select, text

from c2.core.session import utcnow
from c2.core.store.tables import EventRow, aware

_EVENTS = EventRow.__table__  # type: ignore[attr-defined]
# Built once: constructing Core statements per call costs more than executing them.
_INSERT = insert(_EVENTS)
# The first event from a seq on, with its stamp (a primary-key probe of `prune`'s bisection).
_AT_OR_AFTER = (
    select(_EVENTS.c.seq, _EVENTS.c.created_at)
    .where(_EVENTS.c.seq >= bindparam("s"))
    .order_by(_EVENTS.c.seq)
    .limit(1)
)
# pg_advisory_xact_lock(int4, int4) key of sequence assignment: "c3" and the schema's hash
# (the owner lock of ownership.py uses "c2"). Two statements: in READ COMMITTED each takes its
# snapshot when it starts, so the max() must start after the lock was granted.
_SEQ_CLASS = 0x6333
_SEQ_LOCK = text("SELECT pg_advisory_xact_lock(:a, hashtext(current_schema()))")
_MAX_SEQ = select(func.max(_EVENTS.c.seq))
# Each end on its own: SQLite answers a lone min() or max() from the key's end, but a SELECT
# of both scans the whole log (45 ms at 200,000 events, for every stream that resumes).
_BOUNDS = select(select(func.min(_EVENTS.c.seq)).scalar_subquery(), _MAX_SEQ.scalar_subquery())
# A cluster's live fan-out (core/cluster/fanout.py): only the position travels, at COMMIT.
_NOTIFY_LOG = text("SELECT pg_notify('c2_log_' || md5(current_schema()), :p)")


def notify_position(conn: Connection, instance_id: str, last_seq: int) -> None:
    """Tell the cluster's members, when this transaction commits, that the log reaches
    `last_seq` (PostgreSQL NOTIFY: delivered at COMMIT, dropped on rollback)."""
    conn.execute(_NOTIFY_LOG, {"p": f"{instance_id} {last_seq}"})


def claim_sequences(conn: Connection) -> int:
    """The next free event seq, with sequence assignment serialized until `conn`'s
    transaction ends (PostgreSQL: an advisory transaction lock; elsewhere just the max, as
    SQLite has one writer at a time anyway)."""
    if conn.dialect.name == "postgresql":
        conn.execute(_SEQ_LOCK, {"a": _SEQ_CLASS})
    return int(conn.execute(_MAX_SEQ).scalar() or 0) + 1


class CommittedEvent(NamedTuple):
    """An event as committed: its seq, session and wire JSON. Immutable, as many streams
    share it; a named tuple, as one is made for every event (a frozen dataclass costs twice
    as much to make, on the writer's thread)."""

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
        """Insert one encoded event outside the group-commit writer (start-up, one-shot
        commands); its seq is claimed in this transaction, serialized with every writer."""
        seq = claim_sequences(self._conn)
        self._conn.execute(
            _INSERT,
            {"seq": seq, "session_id": session, "payload": payload, "created_at": utcnow()},
        )
        return CommittedEvent(seq=seq, session=session, payload=payload)

    def bounds(self) -> LogBounds:
        """The oldest and newest seq retained."""
        row = self._conn.execute(_BOUNDS).one()
        return LogBounds(first=row[0], last=row[1] or 0)

    def last_seq(self) -> int:
        """The newest seq, 0 when the log is empty."""
        return int(self._conn.execute(select(func.max(_EVENTS.c.seq))).scalar() or 0)

    def payloads_between(self, first: int, last: int) -> list[str]:
        """The payloads of first <= seq <= last in order (did a batch's COMMIT land? With
        several writers another one may hold those seqs now: compare what is stored)."""
        query = (
            select(_EVENTS.c.payload)
            .where(_EVENTS.c.seq >= first, _EVENTS.c.seq <= last)
            .order_by(_EVENTS.c.seq)
        )
        return [str(p) for p in self._conn.execute(query).scalars()]

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

    def newest(self, limit: int) -> list[CommittedEvent]:
        """The newest `limit` events, oldest first: every event after `last_seq() - limit`."""
        return self.after(max(0, self.last_seq() - limit), limit=limit)

    def prune(self, older_than: timedelta, now: datetime | None = None) -> int:
        """Drop events past the retention window; returns how many were removed."""
        cutoff = (now or utcnow()) - older_than
        # Keep the newest event so the log's high-water mark survives an idle period.
        newest = self.last_seq()
        below = min(self._first_at_or_after(cutoff, newest), newest)
        result = self._conn.execute(delete(_EVENTS).where(_EVENTS.c.seq < below))
        return int(result.rowcount or 0)

    def _first_at_or_after(self, cutoff: datetime, newest: int) -> int:
        """The seq of the oldest event stamped at or after `cutoff` (past `newest`, the log's
        newest seq: none is).

        Events are stamped as their seqs are claimed (one writer, or one at a time under the
        sequence lock), so stamps rise with seqs (a wall clock stepped back blurs the boundary
        by that step) and the boundary is found by bisection on the primary key: no index on
        the stamps, which every streamed chunk would also write."""
        # Every event up to `lo` is older; the first from `hi` on is not (or there is none).
        lo, hi = 0, newest + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            row = self._conn.execute(_AT_OR_AFTER, {"s": mid}).first()
            if row is not None and aware(row[1]) < cutoff:
                lo = row[0]  # the first event from mid on is older: so is every one before it
            else:
                hi = mid
        return hi
