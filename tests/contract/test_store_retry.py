"""The store's writer under database trouble: retry, give up, recover, close (issue 16).

The disruption is real: on SQLite another connection holds the write lock; on PostgreSQL
(when C2_TEST_DATABASE_URL is set) the writer's session is terminated.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from sqlalchemy import create_engine, text

from c2.core.protocol.events import AgentText
from c2.core.protocol.state import TextPart
from c2.core.store.database import Store, UnitOfWork, sqlite_url
from c2.core.store.events import CommittedEvent
from c2.core.store.faults import StoreWriteError
from tests.contract.pg import PG_URL, STORES, database_url_for


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url_for(request.param, tmp_path, "c2_retry") as url:
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[tuple[Store, list[CommittedEvent]]]:
    published: list[CommittedEvent] = []
    db = Store(database_url, exclusive=True, retry_seconds=30.0)
    await asyncio.to_thread(db.migrate)
    await asyncio.to_thread(db.start, published.extend)
    try:
        yield db, published
    finally:
        await asyncio.to_thread(db.close)


def chunk(text_: str):
    def write(uow: UnitOfWork) -> int:
        seq = uow.parts.append("s", "agent", TextPart(text=text_))
        uow.emit(AgentText(session="s", message_id="m", text=text_, transcript_seq=seq))
        return seq

    return write


def hold_sqlite_lock(db: Path, seconds: float, held: threading.Event) -> threading.Thread:
    """Another connection holding SQLite's write lock for `seconds` (a thread)."""

    def run() -> None:
        conn = sqlite3.connect(db, isolation_level=None, timeout=10)
        conn.execute("BEGIN EXCLUSIVE")
        held.set()
        threading.Event().wait(seconds)  # the fault lasts this long
        conn.execute("ROLLBACK")
        conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def terminate_writer() -> int:
    """End this process's writer sessions (the owner lock goes with them)."""
    assert PG_URL is not None
    admin = create_engine(PG_URL)
    try:
        with admin.begin() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND application_name LIKE :name"
                    ),
                    {"name": f"c2 pid {os.getpid()} %"},
                ).scalar()
                or 0
            )
    finally:
        admin.dispose()


async def test_store_writes_across_a_disruption_commit_once_in_order(store) -> None:
    """Writes streamed across a lost connection (PostgreSQL) or a held lock (SQLite) all
    commit, once each, with contiguous seqs, published in commit order."""
    db, published = store
    first = [db.submit(chunk(f"a{i}")) for i in range(20)]
    await asyncio.gather(*first)
    if db.dialect == "sqlite":
        held = threading.Event()
        holder = hold_sqlite_lock(Path(db.url.removeprefix("sqlite:///")), 2.0, held)
        await asyncio.to_thread(held.wait, 10)
    else:
        assert terminate_writer() >= 1
    rest = [db.submit(chunk(f"b{i}")) for i in range(40)]
    if db.dialect == "sqlite":
        with anyio.fail_after(15):
            while db.unavailable() is None:  # noqa: ASYNC110 - set by the writer thread
                await asyncio.sleep(0.05)
    seqs = await asyncio.gather(*rest)
    assert [*(await asyncio.gather(*first)), *seqs] == list(range(60))
    assert [json.loads(ev.payload)["transcript_seq"] for ev in published] == list(range(60))
    stored = await db.read(lambda r: r.events.after(0, limit=100))
    assert [ev.payload for ev in stored] == [ev.payload for ev in published]
    if db.dialect == "sqlite":
        holder.join(10)
    assert db.unavailable() is None


async def test_store_write_gives_up_after_its_window_then_recovers(tmp_path: Path) -> None:
    """A write the locked database cannot take fails after the retry window naming the cause;
    once the lock is gone the store commits again, without a restart."""
    db = Store(sqlite_url(tmp_path), retry_seconds=0.5)
    await asyncio.to_thread(db.migrate)
    await asyncio.to_thread(db.start)
    try:
        held = threading.Event()
        holder = hold_sqlite_lock(tmp_path / "c2.db", 2.5, held)
        await asyncio.to_thread(held.wait, 10)
        with pytest.raises(StoreWriteError, match="database is locked"):
            await db.write(chunk("lost"))
        assert db.unavailable() is not None
        await asyncio.to_thread(holder.join, 10)
        assert await db.write(chunk("kept")) == 0  # the lost write never ran: no seq taken
        assert db.unavailable() is None
    finally:
        await asyncio.to_thread(db.close)


async def test_store_close_fails_writes_waiting_for_the_database(tmp_path: Path) -> None:
    """Closing the store while the database is locked fails even patient writes promptly."""
    db = Store(sqlite_url(tmp_path))
    await asyncio.to_thread(db.migrate)
    await asyncio.to_thread(db.start)
    held = threading.Event()
    holder = hold_sqlite_lock(tmp_path / "c2.db", 6.0, held)
    await asyncio.to_thread(held.wait, 10)
    waiting = db.submit(chunk("end of turn"), patient=True)
    with anyio.fail_after(5):
        await asyncio.to_thread(db.close)
    with pytest.raises(StoreWriteError, match="closing"):
        await waiting
    await asyncio.to_thread(holder.join, 10)
