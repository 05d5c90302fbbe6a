"""The bus (core/bus.py): who gets which events of a batch, the backlog bound, the wait."""

from __future__ import annotations

import asyncio
import itertools

from c2.core.bus import EventBus
from c2.core.store.events import CommittedEvent


def _batch(*sessions: str | None) -> list[CommittedEvent]:
    return [
        CommittedEvent(seq=seq, session=session, payload="{}")
        for seq, session in enumerate(sessions, start=1)
    ]


def test_a_batch_reaches_every_global_stream_and_each_session_stream_its_own_events():
    bus = EventBus()
    everything = bus.subscribe()
    a, b, c = bus.subscribe(session="a"), bus.subscribe(session="b"), bus.subscribe(session="c")
    bus.publish(_batch("a", "b", None, "a"))
    assert [ev.seq for ev in everything.take()[0]] == [1, 2, 3, 4]
    assert [ev.seq for ev in a.take()[0]] == [1, 4]
    assert [ev.seq for ev in b.take()[0]] == [2]
    assert c.take() == ([], False)


def test_a_stream_past_its_backlog_is_marked_lagged_and_keeps_nothing():
    bus = EventBus()
    sub = bus.subscribe(session="a", backlog=2)
    bus.publish(_batch("a", "a", "a"))
    assert sub.take() == ([], True)
    bus.publish(_batch("a"))
    assert [ev.seq for ev in sub.take()[0]] == [1]  # after the catch-up it is fed again


async def test_wait_wakes_on_a_batch_or_a_close_and_times_out_otherwise():
    bus = EventBus()
    sub = bus.subscribe(session="a")
    assert await sub.wait(0) is False
    waiting = asyncio.ensure_future(sub.wait(60))
    await asyncio.sleep(0)
    bus.publish(_batch("b"))  # not this stream's
    await asyncio.sleep(0)
    assert not waiting.done()
    bus.publish(_batch("a"))
    assert await waiting is True
    sub.take()
    waiting = asyncio.ensure_future(sub.wait(60))
    await asyncio.sleep(0)
    assert bus.close_device("nobody") == 0
    bus.close_all()
    assert await waiting is True and sub.closed


async def test_a_batch_for_a_stream_waiting_idle_is_delivered_at_once_without_waking_it():
    bus = EventBus()
    sub = bus.subscribe(session="a")
    written: list[list[int]] = []
    outcome = True

    def deliver(events: list[CommittedEvent]) -> bool:
        if outcome:
            written.append([ev.seq for ev in events])
        return outcome

    sub.deliver = deliver
    bus.publish(_batch("a"))  # nobody waits yet (a replay, a write in progress): queued
    assert written == [] and [ev.seq for ev in sub.take()[0]] == [1]
    waiting = asyncio.ensure_future(sub.wait(60))
    await asyncio.sleep(0)
    bus.publish(_batch("a", "b", "a"))
    await asyncio.sleep(0)
    assert written == [[1, 3]] and not waiting.done()  # written, the reader still waits
    assert sub.take() == ([], False)
    outcome = False  # the socket pushes back: the reader takes the batch
    bus.publish(_batch("a"))
    assert await waiting is True and [ev.seq for ev in sub.take()[0]] == [1]


async def test_a_direct_write_that_raises_leaves_the_batch_to_the_reader(caplog):
    bus = EventBus()
    sub = bus.subscribe()

    def deliver(events: list[CommittedEvent]) -> bool:
        raise OSError("socket gone")

    sub.deliver = deliver
    waiting = asyncio.ensure_future(sub.wait(60))
    await asyncio.sleep(0)
    bus.publish(_batch(None))
    assert await waiting is True and [ev.seq for ev in sub.take()[0]] == [1]
    assert "direct write failed" in caplog.text


async def test_streams_given_the_same_list_get_it_one_after_another():
    """The ring joins a list's frames once while the same list comes back to back
    (EventRing.frames): every global stream first, then each session's streams together, however
    they were opened."""
    bus = EventBus()
    given: list[int] = []
    subs = [bus.subscribe(session=s) for s in ("a", None, "b", "a", None, "b", None)]

    def deliver(events: list[CommittedEvent]) -> bool:
        given.append(id(events))
        return True

    for sub in subs:
        sub.deliver = deliver
    waits = [asyncio.ensure_future(sub.wait(60)) for sub in subs]
    await asyncio.sleep(0)
    bus.publish(_batch("a", "b", "a", None))
    assert len(given) == 7 and len(set(given)) == 3
    assert [len(list(run)) for _, run in itertools.groupby(given)] == [3, 2, 2]
    bus.close_all()
    await asyncio.gather(*waits)


def test_unsubscribing_leaves_the_other_streams_of_a_session_fed():
    bus = EventBus()
    first, second, everything = (
        bus.subscribe(session="a"),
        bus.subscribe(session="a"),
        bus.subscribe(),
    )
    assert bus.subscriber_count == 3
    bus.unsubscribe(first)
    bus.publish(_batch("a"))
    assert first.take() == ([], False)
    assert [ev.seq for ev in second.take()[0]] == [1]
    bus.unsubscribe(second)
    bus.unsubscribe(second)  # a stream ends once, but twice is harmless
    bus.publish(_batch("a"))
    assert second.take() == ([], False) and bus.subscriber_count == 1
    assert [ev.seq for ev in everything.take()[0]] == [1, 1]


def test_close_device_ends_its_streams_of_both_kinds_only():
    bus = EventBus()
    mine = [bus.subscribe(device_id="d1"), bus.subscribe(session="a", device_id="d1")]
    other = bus.subscribe(session="a", device_id="d2")
    assert bus.close_device("d1") == 2
    assert all(sub.closed for sub in mine) and not other.closed
