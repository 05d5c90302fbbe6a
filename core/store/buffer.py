"""Rows appended during one group-commit batch, inserted in bulk just before its COMMIT.

Transcript rows and event rows dominate the write load (one of each per agent chunk); one
executemany per table per batch costs far less than one statement per row. Sequences come
from the single writer's counters (per-session transcript seq, global event seq), seeded
from the database; a second writer on the same database would collide on the primary key
and fail loudly rather than interleave sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection, insert

from c2.core.protocol.events import Event
from c2.core.session import utcnow
from c2.core.store.search import SearchOp, SearchState, index_ops
from c2.core.store.tables import EventRow, PartRow
from c2.core.store.webhooks import record_deliveries

# SQLAlchemy's SQLite DATETIME storage format, so rows written here read back like any other.
# (Public for bench/writer.py, which times these same statements without the writer.)
SQLITE_DATETIME = "%Y-%m-%d %H:%M:%S.%f"
SQLITE_INSERT_PARTS = "INSERT INTO parts (session_id, seq, role, part_json) VALUES (?, ?, ?, ?)"
SQLITE_INSERT_EVENTS = (
    "INSERT INTO events (seq, session_id, payload, created_at) VALUES (?, ?, ?, ?)"
)

# PostgreSQL: a batch's rows of a table in one statement, as one array per column. psycopg's
# executemany sends each row as a message of its own (a send and two polls, each releasing and
# taking back the GIL the event loop needs): at 50 agents streaming that was ~1,650 sends a second
# and 1,000 wake-ups of the writer. The arrays go in psycopg's binary format (`%b`): as text,
# every element is escaped by a regex in Python, which cost about as much as executemany
# (docs/decisions.md, "nineteenth sitting"). `%b` is psycopg's own (the driver c2 installs);
# any other driver gets SQLAlchemy's generic executemany.
BULK_DRIVERS = frozenset({"psycopg"})
PG_INSERT_PARTS = (
    "INSERT INTO parts (session_id, seq, role, part_json) "
    "SELECT * FROM unnest(%b::varchar[], %b::bigint[], %b::varchar[], %b::text[])"
)
PG_INSERT_EVENTS = (
    "INSERT INTO events (seq, session_id, payload, created_at) "
    "SELECT seq, sid, payload, %s FROM unnest(%b::bigint[], %b::varchar[], %b::text[]) "
    "AS batch(seq, sid, payload)"
)

_INSERT_PARTS = insert(PartRow.__table__)  # type: ignore[attr-defined]
_INSERT_EVENTS = insert(EventRow.__table__)  # type: ignore[attr-defined]

PartRowValues = tuple[str, int, str, str]  # session_id, seq, role, part_json


@dataclass
class WriteBuffer:
    """One batch's rows, events and index steps, inserted together before COMMIT."""

    parts: list[PartRowValues] = field(default_factory=list)
    events: list[tuple[str | None, str]] = field(default_factory=list)  # session_id, payload
    search: list[SearchOp] = field(default_factory=list)  # index steps, in row order
    # The writer's search states between batches (core/store/search.py); None: read them.
    search_cache: dict[str, SearchState] | None = None
    # Events webhooks may subscribe to, by index into `events`: their outbox rows are
    # inserted with them (core/store/webhooks.py).
    notify: list[tuple[int, Event]] = field(default_factory=list)

    def add_parts(self, rows: list[PartRowValues]) -> None:
        """Queue transcript rows."""
        self.parts.extend(rows)

    def add_event(self, session: str | None, payload: str, notify: Event | None = None) -> int:
        """Queue one event row (with `notify`, also its webhook deliveries); returns its index
        into the seqs `flush` will return."""
        self.events.append((session, payload))
        index = len(self.events) - 1
        if notify is not None:
            self.notify.append((index, notify))
        return index

    def add_session_events(self, session: str, payloads: list[str]) -> int:
        """Queue event rows of one session that no webhook takes; returns the first one's
        index into the seqs `flush` will return."""
        first = len(self.events)
        self.events.extend([(session, payload) for payload in payloads])
        return first

    def flush(self, conn: Connection, first_seq: int) -> list[int]:
        """Insert everything queued, numbering events from `first_seq`; their seqs in order."""
        seqs = list(range(first_seq, first_seq + len(self.events)))
        now = utcnow()
        if conn.dialect.name == "sqlite":
            self._flush_sqlite(conn, seqs, now)
            index_ops(conn, self.search, self.search_cache)
        else:
            self._flush_core(conn, seqs, now)
        if self.notify:
            record_deliveries(conn, [(seqs[i], ev) for i, ev in self.notify])
        return seqs

    def _flush_core(self, conn: Connection, seqs: list[int], now: datetime) -> None:
        bulk = conn.dialect.driver in BULK_DRIVERS
        if self.parts:
            if bulk:
                conn.exec_driver_sql(
                    PG_INSERT_PARTS, tuple(map(list, zip(*self.parts, strict=True)))
                )
            else:
                conn.execute(
                    _INSERT_PARTS,
                    [
                        {"session_id": sid, "seq": seq, "role": role, "part_json": part}
                        for sid, seq, role, part in self.parts
                    ],
                )
        # After the rows it reads back, in this transaction.
        index_ops(conn, self.search, self.search_cache)
        if self.events:
            if bulk:
                sids, payloads = zip(*self.events, strict=True)
                conn.exec_driver_sql(PG_INSERT_EVENTS, (now, seqs, list(sids), list(payloads)))
            else:
                conn.execute(
                    _INSERT_EVENTS,
                    [
                        {"seq": seq, "session_id": sid, "payload": payload, "created_at": now}
                        for seq, (sid, payload) in zip(seqs, self.events, strict=True)
                    ],
                )

    def _flush_sqlite(self, conn: Connection, seqs: list[int], now: datetime) -> None:
        # At one transcript row and one event per agent chunk, SQLAlchemy's per-row parameter
        # processing costs more than SQLite's insert itself (25 vs 9 µs a pair, measured), and
        # it runs holding the GIL the event loop needs. Bind positionally on the driver cursor
        # of this same transaction instead.
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            if self.parts:
                cursor.executemany(SQLITE_INSERT_PARTS, self.parts)
            if self.events:
                stamp = now.strftime(SQLITE_DATETIME)
                cursor.executemany(
                    SQLITE_INSERT_EVENTS,
                    [
                        (seq, sid, payload, stamp)
                        for seq, (sid, payload) in zip(seqs, self.events, strict=True)
                    ],
                )
        finally:
            cursor.close()
