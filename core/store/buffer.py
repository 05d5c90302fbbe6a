"""Rows appended during one group-commit batch, inserted in bulk just before its COMMIT.

Transcript rows and event rows dominate the write load (one of each per agent chunk); one
executemany per table per batch costs far less than one statement per row. Sequences come
from the single writer's counters (per-session transcript seq, global event seq), seeded
from the database; a second writer on the same database would collide on the primary key
and fail loudly rather than interleave sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, insert

from core.session import utcnow
from core.store.tables import EventRow, PartRow

_EVENTS = EventRow.__table__  # type: ignore[attr-defined]
_PARTS = PartRow.__table__  # type: ignore[attr-defined]
_INSERT_EVENTS = insert(_EVENTS)
_INSERT_PARTS = insert(_PARTS)


@dataclass
class WriteBuffer:
    parts: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def add_part(self, row: dict[str, Any]) -> None:
        self.parts.append(row)

    def add_event(self, session: str | None, payload: str) -> int:
        """Queue one event row; returns its index into the seqs `flush` will return."""
        self.events.append({"session_id": session, "payload": payload, "created_at": utcnow()})
        return len(self.events) - 1

    def flush(self, conn: Connection, first_seq: int) -> list[int]:
        """Insert everything queued, numbering events from `first_seq`; their seqs in order."""
        if self.parts:
            conn.execute(_INSERT_PARTS, self.parts)
        if not self.events:
            return []
        seqs = list(range(first_seq, first_seq + len(self.events)))
        for seq, row in zip(seqs, self.events, strict=True):
            row["seq"] = seq
        conn.execute(_INSERT_EVENTS, self.events)
        return seqs
