"""Welcome snapshots shared by the streams that ask at once (core/event_feed.py): new streams
opened together cost one read of the session list, on a real SQLite store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from c2.core.errors import StoreUnavailableError
from c2.core.event_feed import EventFeed
from c2.core.event_ring import EventRing
from c2.core.session import SessionRecord
from c2.core.store.database import Store, UnitOfWork


def _add_session(store: Store, sid: str) -> None:
    def insert(uow: UnitOfWork) -> None:
        uow.sessions.insert(SessionRecord(id=sid, provider="codex", cwd="/tmp", title=sid))

    store.write_sync(insert)


def _feed(store: Store) -> EventFeed:
    return EventFeed(store, EventRing())


async def test_streams_asking_at_once_share_one_read_and_later_ones_read_again(store: Store):
    for n in range(3):
        _add_session(store, f"s{n}")
    feed = _feed(store)

    welcomes = await asyncio.gather(*(feed.welcome() for _ in range(20)))

    assert feed.welcome_reads == 1
    assert all(welcome is welcomes[0] for welcome in welcomes)
    page, _through = welcomes[0]
    assert {r.id for r in page.records} == {"s0", "s1", "s2"}

    _add_session(store, "s3")
    page, _through = await feed.welcome()
    assert feed.welcome_reads == 2  # nothing in flight: a fresh read, which sees the new session
    assert "s3" in {r.id for r in page.records}


async def test_one_session_and_the_list_are_separate_snapshots(store: Store):
    _add_session(store, "one")
    _add_session(store, "two")
    feed = _feed(store)

    (listed, _), (single, _) = await asyncio.gather(feed.welcome(), feed.welcome("one"))

    assert feed.welcome_reads == 2
    assert [r.id for r in single.records] == ["one"]
    assert {r.id for r in listed.records} == {"one", "two"}


async def test_a_stream_that_goes_away_does_not_cancel_the_read_others_wait_for(store: Store):
    _add_session(store, "kept")
    feed = _feed(store)
    leaving = asyncio.create_task(feed.welcome())
    staying = asyncio.create_task(feed.welcome())
    await asyncio.sleep(0)  # both are waiting on the one read

    leaving.cancel()
    page, _through = await staying

    assert [r.id for r in page.records] == ["kept"]
    assert leaving.cancelled() and feed.welcome_reads == 1


async def test_a_failed_read_fails_every_stream_that_shared_it_and_the_next_reads_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    _add_session(store, "back")
    feed = _feed(store)
    real_read = store.read
    failures = iter([OSError("disk I/O error")])

    async def read_failing_once(fn: Any) -> Any:
        for exc in failures:
            await asyncio.sleep(0)
            raise exc
        return await real_read(fn)

    monkeypatch.setattr(store, "read", read_failing_once)

    results = await asyncio.gather(feed.welcome(), feed.welcome(), return_exceptions=True)

    assert [type(r) for r in results] == [StoreUnavailableError, StoreUnavailableError]
    page, _through = await feed.welcome()
    assert [r.id for r in page.records] == ["back"] and feed.welcome_reads == 2
