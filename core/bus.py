"""In-process fan-out of committed events to live streams.

Publishing never blocks: each subscription holds a bounded backlog, and a subscriber that
falls past it is marked lagged and its backlog dropped; it then catches up from the ring of
recent events (core/event_ring.py, filled here once per batch) and the durable event log beyond
it, so it never silently misses an event and costs bounded memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from c2.core.event_ring import EventRing
from c2.core.store.events import CommittedEvent

DEFAULT_BACKLOG = 1024
log = logging.getLogger(__name__)


@dataclass(eq=False)
class Subscription:
    """One live stream's view of the bus."""

    session: str | None = None  # only this session's events (None: every event)
    device_id: str | None = None
    backlog: int = DEFAULT_BACKLOG
    lagged: bool = False
    closed: bool = False
    # A list, not a deque: it is only extended and taken whole, and an empty deque is ten
    # times the size of an empty list on every idle stream (bench/events.py).
    _pending: list[CommittedEvent] = field(default_factory=list)
    # The reader's wait in progress: resolved True by a push or a close, False by its timer.
    _waiter: asyncio.Future[bool] | None = None
    # Writes a batch to the client at once, from the publish (api/stream.py): True when it
    # did, False when the reader must (it queues the batch then). Tried only while the reader
    # waits with nothing pending, so everything it was given is already written.
    deliver: Callable[[list[CommittedEvent]], bool] | None = None

    def push(self, events: list[CommittedEvent]) -> None:
        """Queue `events` (in sequence order), already only those this stream should see (the
        bus splits each batch by session once, for every stream), or deliver them at once."""
        if self.closed or self.lagged:
            return
        if self._idle() and self._delivered(events):
            return
        if len(self._pending) + len(events) > self.backlog:
            # Drop the backlog rather than grow it: the stream re-reads from the log.
            self._pending.clear()
            self.lagged = True
        else:
            self._pending.extend(events)
        self._wake()

    def close(self) -> None:
        """End the stream: it takes nothing more and its reader wakes to see it closed."""
        self.closed = True
        self._pending.clear()
        self._wake()

    def _idle(self) -> bool:
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._pending

    def _delivered(self, events: list[CommittedEvent]) -> bool:
        # A live batch to a caught-up stream is one socket write from here: waking the
        # stream's task for it (a future, a timer, its chain of awaits) cost several times
        # that write per stream and batch (bench/fleet.py).
        if self.deliver is None:
            return False
        try:
            return self.deliver(events)
        except Exception:
            log.exception("a stream's direct write failed; its reader takes the batch")
            return False

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until events, a lag or a close are pending; False on timeout.

        A bare future and one timer per wait: this runs once per batch per stream, and
        `asyncio.wait_for` (a task, an event and their callbacks) was a visible share of a
        stream's CPU (bench/fleet.py)."""
        if self._pending or self.lagged or self.closed:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiter = waiter
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            return await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def take(self) -> tuple[list[CommittedEvent], bool]:
        """Pending events and whether the stream lagged (then it must catch up from the log).

        The lag flag is cleared here, before the caller reads the log, so an event published
        during the catch-up lands in the backlog and is deduplicated by sequence.
        """
        events, self._pending = self._pending, []
        lagged, self.lagged = self.lagged, False
        return events, lagged


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class EventBus:
    """Fans committed events out to the live streams' subscriptions, in commit order."""

    def __init__(self, recent: EventRing | None = None) -> None:
        # Streams of every event, and the streams of one session by session: a batch reaches
        # the sessions it touches without a pass over every stream, and the streams given the
        # same list are pushed one after another, so the ring joins its frames once for them
        # (EventRing.frames keeps only the last join).
        self._everything: set[Subscription] = set()
        self._sessions: dict[str, set[Subscription]] = {}
        self.recent = recent if recent is not None else EventRing()

    def subscribe(
        self,
        *,
        session: str | None = None,
        device_id: str | None = None,
        backlog: int = DEFAULT_BACKLOG,
    ) -> Subscription:
        """A new stream's subscription (one session's events, or all), fed from now on."""
        sub = Subscription(session=session, device_id=device_id, backlog=backlog)
        if session is None:
            self._everything.add(sub)
        else:
            self._sessions.setdefault(session, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop feeding `sub` (its stream ended)."""
        if sub.session is None:
            self._everything.discard(sub)
            return
        watching = self._sessions.get(sub.session)
        if watching is not None:
            watching.discard(sub)
            if not watching:
                del self._sessions[sub.session]

    def publish(self, events: list[CommittedEvent]) -> None:
        """Fan `events` (one commit batch, in sequence order) out to every live stream."""
        self.recent.extend(events)  # first: a stream woken by this batch may read the ring
        for sub in tuple(self._everything):
            sub.push(events)
        watched = self._sessions
        if not watched:
            return
        by_session: dict[str, list[CommittedEvent]] = {}
        for ev in events:  # split once per batch, not once per session stream
            session = ev.session
            if session is not None and session in watched:
                by_session.setdefault(session, []).append(ev)
        for session, own in by_session.items():
            for sub in tuple(watched.get(session, ())):
                sub.push(own)

    def _every(self) -> Iterator[Subscription]:
        yield from self._everything
        for watching in self._sessions.values():
            yield from watching

    def close_device(self, device_id: str) -> int:
        """End every stream opened by `device_id` (revoked); returns how many were closed."""
        closed = 0
        for sub in list(self._every()):
            if sub.device_id == device_id:
                sub.close()
                closed += 1
        return closed

    def close_all(self) -> None:
        """End every stream (the server is shutting down)."""
        for sub in list(self._every()):
            sub.close()

    @property
    def subscriber_count(self) -> int:
        """How many streams are subscribed."""
        return len(self._everything) + sum(map(len, self._sessions.values()))

    @property
    def lagging_count(self) -> int:
        """How many streams overflowed their backlog and have not caught up yet (a stream
        blocked on a client that stopped reading stays here until it is dropped)."""
        return sum(1 for sub in self._every() if sub.lagged)
