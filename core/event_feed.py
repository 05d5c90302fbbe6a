"""What an event stream reads from the durable log (docs/api.md §6): the welcome snapshot (the
first page of the session list) with the log position it reflects, whether a resume position
can be replayed (else a resync), and the events after a position, in batches (from the ring of
recent events while it reaches back that far, else from the log), and events' shared
frames. api/stream.py orders and sends them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from c2.core.errors import DomainError, StoreUnavailableError
from c2.core.event_ring import EventRing
from c2.core.session_list import SessionPage, read_session_page
from c2.core.store.database import ReadUnit, Store
from c2.core.store.events import CommittedEvent, LogBounds

__all__ = ["REPLAY_BATCH", "CommittedEvent", "EventFeed", "LogBounds", "resync_reason"]
REPLAY_BATCH = 500


def resync_reason(after: int, bounds: LogBounds) -> str | None:
    """Why `after` cannot be replayed from a log with `bounds`, or None when it can."""
    if after > bounds.last:
        return "position is ahead of the event log"
    if bounds.first is not None and after < bounds.first - 1:
        return "position is older than the retained event log"
    return None


class EventFeed:
    """Reads of the event log and the session list for streams, over one store."""

    def __init__(self, store: Store, recent: EventRing) -> None:
        self._store, self._recent = store, recent
        # Replay reads, and those of them that went to the database (the ring didn't reach).
        self.replay_reads = self.log_reads = 0
        self.welcome_reads = 0  # reads of welcome snapshots, each shared by the streams that asked
        self._welcomes: dict[str | None, asyncio.Future[tuple[SessionPage, int]]] = {}

    async def welcome(self, session: str | None = None) -> tuple[SessionPage, int]:
        """The welcome snapshot (one session's, or the first page of the active ones: the
        rest is fetched with its `next_cursor`) and the log position it reflects, from one
        read transaction; StoreUnavailableError when it can't be read.

        Streams that ask while a read of the same snapshot is under way share it, so many
        clients opening streams at once without a position (page loads after a deploy,
        watchers started together, resyncs) cost one read and one encoding of each record,
        not one per client. Any snapshot is a correct welcome with the position it reflects:
        each stream then replays what committed after it (api/stream.py)."""
        pending = self._welcomes.get(session)
        if pending is None:
            pending = asyncio.ensure_future(self._read_welcome(session))
            self._welcomes[session] = pending
            pending.add_done_callback(lambda _: self._welcomes.pop(session, None))
        # One stream that goes away must not cancel the read the others wait for.
        return await asyncio.shield(pending)

    async def _read_welcome(self, session: str | None) -> tuple[SessionPage, int]:
        def read(r: ReadUnit) -> tuple[SessionPage, int]:
            if session is None:
                page = read_session_page(r, None, None)
            else:  # one row by key, not the list filtered
                record = r.sessions.get(session)
                page = SessionPage([] if record is None or record.archived else [record], None)
            return page, r.events.last_seq()

        self.welcome_reads += 1
        try:
            return await self._store.read(read)
        except DomainError:
            raise
        except Exception as exc:
            raise StoreUnavailableError(f"couldn't read sessions: {exc}") from exc

    async def resync(self, after: int) -> str | None:
        """Why a stream can't resume after `after` (it gets a resync), or None."""
        return resync_reason(after, await self._store.read(lambda r: r.events.bounds()))

    async def after(self, seq: int, session: str | None) -> list[CommittedEvent]:
        """Up to REPLAY_BATCH events after `seq` (of one session, or all), oldest first."""
        self.replay_reads += 1
        held = self._recent.after(seq, session, REPLAY_BATCH)
        if held is not None:
            return held
        self.log_reads += 1
        return await self._store.read(
            lambda r: r.events.after(seq, session=session, limit=REPLAY_BATCH)
        )

    def frames(self, events: Sequence[CommittedEvent]) -> bytes:
        """The SSE frames of `events`, joined (the ring's shared bytes where it holds them)."""
        return self._recent.frames(events)
