"""Bearer lookups of core/auth.py `DeviceAuth` against a real store: requests that miss the
cache at once (every client reconnecting after a restart) share one read per bearer, and one
of them going away leaves that read to the others."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from c2.core.auth import DeviceAuth, create_device
from c2.core.bus import EventBus
from c2.core.errors import UnauthorizedError
from c2.core.store.database import Store
from tests.contract.pg import STORES, database_url_for


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url_for(request.param, tmp_path, "c2_test") as url:
        yield url


class CountingStore(Store):
    """A store counting its reads; with `gate`, each read's answer waits for it (`held` set)."""

    reads = 0
    gate: asyncio.Event | None = None
    held: asyncio.Event | None = None

    async def read(self, fn: Callable[[Any], Any]) -> Any:
        self.reads += 1
        answer = await super().read(fn)
        if self.gate is not None and self.held is not None:
            self.held.set()
            await self.gate.wait()
        return answer


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[CountingStore]:
    store = CountingStore(database_url)
    await asyncio.to_thread(store.migrate)
    store.start(publish=lambda events: None)
    try:
        yield store
    finally:
        await asyncio.to_thread(store.close)


async def test_requests_that_miss_the_cache_at_once_share_one_read(store: CountingStore):
    paired = await store.write(lambda uow: create_device(uow, "phone"))
    auth = DeviceAuth(store, EventBus())  # a fresh process: nothing cached
    store.reads = 0
    devices = await asyncio.gather(*(auth.authenticate(paired.bearer) for _ in range(50)))
    assert {d.id for d in devices} == {paired.device_id}
    assert store.reads == 1
    await auth.authenticate(paired.bearer)  # cached now
    assert store.reads == 1


async def test_an_unknown_bearer_is_refused_to_every_waiter_after_one_read(store: CountingStore):
    auth = DeviceAuth(store, EventBus())
    results = await asyncio.gather(
        *(auth.authenticate("not-a-bearer") for _ in range(20)), return_exceptions=True
    )
    assert all(isinstance(r, UnauthorizedError) for r in results)
    assert store.reads == 1
    with pytest.raises(UnauthorizedError):  # a later request reads again: nothing is cached
        await auth.authenticate("not-a-bearer")
    assert store.reads == 2


async def test_a_waiter_going_away_leaves_the_read_to_the_others(store: CountingStore):
    paired = await store.write(lambda uow: create_device(uow, None))
    auth = DeviceAuth(store, EventBus())
    first = asyncio.create_task(auth.authenticate(paired.bearer))
    others = [asyncio.create_task(auth.authenticate(paired.bearer)) for _ in range(3)]
    await asyncio.sleep(0)  # all four wait on the one read
    first.cancel()
    devices = await asyncio.gather(*others)
    assert {d.id for d in devices} == {paired.device_id} and first.cancelled()
    assert store.reads == 1


async def test_a_revocation_makes_later_requests_read_anew(store: CountingStore):
    """A request after a revocation never takes the answer of a read made before it."""
    paired = await store.write(lambda uow: create_device(uow, None))
    auth = DeviceAuth(store, EventBus())
    store.gate, store.held = asyncio.Event(), asyncio.Event()
    early = asyncio.create_task(auth.authenticate(paired.bearer))
    await store.held.wait()  # its read found the device; the answer is held
    await auth.revoke(paired.device_id)
    later = asyncio.create_task(auth.authenticate(paired.bearer))
    await asyncio.sleep(0)
    store.gate.set()
    with pytest.raises(UnauthorizedError):
        await later
    assert (await early).id == paired.device_id  # it asked before the revocation
