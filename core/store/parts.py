"""Transcript rows: append with a per-session contiguous seq; bounded reads for paging.

Paging policy (complete user turns, cursors) lives in core/transcript.py; this module only
offers the indexed queries it needs, so a page never scans a whole session.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import Connection, bindparam, func, insert, select

from c2.core.protocol.chunks import SEARCH_KIND, ChunkRun
from c2.core.protocol.state import PART_ADAPTER, Part, TranscriptEntry
from c2.core.store.buffer import PartRowValues, WriteBuffer
from c2.core.store.search import SearchWriter
from c2.core.store.tables import USER_ROW, PartRow

_PARTS = PartRow.__table__  # type: ignore[attr-defined]
Role = Literal["user", "agent"]
# Built once: constructing Core statements per call costs more than executing them.
_INSERT = insert(_PARTS)
_MAX_SEQ = select(func.max(_PARTS.c.seq)).where(_PARTS.c.session_id == bindparam("sid"))
# Newest rows first within [lo, hi): a page reads backwards from its cursor (primary key).
_NEWEST = (
    select(_PARTS.c.seq, _PARTS.c.role, _PARTS.c.part_json)
    .where(
        _PARTS.c.session_id == bindparam("sid"),
        _PARTS.c.seq >= bindparam("lo"),
        _PARTS.c.seq < bindparam("hi"),
    )
    .order_by(_PARTS.c.seq.desc())
    .limit(bindparam("n"))
)
_NEWEST_BATCH = 1000
Row = tuple[int, str, str]  # seq, role, the part's stored JSON


def _entry(row: Row) -> TranscriptEntry:
    seq, role, raw = row
    return TranscriptEntry(seq=seq, last_seq=seq, role=role, part=PART_ADAPTER.validate_json(raw))


def row_bytes(raw: str, overhead: int) -> int:
    """What a row costs a page: its part's JSON in UTF-8 plus the entry's own members."""
    return len(raw.encode()) + overhead


class PartRepository:
    """A session's transcript rows, by seq."""

    def __init__(
        self,
        conn: Connection,
        next_seqs: dict[str, int] | None = None,
        buffer: WriteBuffer | None = None,
        search: SearchWriter | None = None,
    ) -> None:
        self._conn = conn
        self._search = search  # the writer's index of the rows it appends; None for readers
        # The single writer's cache of each session's next seq; None for readers.
        self._next_seqs = next_seqs
        self._buffer = buffer
        # Highest seq this unit of work appended per session (burned if its write fails) and
        # the writer's counter before its first append (restored if its transaction fails).
        self.appended: dict[str, int] = {}
        self.prior: dict[str, int | None] = {}

    def next_seq(self, session_id: str) -> int:
        """The seq the session's next row takes."""
        if self._next_seqs is not None and session_id in self._next_seqs:
            return self._next_seqs[session_id]
        top = self.max_seq(session_id)
        return 0 if top is None else top + 1

    def append(self, session_id: str, role: Role, part: Part) -> int:
        """Append one row; returns its seq (per session, from 0)."""
        seq = self._claim(session_id, 1)
        self._insert([(session_id, seq, role, part.model_dump_json(exclude_none=True))])
        if self._search is not None:
            self._search.row(session_id, seq, role, part)
        return seq

    def append_run(self, run: ChunkRun) -> int:
        """Append the rows of a run of streamed chunks (agent rows, consecutive seqs);
        returns the first one's seq."""
        sid = run.session
        first = self._claim(sid, len(run.bodies))
        self._insert(
            [(sid, seq, "agent", part) for seq, part in enumerate(run.part_jsons(), first)]
        )
        if self._search is not None:
            self._search.chunks(sid, first, SEARCH_KIND[run.kind], run.texts)
        return first

    def _claim(self, session_id: str, count: int) -> int:
        """Take the session's next `count` seqs; returns the first."""
        seq = self.next_seq(session_id)
        if self._next_seqs is not None:
            if session_id not in self.prior:
                self.prior[session_id] = self._next_seqs.get(session_id)
            self._next_seqs[session_id] = seq + count
        self.appended[session_id] = seq + count - 1
        return seq

    def _insert(self, rows: list[PartRowValues]) -> None:
        if self._buffer is not None:
            self._buffer.add_parts(rows)
        else:
            self._conn.execute(
                _INSERT,
                [
                    {"session_id": sid, "seq": seq, "role": role, "part_json": part_json}
                    for sid, seq, role, part_json in rows
                ],
            )

    def max_seq(self, session_id: str) -> int | None:
        """The session's newest seq, None without rows."""
        top = self._conn.execute(_MAX_SEQ, {"sid": session_id}).scalar()
        return None if top is None else int(top)

    def count_user_rows(self, session_id: str) -> int:
        """How many user rows (prompts, one per turn) the session has: turns are numbered by it."""
        count = self._conn.execute(
            select(func.count())
            .select_from(_PARTS)
            .where(_PARTS.c.session_id == session_id, USER_ROW)
        ).scalar()
        return int(count or 0)

    def min_seq(self, session_id: str) -> int | None:
        """The session's oldest seq, None without rows."""
        low = self._conn.execute(
            select(func.min(_PARTS.c.seq)).where(_PARTS.c.session_id == session_id)
        ).scalar()
        return None if low is None else int(low)

    def role_of(self, session_id: str, seq: int) -> Role | None:
        """The role of row `seq`, None when there is no such row."""
        role = self._conn.execute(
            select(_PARTS.c.role).where(_PARTS.c.session_id == session_id, _PARTS.c.seq == seq)
        ).scalar()
        return role

    def user_seqs_before(self, session_id: str, below: int, limit: int) -> list[int]:
        """Newest `limit` user-row seqs strictly below `below`, newest first (index scan)."""
        rows = self._conn.execute(
            select(_PARTS.c.seq)
            .where(
                _PARTS.c.session_id == session_id,
                USER_ROW,
                _PARTS.c.seq < below,
            )
            .order_by(_PARTS.c.seq.desc())
            .limit(limit)
        ).all()
        return [int(r[0]) for r in rows]

    def newest_rows(
        self, session_id: str, start: int, below: int, budget: int, overhead: int
    ) -> tuple[list[Row], bool]:
        """Rows with start <= seq < below, as many of the newest as fit `budget` bytes
        (`row_bytes`; the newest always fits), ascending, and whether older ones were left
        out. Reads backwards in batches, so a cut page never reads what it leaves out."""
        rows: list[Row] = []
        used, high = 0, below
        while True:
            batch = self._conn.execute(
                _NEWEST, {"sid": session_id, "lo": start, "hi": high, "n": _NEWEST_BATCH}
            ).all()
            for seq, role, raw in batch:
                cost = row_bytes(raw, overhead)
                if rows and used + cost > budget:
                    rows.reverse()
                    return rows, True
                used += cost
                rows.append((seq, role, raw))
            if len(batch) < _NEWEST_BATCH:
                rows.reverse()
                return rows, False
            high = batch[-1][0]

    def range(self, session_id: str, start: int, end_inclusive: int) -> list[TranscriptEntry]:
        """Rows with start <= seq <= end_inclusive, ascending."""
        rows = self._conn.execute(
            select(_PARTS.c.seq, _PARTS.c.role, _PARTS.c.part_json)
            .where(
                _PARTS.c.session_id == session_id,
                _PARTS.c.seq >= start,
                _PARTS.c.seq <= end_inclusive,
            )
            .order_by(_PARTS.c.seq)
        ).all()
        return [_entry((r[0], r[1], r[2])) for r in rows]
