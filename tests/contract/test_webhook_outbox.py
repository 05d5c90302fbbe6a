"""The webhook outbox on SQLite and PostgreSQL: deliveries are inserted in the very
transaction of their event (group commit or not), only for enabled subscribed webhooks, roll
back with it, and delivered ones are pruned (issue 15, part 3)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest

from c2.core.protocol.events import ErrorEvent, TurnEnded
from c2.core.session import utcnow
from c2.core.store.database import Store, UnitOfWork
from c2.core.store.webhooks import WebhookRepository
from tests.contract.pg import STORES, database_url_for


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
