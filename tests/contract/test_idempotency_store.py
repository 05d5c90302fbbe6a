"""An op's idempotent reply commits with its effect or not at all, on SQLite and PostgreSQL,
for a plain server and a cluster member (core/store/idempotency.py `OpRecord`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from c2.core.idempotent import IdempotentOps
from c2.core.protocol.events import ErrorEvent
from c2.core.protocol.ops import CancelOp
from c2.core.store.database import Store, UnitOfWork
from c2.core.store.idempotency import (
    CURRENT_OP,
    PENDING,
    ClaimLostError,
    IdempotencyRecord,
    OpRecord,
    Reply,
)
from tests.contract.pg import PG_URL, STORES, database_url_for


def render(outcome: object) -> Reply:
    return Reply(200, json.dumps(outcome))


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url_for(request.param, tmp_path, "c2_idem") as url:
        yield url


async def _open(url: str, **options: object) -> Store:
    store = Store(url, **options)  # type: ignore[arg-type]
    await asyncio.to_thread(store.migrate)
    store.start()
    return store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    opened = await _open(database_url)
    try:
        yield opened
    finally:
        await asyncio.to_thread(opened.close)


def _effect(message: str, outcome: object, fail: bool = False):
    def write(uow: UnitOfWork) -> None:
        uow.emit(ErrorEvent(session=None, message=message, terminal=False))
        uow.answer(outcome)
        if fail:
            raise RuntimeError("the op's write fails after answering")

    return write


async def _as_op(record: OpRecord, work):
    """Run `work` as the task of the op `record` keeps (as IdempotentOps does)."""

    async def run() -> object:
        record.task = asyncio.current_task()
        CURRENT_OP.set(record)
        try:
            return await work()
        finally:
            record.open = False

    return await asyncio.create_task(run())


async def _state(store: Store, request_id: str) -> tuple[IdempotencyRecord | None, list[str]]:
    record = await store.read(lambda r: r.idempotency.get("dev", request_id))
    messages = [
        json.loads(row.payload)["message"]
        for row in await store.read(lambda r: r.events.after(0, limit=100))
    ]
    return record, messages


async def test_the_reply_commits_with_the_effect(store: Store) -> None:
    record = OpRecord("dev", "r-1", "hash", render)
    await _as_op(record, lambda: store.write(_effect("effect", {"ok": 1})))
    kept, messages = await _state(store, "r-1")
    assert record.kept == Reply(200, '{"ok": 1}')
    assert kept is not None and (kept.status, kept.body_json) == (200, '{"ok": 1}')
    assert messages == ["effect"]


async def test_a_failing_effect_keeps_no_reply(store: Store) -> None:
    record = OpRecord("dev", "r-2", "hash", render)
    with pytest.raises(RuntimeError):
        await _as_op(record, lambda: store.write(_effect("effect", {"ok": 1}, fail=True)))
    kept, messages = await _state(store, "r-2")
    assert (record.kept, kept, messages) == (None, None, [])


async def test_only_the_ops_own_task_answers(store: Store) -> None:
    """A task the op starts (a turn, an agent reader) inherits its context, not its record;
    nor does a write after the op returned."""
    record = OpRecord("dev", "r-3", "hash", render)

    async def op() -> object:
        side = asyncio.create_task(store.write(_effect("side", {"side": 1})))
        return await side

    await _as_op(record, op)
    await store.write(_effect("later", {"later": 1}))  # not the op's task, and it is over
    kept, messages = await _state(store, "r-3")
    assert (record.kept, kept) == (None, None)
    assert messages == ["side", "later"]


@pytest.mark.skipif(not PG_URL, reason="C2_TEST_DATABASE_URL is not set")
async def test_a_member_whose_claim_was_taken_over_commits_nothing(tmp_path: Path) -> None:
    """A stalled member whose claim another member took over: its op's write rolls back, so
    only the new claimant's run of the op takes effect."""
    with database_url_for("postgres", tmp_path, "c2_idem") as url:
        store = await _open(url, cluster=True, instance_id="member-a")
        try:
            await store.write(lambda uow: uow.idempotency.claim("dev", "r-4", "hash", "a 1"))
            await store.write(lambda uow: uow.idempotency.take_over("dev", "r-4", "a 1", "b 2"))
            record = OpRecord("dev", "r-4", "hash", render, claimant="a 1")
            with pytest.raises(ClaimLostError):
                await _as_op(record, lambda: store.write(_effect("stale", {"ok": 1})))
            kept, messages = await _state(store, "r-4")
            assert kept is not None and (kept.status, kept.claimant) == (PENDING, "b 2")
            assert messages == [] and record.kept is None
        finally:
            await asyncio.to_thread(store.close)


async def test_once_records_nothing_after_an_op_that_kept_its_reply(store: Store) -> None:
    """One transaction per op: the outcome is not written again after the op."""
    ops = IdempotentOps(store)
    writes: list[object] = []
    real_write = store.write

    async def counting(fn, **kw):
        writes.append(fn)
        return await real_write(fn, **kw)

    store.write = counting  # type: ignore[method-assign]

    async def perform() -> Reply:
        await store.write(_effect("effect", {"ok": 1}))
        return render({"ok": 1})

    op = CancelOp(op="cancel", session="s")
    reply, replayed = await ops.once(op, "dev", "r-5", perform, render)
    again, replayed_again = await ops.once(op, "dev", "r-5", perform, render)
    assert (reply, replayed, again, replayed_again) == (render({"ok": 1}), False, reply, True)
    assert len(writes) == 1


async def test_one_claim_per_key(store: Store) -> None:
    """A key is claimed once: a second claimant gets the first claim back (on PostgreSQL the
    driver reports no rowcount for the insert: the row it returns decides)."""

    def claim(claimant: str):
        return lambda uow: uow.idempotency.claim("dev", "r-6", "hash", claimant)

    assert await store.write(claim("a 1")) is None
    second = await store.write(claim("b 2"))
    assert second is not None and (second.status, second.claimant) == (PENDING, "a 1")
