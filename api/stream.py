"""One SSE stream per client (docs/api.md §6): welcome frame, replay from the log, live fan-out.

What it reads comes from core/event_feed.py; this module only orders and frames it.

The stream subscribes to the bus before it reads anything, so nothing falls between a read
and the live tail. (A welcome snapshot shared with streams that asked earlier can be older
than the subscription: what was published in between is replayed after it.) It sends each
sequence at most once (dedup by seq) and catches up from the durable log when it lagged. Event
frames are encoded once per event (core/event_ring.py) and the same bytes go to every stream;
a batch of them is one chunk, so one write per client.

A stream writes at most once per `write_interval`: what is published meanwhile goes out with
the next write. A socket write and the send chain above it cost the same for one frame as for
fifty, and at 100 chunks/s per session an unpaced stream wrote once per commit.

A caught-up stream waiting idle does not wake for a live batch: the publish writes it to the
client's socket itself (`Subscription.deliver`, through the server's chunk writer). The
stream's task takes over whenever that cannot be done at once: within the write interval, a
socket that pushes back (the send timeout then applies), a lag, a close.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing

from c2.core.bus import EventBus, Subscription
from c2.core.event_feed import REPLAY_BATCH, CommittedEvent, EventFeed
from c2.core.event_ring import event_frame

__all__ = ["PING", "EventStream", "StreamSlots", "data_frame", "event_frame"]
log = logging.getLogger(__name__)
# The heartbeat comes from the stream itself (one task fewer per idle stream than
# sse-starlette's own pinger); sse-starlette still applies the send timeout to it.
PING = b": ping\n\n"


def data_frame(data: str, seq: int | None = None) -> bytes:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}data: {data}\n\n".encode()


class StreamSlots:
    """Open streams per device, capped: one device cannot hold every connection."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._open: Counter[str] = Counter()

    def full(self, device_id: str) -> bool:
        return self._open[device_id] >= self.cap

    def open(self, device_id: str) -> bool:
        """Take a slot; False (nothing taken) when the device already holds `cap`."""
        if self.full(device_id):
            return False
        self._open[device_id] += 1
        return True

    def close(self, device_id: str) -> None:
        self._open[device_id] -= 1
        if self._open[device_id] <= 0:
            del self._open[device_id]


class EventStream:
    """Frames for one client; iterate `frames()` exactly once."""

    def __init__(
        self,
        *,
        feed: EventFeed,
        bus: EventBus,
        device_id: str,
        session: str | None,
        after: int | None,
        backlog: int,
        ping: float,
        slots: StreamSlots,
        still_paired: Callable[[], Awaitable[bool]],
        write_interval: float = 0.0,
    ) -> None:
        self._feed, self._bus = feed, bus
        self._slots, self._still_paired = slots, still_paired
        self._ping = ping
        self._write_interval = write_interval
        self._device_id, self._session, self._after = device_id, session, after
        self._backlog = backlog
        self.last = -1  # highest sequence sent (or covered by the welcome frame)
        # The client's socket, to write live batches from the publish (`write_directly`).
        self._write: Callable[[bytes], bool] | None = None
        self._written = -write_interval  # loop time of the last write of events
        self._sent = 0.0  # loop time of the last write of anything (pings count)
        self._clock: Callable[[], float] = time.monotonic  # the loop's clock, once live

    def write_directly(self, write: Callable[[bytes], bool]) -> None:
        """Once live, write each batch published while this stream waits idle straight to the
        client with `write` (api/http11.py: False when it cannot, and the stream's own task
        then writes the batch as before)."""
        self._write = write

    async def frames(self) -> AsyncGenerator[bytes, None]:
        if not self._slots.open(self._device_id):
            return  # lost a race for the last slot after the route's check: end at once
        sub = self._bus.subscribe(
            session=self._session, device_id=self._device_id, backlog=self._backlog
        )
        published = self._bus.recent.newest  # the subscription gets what comes after this
        try:
            # Revocation closes the device's subscriptions; one revoked between the route's
            # authentication and this subscription had none to close, so look again now.
            if not await self._still_paired():
                log.info("stream of revoked device %s closed at subscribe", self._device_id)
                return
            after = self._after
            welcome = after is None
            if after is not None:
                reason = await self._feed.resync(after)
                if reason is not None:
                    yield data_frame(json.dumps({"kind": "resync", "reason": reason}))
                    welcome = True
                else:
                    self.last = after
                    async for chunk in self._replay():
                        yield chunk
            if welcome:
                yield await self._welcome()
                if published is not None and 0 <= self.last < published:
                    # A welcome shared with streams that asked before this one (EventFeed.
                    # welcome) can be older than this subscription: what was published in
                    # between is not in its queue, so it comes from the ring (or the log).
                    async for chunk in self._replay():
                        yield chunk
            async with aclosing(self._live(sub)) as live:
                async for chunk in live:
                    yield chunk
        finally:
            self._bus.unsubscribe(sub)
            self._slots.close(self._device_id)

    async def _live(self, sub: Subscription) -> AsyncGenerator[bytes, None]:
        """The live tail: each wake's new frames as one chunk, at most one per write interval,
        `: ping` when idle, the log's gap after a lag; ends when the subscription closes."""
        loop = asyncio.get_running_loop()
        self._sent = loop.time()  # the welcome or the replay just went out
        if self._write is not None:
            # The loop's clock, kept: `_deliver` runs for every batch, and each
            # asyncio.get_running_loop() there is a getpid() system call (CPython 3.11).
            self._clock = loop.time
            sub.deliver = self._deliver
        while self.last >= 0:
            quiet = self._sent + self._ping - loop.time()  # until the next ping is due
            if quiet <= 0 or not await sub.wait(quiet):
                if self._sent + self._ping <= loop.time():  # nothing was delivered meanwhile
                    self._sent = loop.time()
                    yield PING
                continue
            hold = self._written + self._write_interval - loop.time()
            if hold > 0:
                await asyncio.sleep(hold)  # what arrives meanwhile joins this write
            if sub.closed:
                return
            events, lagged = sub.take()
            if lagged:
                log.debug("stream of %s lagged at seq %d; catching up", self._device_id, self.last)
                # The backlog overflowed and was dropped: re-read the gap from the log; what
                # arrives meanwhile is taken next round and deduplicated by seq.
                async for chunk in self._replay():
                    yield chunk
                self._written = self._sent = loop.time()
                continue
            new = self._unsent(events)
            if new:
                self.last = new[-1].seq
                yield self._feed.frames(new)
                self._written = self._sent = loop.time()

    def _deliver(self, events: list[CommittedEvent]) -> bool:
        """`sub.deliver`: write a batch published while the stream waits idle, now; False
        when its task must (the write interval has not passed, or the socket pushes back)."""
        now = self._clock()
        if self._write is None or now < self._written + self._write_interval:
            return False
        new = self._unsent(events)
        if new:
            if not self._write(self._feed.frames(new)):
                return False
            self.last = new[-1].seq
            self._written = self._sent = now
        return True

    async def _welcome(self) -> bytes:
        try:
            page, through = await self._feed.welcome(self._session)
        except Exception as exc:
            # The protocol's explicit failure frame: clients keep their last good list. The
            # stream then ends, as it has no position to continue from.
            log.warning("sessions frame failed: %s", exc)
            self.last = -1
            message = (
                getattr(exc, "message", None) or f"session list unavailable ({type(exc).__name__})"
            )
            return data_frame(json.dumps({"kind": "sessions_error", "message": message}))
        self.last = through
        return data_frame(
            f'{{"kind":"sessions","sessions":{page.sessions_json()},"through":{through},'
            f'"next_cursor":{json.dumps(page.next_cursor)}}}',
            through,
        )

    async def _replay(self) -> AsyncIterator[bytes]:
        """Events after `self.last` from the durable log, in batches, until caught up."""
        while True:
            batch = await self._feed.after(self.last, self._session)
            if batch:
                self.last = batch[-1].seq
                yield self._feed.frames(batch)
            if len(batch) < REPLAY_BATCH:
                return

    def _unsent(self, events: Sequence[CommittedEvent]) -> Sequence[CommittedEvent]:
        """Those of `events` (in sequence order) not sent yet; a catch-up may have sent a
        prefix of them already. `events` itself when all are: its frames are joined once for
        every stream given the same batch (core/event_ring.py)."""
        if events and events[0].seq > self.last:
            return events  # the usual case, a live batch: nothing of it was sent
        cut = bisect_right(events, self.last, key=_seq)
        return events[cut:] if cut else events


def _seq(ev: CommittedEvent) -> int:
    return ev.seq
