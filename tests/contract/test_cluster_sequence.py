"""One global event log with several writers on PostgreSQL (issue 18, part 1).

Two cluster stores (two writer threads, two connections, as two `c2 serve --cluster` would
have) append to one schema at once while a reader follows the log the way a stream does (read
after the last seq it saw). The sequence must have no duplicate, be strictly increasing in
commit order (each store publishes its own commits in increasing order), and the follower
must have seen every event: one committed later with a lower seq than one it already read
would be missing from what it saw.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from functools import partial

import pytest
from sqlalchemy import text

from c2.core.protocol.events import ErrorEvent
from c2.core.store.cluster import ClusterRepository, LeaseLostError
from c2.core.store.database import ReadUnit, Store, UnitOfWork
from c2.core.store.events import CommittedEvent, claim_sequences
from c2.core.store.ownership import OwnershipError
from tests.contract.pg import PG_URL, pg_schema_url

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="C2_TEST_DATABASE_URL is not set"),
]
WRITES_PER_STORE = 400
WAVE = 40  # jobs per writer and wave


@pytest.fixture
def url() -> Iterator[str]:
    with pg_schema_url("c2_cluster") as url:
        migrator = Store(url)
        migrator.migrate()
        migrator.close()
        yield url


def _after(last: int, r: ReadUnit) -> list[CommittedEvent]:
    return r.events.after(last, limit=10_000)


def _emit(writer: str, i: int, uow: UnitOfWork) -> None:
    # Two events per job, a few jobs per batch: batches of several sizes from both writers.
    for part in range(2):
        uow.emit(ErrorEvent(session=writer, message=f"{writer}-{i}-{part}", terminal=False))


async def _follow(store: Store, done: asyncio.Event) -> list[int]:
    seen: list[int] = []
    last = 0
    while True:
        finished = done.is_set()  # read once more after the writers finished
        batch = await store.read(partial(_after, last))
        if batch:
            seen.extend(ev.seq for ev in batch)
            last = batch[-1].seq
        if finished:
            return seen
        await asyncio.sleep(0)


async def test_two_writers_share_one_strictly_increasing_log(url: str) -> None:
    published: dict[str, list[CommittedEvent]] = {"a": [], "b": []}
    stores = {name: Store(url, exclusive=True, cluster=True, readers=2) for name in ("a", "b")}
    for name, store in stores.items():
        store.start(publish=published[name].extend)
    reader = Store(url, readers=1)
    reader.start()
    done = asyncio.Event()
    follower = asyncio.create_task(_follow(reader, done))
    try:
        # In waves: both writers commit a wave's jobs at once (they race for each batch's
        # seqs), and a wave starts once the last one committed, so each writer's seqs span
        # the other's. All at once, one writer could commit all its batches before the other
        # began (seen once in CI, on a loaded machine), and nothing would have raced.
        for wave in range(0, WRITES_PER_STORE, WAVE):
            await asyncio.gather(
                *(
                    stores[name].submit(partial(_emit, name, i))
                    for i in range(wave, wave + WAVE)
                    for name in ("a", "b")
                )
            )
        done.set()
        seen = await follower
        log = await reader.read(lambda r: r.events.after(0, limit=10_000))
    finally:
        done.set()
        if not follower.done():
            follower.cancel()
        for store in (*stores.values(), reader):
            await asyncio.to_thread(store.close)

    seqs = [ev.seq for ev in log]
    assert len(log) == 2 * 2 * WRITES_PER_STORE
    assert seqs == sorted(set(seqs))  # no duplicate, no reordering
    assert seen == seqs  # the follower skipped nothing
    for name, events in published.items():
        mine = [ev.seq for ev in events]
        assert mine == sorted(mine) and len(mine) == 2 * WRITES_PER_STORE, name
        # The writers interleaved: each one's seqs are not one contiguous block.
        assert mine[-1] - mine[0] + 1 > len(mine), name
    # Each writer's events are in the log in the order it committed and published them.
    for name, events in published.items():
        assert [ev.payload for ev in log if ev.session == name] == [ev.payload for ev in events]


async def test_plain_and_cluster_servers_exclude_each_other(url: str) -> None:
    plain = Store(url, exclusive=True)
    plain.start()
    try:
        member = Store(url, exclusive=True, cluster=True)
        with pytest.raises(OwnershipError, match="without --cluster owns"):
            member.start()
        member.close()
    finally:
        plain.close()

    first = Store(url, exclusive=True, cluster=True)
    second = Store(url, exclusive=True, cluster=True)
    first.start()
    second.start()  # members share the database
    try:
        plain = Store(url, exclusive=True)
        with pytest.raises(OwnershipError, match="cluster members use"):
            plain.start()
        plain.close()
    finally:
        first.close()
        second.close()


def test_a_cluster_needs_postgresql() -> None:
    with pytest.raises(ValueError, match="PostgreSQL"):
        Store("sqlite:///unused.db", cluster=True)


async def test_unknown_commit_outcome_is_judged_by_the_rows_themselves(url: str) -> None:
    """A batch whose COMMIT outcome is unknown must not count another writer's rows at the
    same seqs as its own (with one writer a count was enough)."""
    store = Store(url, exclusive=True, cluster=True)
    store.start()
    try:
        await store.write(partial(_emit, "a", 0))
        log = await store.read(lambda r: r.events.after(0))
        payloads = [ev.payload for ev in log]
        conn = store._writer_engine.connect()
        try:
            assert store._landed(conn, log[0].seq, payloads)
            assert not store._landed(conn, log[0].seq, ["someone else's"] * len(payloads))
        finally:
            conn.close()
    finally:
        store.close()


async def test_a_member_whose_lease_lapsed_commits_nothing_until_it_joins_again(url: str) -> None:
    """The lease fence (Store.fence): once the member's lease has expired, its writes fail
    with LeaseLostError and commit nothing, its membership writes still pass, and after it
    registered again its writes commit."""
    store = Store(url, cluster=True, instance_id="member-a")
    store.start()
    try:
        repo = ClusterRepository
        await store.write(
            lambda uow: repo(uow.conn).register("member-a", "http://a", 30), fenced=False
        )
        store.fence("member-a")
        await store.write(lambda uow: _emit("a", 1, uow))  # holds its lease: commits
        # Its lease runs out (as if it had been stopped that long).
        await store.write(
            lambda uow: uow.conn.execute(
                text("UPDATE cluster_instances SET lease_expires_at = now() - interval '1 s'")
            ),
            fenced=False,
        )
        with pytest.raises(LeaseLostError):
            await store.write(lambda uow: _emit("a", 2, uow))
        assert not await store.write(
            lambda uow: repo(uow.conn).heartbeat("member-a", 30), fenced=False
        )
        await store.write(
            lambda uow: repo(uow.conn).register("member-a", "http://a", 30), fenced=False
        )
        await store.write(lambda uow: _emit("a", 3, uow))
        messages = [
            json.loads(row.payload)["message"]
            for row in await store.read(lambda r: r.events.after(0, limit=100))
        ]
        assert messages == ["a-1-0", "a-1-1", "a-3-0", "a-3-1"]
    finally:
        await asyncio.to_thread(store.close)


async def test_a_member_stalled_inside_a_transaction_does_not_stop_its_peers(url: str) -> None:
    """A member stopped mid-transaction (SIGSTOP, a swapped-out host) holds the sequence lock:
    with no limit no peer could commit an event, or take its sessions over, until it woke.
    The database ends a member's transaction idle for longer than its lease; the peer's
    write then commits, and the stalled member's own write commits on a new connection once
    it runs again."""
    stalled = Store(url, exclusive=True, cluster=True, readers=1, lease_seconds=0.5)
    peer = Store(url, exclusive=True, cluster=True, readers=1)
    stalled.start()
    peer.start()
    wake = threading.Event()

    def stall(uow: UnitOfWork) -> None:
        claim_sequences(uow.conn)  # the lock every event-writing batch takes until COMMIT
        wake.wait(timeout=30)  # the process is stopped, its transaction idle
        _emit("stalled", 0, uow)

    try:
        held = asyncio.ensure_future(stalled.write(stall))
        await asyncio.sleep(0.2)  # the stall holds the lock now
        await asyncio.wait_for(peer.write(partial(_emit, "peer", 0)), timeout=20)
        wake.set()
        await asyncio.wait_for(held, timeout=20)
        log = await peer.read(lambda r: r.events.after(0, limit=100))
        assert [json.loads(ev.payload)["message"] for ev in log] == [
            "peer-0-0",
            "peer-0-1",
            "stalled-0-0",
            "stalled-0-1",
        ]
    finally:
        wake.set()
        for store in (stalled, peer):
            await asyncio.to_thread(store.close)
