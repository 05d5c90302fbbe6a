"""The most recent committed events with their SSE frames, in memory, for catching up.

A stream that falls behind (its bus backlog overflowed, or it resumes from a recent position)
re-reads from here, not from the database: catching up then costs no more per event than live
delivery, so falling behind does not make the server slower (the vicious circle the database
re-read made). Only a gap older than the ring is read from the log.

The ring is filled once per commit batch, on the loop, by the bus (core/bus.py), in sequence
order; a single server seeds it at start with the log's newest events (`seed`, from
core/runtime.py), so resumes after a restart are answered here too. It holds every event
committed after its `floor`; it is bounded by count and by frame bytes, evicting the oldest
first. Each event's frame (`id: SEQ` + `data: {"kind":"event",…}`, docs/api.md §6) is encoded
once here and the same bytes go to every stream.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import islice

from c2.core.store.events import CommittedEvent

DEFAULT_EVENTS = 16_384
DEFAULT_BYTES = 16 * 1024 * 1024


def event_frame(ev: CommittedEvent) -> bytes:
    """`id: SEQ` + `data: {"kind":"event","event":<payload>}`: the stored wire JSON, framed."""
    return b"".join(
        (
            b"id: ",
            str(ev.seq).encode(),
            b'\ndata: {"kind":"event","event":',
            ev.payload.encode(),
            b"}\n\n",
        )
    )


def _seq(ev: CommittedEvent) -> int:
    return ev.seq


class EventRing:
    """Recent committed events and their encoded frames, bounded by count and bytes."""

    def __init__(self, max_events: int = DEFAULT_EVENTS, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_events, self.max_bytes = max_events, max_bytes
        self._events: deque[CommittedEvent] = deque()
        self._frames: dict[int, bytes] = {}
        self._bytes = 0
        # Every event with a greater sequence is held; None until the first batch, as the
        # events committed before the ring existed are only in the log.
        self._floor: int | None = None
        # The newest event taken (held or, if it alone outgrew the bound, already evicted).
        self.newest: int | None = None
        # The last `frames` call: its events (held, so the identity stays theirs) and bytes.
        self._joined_for: Sequence[CommittedEvent] | None = None
        self._joined = b""

    def extend(self, events: list[CommittedEvent]) -> None:
        """Take one commit batch (in sequence order, after every earlier batch; what the ring
        already took, from a seed read after that batch committed, is skipped)."""
        if events and self.newest is not None and events[0].seq <= self.newest:
            events = [ev for ev in events if ev.seq > self.newest]
        if not events:
            return
        if self._floor is None:
            self._floor = events[0].seq - 1
        self.newest = events[-1].seq
        for ev in events:
            frame = event_frame(ev)
            self._events.append(ev)
            self._frames[ev.seq] = frame
            self._bytes += len(frame)
        while self._events and (
            len(self._events) > self.max_events or self._bytes > self.max_bytes
        ):
            old = self._events.popleft()
            self._bytes -= len(self._frames.pop(old.seq))
            self._floor = old.seq

    def seed(self, newest: list[CommittedEvent]) -> None:
        """Take the log's newest events (in sequence order: every event after the first one's
        predecessor, up to the log's head when read), if the ring has taken nothing yet.

        A started server's ring is empty, so every client resuming after a restart read its
        gap from the database, each stream its own read; seeded at start, the ring answers
        those within its reach as it answers any resume (bench/events.py)."""
        if self._floor is None:
            self.extend(newest)

    def frame(self, ev: CommittedEvent) -> bytes:
        """`ev`'s frame: the shared bytes while it is held, else encoded now."""
        frame = self._frames.get(ev.seq)
        return frame if frame is not None else event_frame(ev)

    def frames(self, events: Sequence[CommittedEvent]) -> bytes:
        """The frames of `events` (a sequence nobody changes afterwards), joined. This runs
        for every stream and batch; the streams on every session get the batch's own list
        (core/bus.py), so it is joined once for all of them."""
        if events is self._joined_for:
            return self._joined
        held = self._frames.get
        joined = b"".join([held(ev.seq) or event_frame(ev) for ev in events])
        self._joined_for, self._joined = events, joined
        return joined

    def after(self, seq: int, session: str | None, limit: int) -> list[CommittedEvent] | None:
        """Up to `limit` held events after `seq` (of one session, or all), oldest first; None
        when events after `seq` may be older than the ring (read those from the log)."""
        if self._floor is None or seq < self._floor:
            return None
        events = self._events
        start = bisect_right(events, seq, key=_seq)
        newer = len(events) - start
        tail: Iterable[CommittedEvent]
        if start <= newer:
            tail = islice(events, start, None)
        else:
            # A deque is walked from an end: from the newest one, a stream close behind (the
            # usual case: every live catch-up) costs what it reads, not the whole ring.
            tail = list(islice(reversed(events), newer))
            tail.reverse()
        if session is None:
            return list(islice(tail, limit))
        return list(islice((ev for ev in tail if ev.session == session), limit))

    def __len__(self) -> int:
        return len(self._events)

    @property
    def size_bytes(self) -> int:
        """The encoded size of the events held."""
        return self._bytes
