"""The webhook outbox on SQLite and PostgreSQL: deliveries are inserted in the very
transaction of their event (group commit or not), only for enabled subscribed webhooks, roll
back with it, and delivered ones are pruned (issue 15, part 3)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from c2.core.notify.webhooks import WebhookDispatcher
from c2.core.protocol.events import ErrorEvent, TurnEnded
from c2.core.session import utcnow
from c2.core.store.database import Store, UnitOfWork
from c2.core.store.webhooks import DueDelivery, WebhookRepository
from tests.contract.pg import STORES, database_url_for
from tests.notify.receivers import Receiver


def _emit_error(message: str, uow: UnitOfWork) -> None:
    uow.emit(ErrorEvent(session=None, message=message, terminal=False))


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url_for(request.param, tmp_path, "c2_outbox") as url:
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    store = Store(database_url)
    await asyncio.to_thread(store.migrate)
    store.start()
    try:
        yield store
    finally:
        await asyncio.to_thread(store.close)


def _hook(store: Store, events: list[str], **extra: object) -> str:
    def create(uow: UnitOfWork) -> str:
        repo = WebhookRepository(uow.conn)
        hook = repo.create(
            url="http://127.0.0.1:9/h",
            secret="s",
            events=events,
            include_content=False,
            created_by=None,
        )
        if extra:
            repo.update(hook.id, dict(extra))
        return hook.id

    return store.write_sync(create)


async def _pending(store: Store) -> list[tuple[str, int, str]]:
    def read(r: object) -> list[tuple[str, int, str]]:
        due = WebhookRepository(r.conn).pending(100)  # type: ignore[attr-defined]
        return [(d.webhook_id, json.loads(d.body)["event_seq"], d.body) for d in due]

    return await store.read(read)


async def test_deliveries_commit_with_their_events_in_one_batch(store: Store):
    errors = _hook(store, ["error"])
    ended = _hook(store, ["turn_ended", "error"])
    _hook(store, ["error"], enabled=False)

    def emit(ev: ErrorEvent | TurnEnded):
        return lambda uow: uow.emit(ev)

    # Submitted together: one group-commit batch of several jobs.
    futures = [
        store.submit(emit(ErrorEvent(session=None, message="a", terminal=False))),
        store.submit(emit(TurnEnded(session="s1", stop_reason="end_turn"))),
        store.submit(emit(ErrorEvent(session="s1", message="b", terminal=True))),
    ]
    await asyncio.gather(*futures)
    pending = await _pending(store)
    by_hook: dict[str, list[int]] = {}
    for hook, seq, _body in pending:
        by_hook.setdefault(hook, []).append(seq)
    assert len(by_hook[errors]) == 2 and len(by_hook[ended]) == 3
    assert len(by_hook) == 2  # the disabled webhook got nothing
    seqs = await store.read(lambda r: [e.seq for e in r.events.after(0)])
    assert set(by_hook[ended]) == set(seqs)


async def test_a_rolled_back_write_leaves_no_delivery(store: Store):
    _hook(store, ["error"])

    def failing(uow: UnitOfWork) -> None:
        uow.emit(ErrorEvent(session=None, message="lost", terminal=False))
        raise RuntimeError("the write fails after its event")

    with pytest.raises(RuntimeError):
        await store.write(failing)
    assert await _pending(store) == []
    assert await store.read(lambda r: r.events.after(0)) == []
    # Outside a batch (write_sync, no group commit) the outbox rides along the same way.
    store.write_sync(lambda uow: uow.emit(ErrorEvent(session=None, message="x", terminal=False)))
    assert len(await _pending(store)) == 1


async def test_delivered_deliveries_are_pruned_and_pending_ones_kept(store: Store):
    hook = _hook(store, ["error"])
    for message in ("one", "two"):
        await store.write(partial(_emit_error, message))
    first, second = await store.read(lambda r: WebhookRepository(r.conn).pending(10))
    await store.write(lambda uow: WebhookRepository(uow.conn).delivered(first.id, hook, 200))
    later = utcnow() + timedelta(seconds=1)
    pruned = await store.write(lambda uow: WebhookRepository(uow.conn).prune_delivered(later))
    assert pruned == 1
    left = await store.read(lambda r: WebhookRepository(r.conn).deliveries(hook, 10))
    assert [d.id for d in left] == [second.id] and left[0].state == "pending"


class SlowReceiver(Receiver):
    """Answers each POST after a pause, so attempts overlap."""

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> int:
        time.sleep(0.1)
        return super().answer(path, headers, body)


class Tagged(WebhookDispatcher):
    """A dispatcher noting which deliveries it posted."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, concurrency=4)
        self.sent: list[str] = []

    async def _post(self, client: httpx.AsyncClient, delivery: DueDelivery) -> int | None:
        self.sent.append(delivery.id)
        return await super()._post(client, delivery)


async def test_two_dispatchers_never_send_one_delivery_twice(database_url: str):
    """Two dispatchers on one database (cluster members around a leader handover) share the
    outbox: each delivery is claimed by one of them (core/store/webhooks.py `claim`), so
    the receiver gets every delivery id exactly once while both run, and both send some."""
    # Two senders of their own (as members are; a plain server takes back every claim).
    stores = [Store(database_url, instance_id=name) for name in ("a", "b")]
    await asyncio.to_thread(stores[0].migrate)
    for store in stores:
        store.start()
    tasks: list[asyncio.Task[None]] = []
    with SlowReceiver() as receiver:
        try:
            url = receiver.url
            hook = (
                stores[0]
                .write_sync(
                    lambda uow: WebhookRepository(uow.conn).create(
                        url=url,
                        secret="s",
                        events=["error"],
                        include_content=False,
                        created_by=None,
                    )
                )
                .id
            )
            count = 24
            await asyncio.gather(
                *(stores[0].write(partial(_emit_error, str(n))) for n in range(count))
            )
            dispatchers = [Tagged(store) for store in stores]
            tasks = [asyncio.create_task(d.run()) for d in dispatchers]
            await receiver.wait_for(lambda got: len(got) >= count, timeout=60)
            await asyncio.sleep(0.5)  # a duplicate would be on its way by now
            ids = [r.headers["C2-Webhook-Id"] for r in receiver.snapshot()]
            assert len(ids) == len(set(ids)) == count
            first, second = (set(d.sent) for d in dispatchers)
            assert first and second and not first & second  # both sent, never the same one
            delivered = await stores[1].read(
                lambda r: {d.state for d in WebhookRepository(r.conn).deliveries(hook, 100)}
            )
            assert delivered == {"delivered"}
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for store in stores:
                await asyncio.to_thread(store.close)


async def test_a_restarted_sender_takes_back_its_earlier_claims(database_url: str):
    """A claim left by a killed process of the same instance is released when the instance's
    dispatcher starts again (else the delivery waits out the lease); another instance's is not."""
    store = Store(database_url, instance_id="a")
    await asyncio.to_thread(store.migrate)
    store.start()
    try:
        _hook(store, ["error"])
        for message in ("mine", "theirs"):
            await store.write(partial(_emit_error, message))
        mine, theirs = await store.read(lambda r: WebhookRepository(r.conn).pending(10))

        def claim(uow: UnitOfWork) -> None:
            repo = WebhookRepository(uow.conn)
            assert repo.claim([mine.id], "a old-process", 60) == {mine.id}
            assert repo.claim([theirs.id], "b live-process", 60) == {theirs.id}
            assert repo.claim([mine.id, theirs.id], "c", 60) == set()  # held

        await store.write(claim)
        released = await store.write(lambda uow: WebhookRepository(uow.conn).release_claims("a"))
        assert released == 1
        due, now = await store.read(
            lambda r: (WebhookRepository(r.conn).pending(10), WebhookRepository(r.conn).now())
        )
        by_id = {d.id: d.next_attempt_at for d in due}
        assert by_id[mine.id] <= now < by_id[theirs.id]
    finally:
        await asyncio.to_thread(store.close)


class Passes(WebhookDispatcher):
    """A dispatcher counting its passes over the outbox (each a read of the due deliveries)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.passes = 0

    async def _start_due(self) -> float:
        try:
            return await super()._start_due()
        finally:
            self.passes += 1

    async def passed(self, count: int) -> None:
        async with asyncio.timeout(10):
            while self.passes < count:  # noqa: ASYNC110 (a pass is no event of its own)
                await asyncio.sleep(0.01)


async def test_the_client_is_opened_for_the_first_delivery_and_closed_with_the_run(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    """Building an HTTP client costs ~55 ms of CPU and ~3 MB (its TLS context): a dispatcher
    with nothing to send builds none. The first due delivery opens one, later ones reuse
    it, and it is closed when the run ends (core/outbound.py)."""
    from c2.core import outbound
    from c2.core.notify import webhooks

    opened: list[httpx.AsyncClient] = []
    real = outbound.open_client

    async def recording(**settings: Any) -> httpx.AsyncClient:
        client = await real(**settings)
        opened.append(client)
        return client

    monkeypatch.setattr(webhooks, "open_client", recording)
    dispatcher = Passes(store)
    run = asyncio.create_task(dispatcher.run())
    try:
        await dispatcher.passed(1)
        await store.write(partial(_emit_error, "no webhook listens"))
        dispatcher.wake()
        await dispatcher.passed(2)
        assert opened == []
        with Receiver() as receiver:
            url = receiver.url
            store.write_sync(
                lambda uow: WebhookRepository(uow.conn).create(
                    url=url, secret="s", events=["error"], include_content=False, created_by=None
                )
            )
            for count in (1, 2):
                await store.write(partial(_emit_error, f"delivery {count}"))
                dispatcher.wake()
                await receiver.wait_for(lambda got, n=count: len(got) >= n)  # type: ignore[misc]
        assert len(opened) == 1 and not opened[0].is_closed
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    assert opened[0].is_closed


async def test_a_cancel_that_meets_a_wake_ends_the_run(store: Store):
    """A delivery that finishes wakes the dispatcher; a shutdown cancel arriving in that same
    loop pass must still end its run (Python 3.11's wait_for returned the wake instead, and the
    run went on waiting for good: a server that never finished shutting down)."""
    dispatcher = Passes(store)
    run = asyncio.create_task(dispatcher.run())
    await dispatcher.passed(1)  # now waiting for a wake
    dispatcher.wake()
    run.cancel()
    async with asyncio.timeout(10):
        await asyncio.gather(run, return_exceptions=True)
    assert run.cancelled()


class Unreadable(Passes):
    """A dispatcher whose reads of the outbox fail while `down` (the database is away)."""

    down = True

    async def _start_due(self) -> float:
        if self.down:
            self.passes += 1
            raise OSError("connection refused")
        return await super()._start_due()


async def test_a_database_away_is_said_once_and_retried_ever_less_often(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    """While the outbox cannot be read the dispatcher warns once and waits twice as long
    after each failed try (not once a second for as long as it lasts); once the database
    answers, it says so and goes on."""
    from c2.core.notify import webhooks

    monkeypatch.setattr(webhooks, "STORE_ERROR_PAUSE", 0.05)
    caplog.set_level(logging.INFO, logger=webhooks.__name__)
    dispatcher = Unreadable(store)
    task = asyncio.create_task(dispatcher.run())
    try:
        await asyncio.sleep(1.0)  # 0.05 + 0.1 + 0.2 + 0.4 = 0.75: four or five tries
        assert 3 <= dispatcher.passes <= 6, dispatcher.passes
        dispatcher.down = False
        dispatcher.wake()
        await dispatcher.passed(dispatcher.passes + 1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    said = [r.getMessage() for r in caplog.records if r.name == webhooks.__name__]
    assert [m for m in said if "could not read" in m] == [
        "could not read pending webhook deliveries: connection refused"
    ]
    assert any("read again after" in m for m in said)
