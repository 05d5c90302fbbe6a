"""`GET /v1/events` through a real uvicorn: welcome, fan-out order, resume, lag, auth, resync."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from functools import partial
from typing import Any, cast

import anyio
import httpx
import pytest

from c2.core.protocol.events import ErrorEvent
from c2.core.session import SessionRecord, utcnow
from c2.core.session_list import DEFAULT_LIMIT, SessionPage
from c2.core.store.database import UnitOfWork
from tests.conftest import LiveServer, ServerFactory, SSEClient


def _insert_all(records: list[SessionRecord], uow: UnitOfWork) -> None:
    for rec in records:
        uow.sessions.insert(rec)


def _emit_error(message: str, uow: UnitOfWork) -> None:
    uow.emit(ErrorEvent(session=None, message=message, terminal=False))


async def test_events_stream_opens_with_sessions_frame(live_server: LiveServer, open_stream):
    """A fresh stream starts with a `sessions` frame whose id and `through` are the log head."""
    (head,) = live_server.emit(ErrorEvent(session=None, message="before", terminal=False))
    stream: SSEClient = await open_stream(live_server)
    headers = stream.response.headers
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["cache-control"] == "no-store"
    assert headers["x-accel-buffering"] == "no"
    first = await stream.next()
    assert first is not None and first.kind == "sessions"
    assert first.data == {"kind": "sessions", "sessions": [], "through": head, "next_cursor": None}
    assert first.id == head
    (seq,) = live_server.emit(ErrorEvent(session=None, message="after", terminal=False))
    (frame,) = await stream.events(1)
    assert frame.id == seq
    assert frame.data["event"] == {
        "event": "error",
        "session": None,
        "message": "after",
        "terminal": False,
    }


async def test_events_stream_welcome_is_the_first_page_of_sessions(
    live_server: LiveServer, open_stream
):
    """With more sessions than a page, the welcome frame carries the newest page and a
    `next_cursor`; GET /v1/sessions with it reads the rest, each session once."""
    base = utcnow()
    records = [
        SessionRecord(id=f"s{i:03d}", provider="codex", cwd="/tmp", created_at=base + timedelta(i))
        for i in range(DEFAULT_LIMIT + 7)
    ]
    store = live_server.services.store
    await live_server.acall(lambda: store.write(partial(_insert_all, records)))
    stream = await open_stream(live_server)
    first = await stream.next()
    assert first is not None and first.kind == "sessions"
    newest = [rec.id for rec in reversed(records)]
    assert [s["id"] for s in first.data["sessions"]] == newest[:DEFAULT_LIMIT]
    async with httpx.AsyncClient(base_url=live_server.base_url) as http:
        rest = await http.get(
            "/v1/sessions",
            params={"cursor": first.data["next_cursor"]},
            headers=live_server.headers,
        )
    assert [s["id"] for s in rest.json()["sessions"]] == newest[DEFAULT_LIMIT:]
    assert rest.json()["next_cursor"] is None
    one = await open_stream(live_server, params={"session": "s003"})
    welcome = await one.next()
    assert welcome is not None and welcome.data["next_cursor"] is None
    assert [s["id"] for s in welcome.data["sessions"]] == ["s003"]


async def test_events_stream_fans_out_in_one_order(live_server: LiveServer, open_stream):
    """Two concurrent streams receive every committed event in the same order, same ids."""
    a = await open_stream(live_server)
    b = await open_stream(live_server)
    assert (await a.next()).kind == "sessions"
    assert (await b.next()).kind == "sessions"
    store = live_server.services.store
    await live_server.acall(
        lambda: asyncio.gather(*(store.write(partial(_emit_error, f"m{i}")) for i in range(60)))
    )
    seqs = [
        ev.seq for ev in await live_server.acall(lambda: store.read(lambda r: r.events.after(0)))
    ]
    got_a = await a.events(60)
    got_b = await b.events(60)
    assert [f.id for f in got_a] == seqs
    assert [f.id for f in got_a] == [f.id for f in got_b]
    assert [f.data for f in got_a] == [f.data for f in got_b]


async def test_streams_opened_together_while_events_commit_each_get_every_event_once(
    live_server: LiveServer, open_stream, monkeypatch: pytest.MonkeyPatch
):
    """Streams that open while one welcome read is under way share it (core/event_feed.py),
    though events committed after its snapshot were published before they subscribed: after
    its welcome each stream gets every event past the welcome's `through`, in order, none
    missing. The shared read is held, after its snapshot, until every stream has asked."""
    feed, store = live_server.services.feed, live_server.services.store
    streams = 9
    snapshot_taken = threading.Event()
    asked = 0
    welcome, read_welcome = feed.welcome, feed._read_welcome

    async def counted_welcome(session: str | None = None) -> tuple[SessionPage, int]:
        nonlocal asked
        asked += 1
        return await welcome(session)

    async def held_read(session: str | None) -> tuple[SessionPage, int]:
        snapshot = await read_welcome(session)
        snapshot_taken.set()
        for _ in range(2000):  # at most 20 s: a stream that never asks fails the count below
            if asked == streams:
                break
            await asyncio.sleep(0.01)
        return snapshot

    monkeypatch.setattr(feed, "welcome", counted_welcome)
    monkeypatch.setattr(feed, "_read_welcome", held_read)

    async def produce(count: int, pause: float) -> None:
        for i in range(count):
            await store.write(partial(_emit_error, f"p{i}"))
            await asyncio.sleep(pause)

    first = await open_stream(live_server)  # starts the shared read
    assert await asyncio.to_thread(snapshot_taken.wait, 10)
    await live_server.acall(lambda: produce(5, 0))  # published before the others subscribe
    producing = asyncio.ensure_future(live_server.acall(lambda: produce(40, 0.01), timeout=60))
    later = [await open_stream(live_server) for _ in range(streams - 1)]
    await producing
    last = await live_server.acall(lambda: store.read(lambda r: r.events.last_seq()))
    assert asked == streams and feed.welcome_reads == 1
    for stream in [first, *later]:
        frame = await stream.next()
        assert frame is not None and frame.kind == "sessions"
        through = frame.data["through"]
        got = await stream.events(last - through)
        assert [f.id for f in got] == list(range(through + 1, last + 1))


async def test_events_stream_resumes_after_restart(servers: ServerFactory, open_stream):
    """Last-Event-ID after a server restart replays exactly the missed events, then live."""
    live = servers.start()
    stream = await open_stream(live)
    assert (await stream.next()).kind == "sessions"
    seen = live.emit_errors(3)
    frames = await stream.events(3)
    last = frames[-1].id
    assert last == seen[-1]
    missed = live.emit_errors(4)  # committed; the client stops reading here
    restarted = servers.restart(live)
    missed += restarted.emit_errors(3)
    resumed = await open_stream(
        restarted, headers={**restarted.headers, "Last-Event-ID": str(last)}
    )
    replayed = await resumed.events(len(missed))
    assert [f.id for f in replayed] == missed
    # From the ring, seeded at start with the log's newest events: the database was not read.
    assert restarted.services.feed.log_reads == 0
    (live_seq,) = restarted.emit_errors(1)
    (frame,) = await resumed.events(1)
    assert frame.id == live_seq


async def test_events_stream_after_query_resumes(live_server: LiveServer, open_stream):
    """`?after=SEQ` resumes like Last-Event-ID: no sessions frame, events after SEQ."""
    seqs = live_server.emit_errors(5)
    stream = await open_stream(live_server, params={"after": seqs[1]})
    frames = await stream.events(3)
    assert [f.id for f in frames] == seqs[2:]


async def test_events_stream_last_event_id_wins_over_after(live_server: LiveServer, open_stream):
    """A reconnecting EventSource keeps its old `?after=`; the newer Last-Event-ID wins."""
    seqs = live_server.emit_errors(4)
    headers = {**live_server.headers, "Last-Event-ID": str(seqs[2])}
    stream = await open_stream(live_server, headers=headers, params={"after": seqs[0]})
    (frame,) = await stream.events(1)
    assert frame.id == seqs[3]


async def test_events_stream_slow_client_does_not_delay_others(servers: ServerFactory, open_stream):
    """A client that stops reading neither delays another nor loses events: it catches up."""
    live = servers.start(stream_backlog=8)
    slow = await open_stream(live)
    fast = await open_stream(live)
    assert (await slow.next()).kind == "sessions"
    assert (await fast.next()).kind == "sessions"
    count, size = 240, 32_000  # ~7.7 MB: more than the socket buffers hold
    emitted: list[int] = []

    async def produce() -> None:
        for _ in range(count // 40):
            emitted.extend(await asyncio.to_thread(live.emit_errors, 40, size=size))

    with anyio.fail_after(30):
        _, got = await asyncio.gather(produce(), fast.events(count, timeout=30))
    assert [f.id for f in got] == emitted
    # The slow client resumes: everything, in order, no duplicates, via catch-up from the ring
    # of recent events: not one replay read reached the database.
    caught_up = await slow.events(count, timeout=30)
    assert [f.id for f in caught_up] == emitted
    feed = live.services.feed
    assert feed.replay_reads > 0 and feed.log_reads == 0


async def test_events_stream_catches_up_from_log_then_ring(servers: ServerFactory, open_stream):
    """A client further behind than the ring holds reads the gap from the log, then the ring:
    still every event exactly once, in order."""
    live = servers.start(stream_backlog=8)
    live.services.bus.recent.max_events = 30  # the ring holds the newest 30 events only
    slow = await open_stream(live)
    assert (await slow.next()).kind == "sessions"
    emitted: list[int] = []
    for _ in range(6):  # 240 x 32 kB: far more than the socket buffers and the backlog hold
        emitted.extend(await asyncio.to_thread(live.emit_errors, 40, size=32_000))
    caught_up = await slow.events(len(emitted), timeout=30)
    assert [f.id for f in caught_up] == emitted
    assert live.services.feed.log_reads > 0


async def test_events_stream_ticket_works_once(live_server: LiveServer, open_stream):
    """A stream ticket opens one stream without a bearer; reusing it is a 401 problem."""
    async with httpx.AsyncClient(base_url=live_server.base_url) as client:
        resp = await client.post("/v1/stream-tickets", headers=live_server.headers)
    assert resp.status_code == 200
    body = resp.json()
    assert body["expires_in"] == 300
    stream = await open_stream(live_server, headers={}, params={"ticket": body["ticket"]})
    assert (await stream.next()).kind == "sessions"
    async with httpx.AsyncClient(base_url=live_server.base_url) as client:
        again = await client.get("/v1/events", params={"ticket": body["ticket"]})
    assert again.status_code == 401
    assert again.headers["content-type"] == "application/problem+json"
    assert again.json()["code"] == "invalid_ticket"


async def test_events_stream_ends_when_device_revoked(live_server: LiveServer, open_stream):
    """Revoking a device ends its open streams and kills its unredeemed tickets."""
    other = live_server.pair("phone")
    other_headers = {"Authorization": f"Bearer {other.bearer}"}
    stream = await open_stream(live_server, headers=other_headers)
    assert (await stream.next()).kind == "sessions"
    async with httpx.AsyncClient(base_url=live_server.base_url) as client:
        ticket = (await client.post("/v1/stream-tickets", headers=other_headers)).json()["ticket"]
        resp = await client.delete(f"/v1/devices/{other.device_id}", headers=live_server.headers)
        assert resp.status_code == 204
        assert await stream.next(timeout=5) is None
        reuse = await client.get("/v1/events", params={"ticket": ticket})
        assert reuse.status_code == 401
        denied = await client.get("/v1/sessions", headers=other_headers)
        assert denied.status_code == 401


async def test_events_stream_resyncs_beyond_retention(live_server: LiveServer, open_stream):
    """A position older than the retained log (or ahead of it) gets resync + sessions."""
    seqs = live_server.emit_errors(5)
    live_server.call(
        lambda: live_server.services.store.write(lambda uow: uow.events.prune(timedelta(0)))
    )
    old = await open_stream(live_server, params={"after": seqs[0]})
    first, second = await old.next(), await old.next()
    assert first is not None and first.kind == "resync"
    assert "older" in first.data["reason"]
    assert second is not None and second.kind == "sessions" and second.id == seqs[-1]
    ahead = await open_stream(live_server, params={"after": seqs[-1] + 100})
    frame = await ahead.next()
    assert frame is not None and frame.kind == "resync" and "ahead" in frame.data["reason"]
    # The newest event survives pruning, so resuming at the head needs no resync.
    head = await open_stream(live_server, params={"after": seqs[-1]})
    (live_seq,) = live_server.emit_errors(1)
    (frame,) = await head.events(1)
    assert frame.id == live_seq


async def test_events_stream_sends_ping_comments(servers: ServerFactory, open_stream):
    """An idle stream carries `: ping` comments at the configured interval."""
    live = servers.start(ping_seconds=0.2)
    stream = await open_stream(live)
    assert (await stream.next()).kind == "sessions"
    with anyio.move_on_after(1.0):
        await stream.next(timeout=2)
    assert "ping" in stream.comments


async def test_an_open_stream_holds_none_of_the_request_machinery(
    live_server: LiveServer, open_stream
):
    """Once a stream is open, its request's task waits below c2's outermost middleware alone:
    no other middleware, router or FastAPI dependency frame stays alive for as long as the
    stream does (api/detach.py). They were a third of what an idle stream held."""
    stream = await open_stream(live_server)
    assert (await stream.next()).kind == "sessions"

    async def streams_awaits() -> list[list[tuple[str, str]]]:
        chains = []
        for task in asyncio.all_tasks():
            chain, coro = [], cast(Any, task.get_coro())
            while coro is not None and hasattr(coro, "cr_code"):  # down to a future or generator
                chain.append((coro.cr_code.co_filename, coro.cr_code.co_qualname))
                coro = coro.cr_await
            if any(name == "EventStreamResponse._respond" for _, name in chain):
                chains.append(chain)
        return chains

    (chain,) = await live_server.acall(streams_awaits)
    names = [name for _, name in chain]
    assert "Detacher.__call__" in names, names
    below = names[names.index("Detacher.__call__") + 1 :]
    assert below == ["EventStreamResponse._serve", "EventStreamResponse._respond"]
    assert not [name for file, name in chain if "fastapi/routing" in file or "c2/api/guard" in file]


async def test_events_stream_ends_on_server_shutdown(live_server: LiveServer, open_stream):
    """Stopping the server ends open streams promptly instead of hanging the shutdown."""
    stream = await open_stream(live_server)
    assert (await stream.next()).kind == "sessions"
    with anyio.fail_after(10):
        await asyncio.to_thread(live_server.stop)
    assert await stream.next(timeout=5) is None
    assert live_server.services.bus.subscriber_count == 0


async def test_events_stream_requires_credentials(live_server: LiveServer):
    """Without a bearer or ticket the stream is a 401 problem, not an open stream."""
    async with httpx.AsyncClient(base_url=live_server.base_url) as client:
        resp = await client.get("/v1/events")
        bad = await client.get("/v1/events", params={"after": -1}, headers=live_server.headers)
    assert resp.status_code == 401
    assert resp.json()["code"] == "unauthorized"
    assert bad.status_code == 422
