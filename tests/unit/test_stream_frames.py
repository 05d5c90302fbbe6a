"""SSE frame building (api/stream.py), the resume decision (core/event_feed.py) and a
stream's write pacing, without a server."""

from __future__ import annotations

import asyncio
import contextlib
import json

from c2.api.stream import PING, EventStream, StreamSlots, data_frame, event_frame
from c2.core.bus import EventBus
from c2.core.event_feed import EventFeed, resync_reason
from c2.core.event_ring import EventRing
from c2.core.session_list import SessionPage
from c2.core.store.events import CommittedEvent, LogBounds


def test_event_frame_wraps_the_stored_payload_verbatim():
    """`id: SEQ` then the stored wire JSON inside an `event` frame, byte for byte."""
    payload = '{"event":"error","session":null,"message":"é\\n","terminal":false}'
    frame = event_frame(CommittedEvent(seq=42, session=None, payload=payload))
    head, data, end = frame.split(b"\n", 2)
    assert head == b"id: 42" and end == b"\n"
    assert data == b'data: {"kind":"event","event":' + payload.encode() + b"}"
    assert json.loads(data[6:])["event"] == json.loads(payload)


def test_data_frame_optionally_carries_an_id():
    """Non-event frames have no id, except the welcome frame which carries `through`."""
    assert data_frame('{"kind":"resync"}') == b'data: {"kind":"resync"}\n\n'
    assert data_frame("{}", 7) == b"id: 7\ndata: {}\n\n"


def test_resync_reason_only_outside_the_retained_log():
    """Replayable: first-1 ≤ after ≤ last; older or ahead positions need a resync."""
    bounds = LogBounds(first=10, last=20)
    assert resync_reason(9, bounds) is None and resync_reason(20, bounds) is None
    assert "older" in (resync_reason(8, bounds) or "")
    assert "ahead" in (resync_reason(21, bounds) or "")
    assert resync_reason(0, LogBounds(first=None, last=0)) is None
    assert resync_reason(5, LogBounds(first=None, last=0)) is not None


class _RingOnlyFeed(EventFeed):
    """The stream's reads without a database: an empty welcome at `through` (0 unless given),
    and replays from the ring only."""

    def __init__(self, ring: EventRing, through: int = 0) -> None:
        self._recent, self._through = ring, through
        self.replay_reads = self.log_reads = 0

    async def welcome(self, session: str | None = None) -> tuple[SessionPage, int]:
        return SessionPage([], None), self._through


def _stream(
    bus: EventBus, write_interval: float, ping: float = 60, feed: EventFeed | None = None
) -> EventStream:
    async def paired() -> bool:
        return True

    return EventStream(
        feed=feed or _RingOnlyFeed(bus.recent),
        bus=bus,
        device_id="d",
        session=None,
        after=None,
        backlog=100,
        ping=ping,
        slots=StreamSlots(4),
        still_paired=paired,
        write_interval=write_interval,
    )


def _event(seq: int) -> CommittedEvent:
    return CommittedEvent(seq=seq, session="s", payload=f'{{"n":{seq}}}')


async def test_stream_writes_what_is_published_within_its_write_interval_with_the_next_write():
    """The first event after a quiet spell goes out at once; one woken within the write
    interval after a write waits for it, and what is published meanwhile joins that write."""
    bus = EventBus()
    frames = _stream(bus, write_interval=0.2).frames()
    assert b'"kind":"sessions"' in await anext(frames)
    bus.publish([_event(1)])
    assert await anext(frames) == event_frame(_event(1))
    following = asyncio.ensure_future(anext(frames))
    bus.publish([_event(2)])
    for _ in range(5):  # let the stream wake and start holding its write
        await asyncio.sleep(0)
    assert not following.done()
    bus.publish([_event(3)])
    assert await following == event_frame(_event(2)) + event_frame(_event(3))
    await frames.aclose()
    assert bus.subscriber_count == 0


async def test_a_welcome_older_than_the_subscription_is_followed_by_what_came_between():
    """A welcome shared with streams that asked earlier can reflect the log before this
    stream subscribed: the events published in between follow it from the ring, before the
    live ones, each once."""
    bus = EventBus()
    bus.publish([_event(1), _event(2)])
    bus.publish([_event(3)])
    frames = _stream(bus, write_interval=0, feed=_RingOnlyFeed(bus.recent, through=1)).frames()
    welcome = await anext(frames)
    assert b'"kind":"sessions"' in welcome and welcome.startswith(b"id: 1\n")
    assert await anext(frames) == event_frame(_event(2)) + event_frame(_event(3))
    bus.publish([_event(3), _event(4)])
    assert await anext(frames) == event_frame(_event(4))
    await frames.aclose()


async def test_stream_without_a_write_interval_writes_each_wake():
    bus = EventBus()
    frames = _stream(bus, write_interval=0).frames()
    await anext(frames)
    for seq in (1, 2):
        bus.publish([_event(seq)])
        assert await anext(frames) == event_frame(_event(seq))
    await frames.aclose()


async def test_a_live_stream_waiting_idle_gets_each_batch_written_straight_to_its_socket():
    """Batches go out through the socket writer from the publish; the stream's task takes
    over within the write interval and when the socket pushes back, in sequence order."""
    bus = EventBus()
    stream = _stream(bus, write_interval=0.2)
    written: list[bytes] = []
    accept = True

    def write(body: bytes) -> bool:
        if accept:
            written.append(body)
        return accept

    stream.write_directly(write)
    frames = stream.frames()
    assert b'"kind":"sessions"' in await anext(frames)  # the welcome goes through the task
    following = asyncio.ensure_future(anext(frames))
    await asyncio.sleep(0)
    bus.publish([_event(1)])
    assert written == [event_frame(_event(1))] and not following.done()
    bus.publish([_event(2)])  # within the write interval: the task holds it for the next write
    bus.publish([_event(3)])
    assert await following == event_frame(_event(2)) + event_frame(_event(3))
    assert written == [event_frame(_event(1))]
    following = asyncio.ensure_future(anext(frames))
    await asyncio.sleep(0.25)
    accept = False  # the socket pushes back: the task writes it (and waits out the send)
    bus.publish([_event(4)])
    assert await following == event_frame(_event(4))
    accept = True
    following = asyncio.ensure_future(anext(frames))
    await asyncio.sleep(0.25)
    bus.publish([_event(4), _event(5)])  # a seq already sent is not sent twice
    assert written[-1] == event_frame(_event(5)) and not following.done()
    following.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await following
    await frames.aclose()
    assert bus.subscriber_count == 0


async def test_a_stream_fed_directly_pings_only_after_a_whole_quiet_interval():
    bus = EventBus()
    stream = _stream(bus, write_interval=0, ping=0.3)
    stream.write_directly(lambda body: True)
    frames = stream.frames()
    await anext(frames)
    loop = asyncio.get_running_loop()
    pinged = asyncio.ensure_future(anext(frames))
    await asyncio.sleep(0.2)
    bus.publish([_event(1)])  # written directly: the stream is not quiet
    written_at = loop.time()
    assert await pinged == PING
    assert loop.time() - written_at >= 0.29  # a ping interval after that write, not the wait's
    await frames.aclose()
