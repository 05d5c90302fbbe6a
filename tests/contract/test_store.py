"""Store contract: event log, sessions, devices and idempotency behave alike on every backend.

Always on SQLite; also on PostgreSQL when C2_TEST_DATABASE_URL is set (each test gets a
schema of its own, dropped afterwards).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import OperationalError

from c2.core.auth import create_device, digest
from c2.core.mcp_servers import parse_mcp_servers
from c2.core.protocol.events import AgentText, ErrorEvent, TurnStarted
from c2.core.protocol.state import (
    ConfigOption,
    ContextWindow,
    ForkedFrom,
    ModeChoice,
    ModelChoice,
    ModelsState,
    ModesState,
    RunningState,
    SessionActivity,
    TextPart,
)
from c2.core.protocol.values import (
    ExecutionPolicy,
    PermissionMode,
    SandboxPolicy,
    WorktreeBase,
    WorktreeBaseline,
)
from c2.core.scopes import ALL_SCOPES, Scope
from c2.core.session import SessionRecord, utcnow
from c2.core.session_list import SessionPage, decode_cursor, read_session_page
from c2.core.store import buffer
from c2.core.store.database import (
    HEAD_REVISION,
    MIGRATIONS,
    SQLITE_WRITER_CACHE_KIB,
    ReadUnit,
    Store,
    UnitOfWork,
)
from c2.core.store.devices import Device, DeviceRepository
from c2.core.store.events import CommittedEvent
from c2.core.store.faults import StepsLostError
from c2.core.store.sessions import ActivityConflictError
from c2.core.store.wal import SAFETY_NET_PAGES
from tests.contract.pg import STORES, database_url_for


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url_for(request.param, tmp_path, "c2_test") as url:
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[tuple[Store, list[CommittedEvent]]]:
    """A migrated, started store and the list its publish hook appends to."""
    published: list[CommittedEvent] = []
    store = Store(database_url)
    await asyncio.to_thread(store.migrate)
    store.start(publish=published.extend)
    try:
        yield store, published
    finally:
        await asyncio.to_thread(store.close)


def _error(message: str, session: str | None = None) -> ErrorEvent:
    return ErrorEvent(session=session, message=message, terminal=False)


def _note(message: str) -> Callable[[UnitOfWork], None]:
    """A write emitting one error event carrying `message`."""

    def write(uow: UnitOfWork) -> None:
        uow.emit(_error(message))

    return write


@contextlib.asynccontextmanager
async def hour_paced(database_url: str) -> AsyncIterator[tuple[Store, list[list[CommittedEvent]]]]:
    """A started store whose commit interval is an hour (anything held by it would time out),
    and the batches it publishes; closed (committing what is queued) on the way out."""
    batches: list[list[CommittedEvent]] = []
    db = Store(database_url, commit_interval=3600)
    await asyncio.to_thread(db.migrate)
    db.start(publish=batches.append)
    try:
        yield db, batches
    finally:
        await asyncio.wait_for(asyncio.to_thread(db.close), 10)


async def test_store_event_log_orders_concurrent_commits(store):
    """Concurrent writers get strictly increasing seqs, published in commit order."""
    db, published = store
    await asyncio.gather(
        *(db.write(lambda uow, i=i: uow.emit(_error(f"m{i}"))) for i in range(200))
    )
    seqs = [ev.seq for ev in published]
    assert len(seqs) == 200
    assert seqs == sorted(set(seqs))
    replay = await db.read(lambda r: r.events.after(0, limit=1000))
    assert [ev.seq for ev in replay] == seqs
    assert [ev.payload for ev in replay] == [ev.payload for ev in published]


async def test_store_paced_writes_share_a_transaction_and_an_awaited_write_ends_the_wait(
    database_url: str,
):
    """Paced writes (streamed agent output) start a transaction at most once per commit
    interval: those queued meanwhile join one transaction (one publication), in submission
    order; a write that is not paced is never held back, and takes the paced ones with it."""
    async with hour_paced(database_url) as (db, batches):  # only an unpaced write ends the wait
        await db.write(_note("first"))
        paced = [db.submit(_note(f"m{i}"), paced=True) for i in range(5)]
        await db.write(_note("op"))
        await asyncio.gather(*paced)
    assert [[json.loads(ev.payload)["message"] for ev in batch] for batch in batches] == [
        ["first"],
        [*(f"m{i}" for i in range(5)), "op"],
    ]


async def test_store_writer_resting_after_a_paced_commit_takes_an_awaited_write_and_closes(
    database_url: str,
):
    """After a paced commit the writer sleeps out the commit interval instead of blocking on
    its queue; a write that is not paced, and closing the store, still end that sleep at once
    (an interval of an hour here: anything held by it would time out)."""
    async with hour_paced(database_url) as (db, batches):
        await asyncio.wait_for(db.submit(_note("paced"), paced=True), 10)  # the first: at once
        await asyncio.wait_for(db.write(_note("op")), 10)
        held = db.submit(_note("held"), paced=True)  # waits for the interval, or for close
    await asyncio.wait_for(held, 10)  # close committed what was queued
    assert [[json.loads(ev.payload)["message"] for ev in batch] for batch in batches] == [
        ["paced"],
        ["op"],
        ["held"],
    ]


async def test_store_commit_paced_commits_the_paced_writes_queued_so_far_at_once(
    database_url: str,
):
    """The agents' pipe tick ends the writer's interval once it has read (commit_paced): the
    paced writes queued before it commit then, together, and the writer paces again after
    (an interval of an hour: anything left to it would time out)."""
    async with hour_paced(database_url) as (db, batches):
        await asyncio.wait_for(db.submit(_note("paced"), paced=True), 10)  # the first: at once
        ticked = [db.submit(_note(f"t{i}"), paced=True) for i in range(3)]
        db.commit_paced()
        await asyncio.wait_for(asyncio.gather(*ticked), 10)
        held = db.submit(_note("held"), paced=True)
        await asyncio.sleep(0.2)
        assert not held.done()  # paced again: the tick ended one wait, not the pacing
    await asyncio.wait_for(held, 10)
    assert [[json.loads(ev.payload)["message"] for ev in batch] for batch in batches] == [
        ["paced"],
        ["t0", "t1", "t2"],
        ["held"],
    ]


async def test_store_steps_commit_as_one_job_and_a_failing_step_loses_only_itself(store):
    """A job of several steps commits in one unit of work; when one step fails on its own,
    the steps are replayed one per transaction: the others commit, in order, and the job
    fails with StepsLostError counting the failed step."""
    db, published = store

    def boom(uow: UnitOfWork) -> None:
        uow.emit(_error("doomed"))
        raise RuntimeError("boom")

    await db.submit_steps([_note("a"), _note("b")])
    with pytest.raises(StepsLostError) as lost:
        await db.submit_steps([_note("c"), boom, _note("d")], paced=True)
    assert lost.value.failed == 1
    assert isinstance(lost.value.cause, RuntimeError)
    assert [json.loads(ev.payload)["message"] for ev in published] == ["a", "b", "c", "d"]
    stored = await db.read(lambda r: r.events.after(0, limit=10))
    assert [ev.seq for ev in stored] == [ev.seq for ev in published]


async def test_store_sqlite_writer_has_a_page_cache_of_its_own(store):
    """On SQLite the writer's connection keeps SQLITE_WRITER_CACHE_KIB of pages (its inserts'
    index pages outgrow the 2 MiB default); the readers keep the default."""
    db, _published = store
    if db.dialect != "sqlite":
        pytest.skip("a SQLite connection setting")

    def cache(conn: Any) -> int:
        return int(conn.exec_driver_sql("PRAGMA cache_size").scalar())

    assert await db.write(lambda uow: cache(uow.conn)) == -SQLITE_WRITER_CACHE_KIB
    assert await db.read(lambda r: cache(r.conn)) == -2000


async def test_store_sqlite_checkpoints_between_batches_not_in_a_commit(store):
    """On SQLite a COMMIT does not copy the WAL back into the database file: SQLite's own
    checkpoint is only a safety net at SAFETY_NET_PAGES, and the writer checkpoints after it
    has handed a batch on (core/store/wal.py). What it commits reaches the database file all
    the same, and the WAL starts over instead of growing."""
    db, _published = store
    if db.dialect != "sqlite":
        pytest.skip("SQLite's WAL")

    def threshold(uow: UnitOfWork) -> int:
        return int(uow.conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one())

    def ballast(uow: UnitOfWork) -> None:
        uow.conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS ballast (b BLOB)")
        uow.conn.exec_driver_sql("INSERT INTO ballast VALUES (randomblob(200000))")

    assert await db.write(threshold) == SAFETY_NET_PAGES
    file = Path(db.url.removeprefix("sqlite:///"))
    wal = file.with_name(file.name + "-wal")
    before = file.stat().st_size
    deadline = asyncio.get_running_loop().time() + 30
    # ~50 pages a write, far below the safety net: only the writer's own checkpoints copy them.
    while file.stat().st_size < before + 1_000_000:
        assert asyncio.get_running_loop().time() < deadline, "the WAL was never checkpointed"
        await db.write(ballast)
        await asyncio.sleep(0.05)
    for _ in range(40):  # ~8 MB more, ~1 MB a checkpoint interval: a WAL that never started
        await db.write(ballast)  # over would hold all of it
        await asyncio.sleep(0.05)
    assert wal.stat().st_size < 6_000_000


async def test_store_event_log_after_filters_and_pages(store):
    """`after` is exclusive, oldest first, bounded by `limit`, optionally one session's."""
    db, published = store

    def write(uow: UnitOfWork) -> None:
        for i in range(10):
            uow.emit(_error(f"e{i}", session="a" if i % 2 else "b"))

    await db.write(write)
    seqs = [ev.seq for ev in published]
    page = await db.read(lambda r: r.events.after(seqs[2], limit=3))
    assert [ev.seq for ev in page] == seqs[3:6]
    only_a = await db.read(lambda r: r.events.after(0, session="a"))
    assert [ev.seq for ev in only_a] == seqs[1::2]
    assert all(ev.session == "a" for ev in only_a)
    bounds = await db.read(lambda r: r.events.bounds())
    assert (bounds.first, bounds.last) == (seqs[0], seqs[-1])
    newest = await db.read(lambda r: r.events.newest(4))  # what a start seeds its ring with
    assert [ev.seq for ev in newest] == seqs[-4:]
    everything = await db.read(lambda r: r.events.newest(100))
    assert [ev.seq for ev in everything] == seqs


async def test_store_event_log_prune_keeps_the_head(store):
    """Pruning drops old events but keeps the newest, so the sequence never restarts."""
    db, published = store
    await db.write(lambda uow: [uow.emit(_error(f"e{i}")) for i in range(5)])
    seqs = [ev.seq for ev in published]
    removed = await db.write(lambda uow: uow.events.prune(timedelta(0)))
    assert removed == 4
    bounds = await db.read(lambda r: r.events.bounds())
    assert bounds.first == bounds.last == seqs[-1]
    await db.write(lambda uow: uow.emit(_error("next")))
    assert published[-1].seq > seqs[-1]


async def test_store_failed_job_commits_nothing_of_its_own(store):
    """A job that raises publishes nothing and leaves no rows; its neighbours commit. The
    jobs write both ways a batch writes (events queued for the bulk insert, session rows
    through SQLAlchemy), so the batch's transaction holds statements of both, and the
    failing job's own of each are undone."""
    db, published = store

    def write(name: str, fail: bool = False) -> Callable[[UnitOfWork], None]:
        def run(uow: UnitOfWork) -> None:
            uow.sessions.insert(SessionRecord(id=name, provider="custom:echo", cwd="/tmp"))
            uow.emit(_error(name))
            if fail:
                raise RuntimeError("boom")

        return run

    results = await asyncio.gather(
        db.write(write("before")),
        db.write(write("doomed", fail=True)),
        db.write(write("after")),
        return_exceptions=True,
    )
    assert isinstance(results[1], RuntimeError)
    stored = await db.read(lambda r: r.events.after(0))
    assert len(stored) == 2 and not any("doomed" in ev.payload for ev in stored)
    assert [ev.seq for ev in published] == [ev.seq for ev in stored]
    sessions = await db.read(lambda r: [r.sessions.get(n) for n in ("before", "doomed", "after")])
    assert [rec is not None for rec in sessions] == [True, False, True]
    await db.write(write("later"))  # the writer's connection is sound after the rollback
    assert json.loads(published[-1].payload)["message"] == "later"


# A statement that fails on its own and arrives as an OperationalError, as a database that
# cannot take writes does: on SQLite a table that is not there (SQLITE_ERROR), on PostgreSQL a
# word too long for a tsvector (SQLSTATE 54000, program limit exceeded).
OWN_FAILURE = {
    "sqlite": "SELECT * FROM no_such_table",
    "other": "SELECT CAST(repeat('y', 4096) AS tsvector)",
}


async def test_store_write_whose_own_sql_fails_is_not_retried(store):
    """A write whose own statement fails fails at once and alone: its neighbours commit, it
    is not retried (that would hold every write behind it for the retry window, then fail it
    as StoreWriteError), and the store is not reported unavailable."""
    db, published = store
    own = OWN_FAILURE[db.dialect]  # "other": PostgreSQL
    results = await asyncio.gather(
        db.write(lambda uow: uow.emit(_error("before"))),
        db.write(lambda uow: uow.conn.exec_driver_sql(own)),
        db.write(lambda uow: uow.emit(_error("after"))),
        return_exceptions=True,
    )
    assert isinstance(results[1], OperationalError) and not isinstance(results[0], Exception)
    assert [json.loads(ev.payload)["message"] for ev in published] == ["before", "after"]
    assert db.unavailable() is None


async def test_store_sessions_round_trip_and_revision_guard(store):
    """Sessions list newest first; a stale activity revision cannot overwrite a newer one."""
    db, _ = store
    older = SessionRecord(id="s-old", provider="custom:echo", cwd="/tmp")
    newer = SessionRecord(
        id="s-new",
        provider="codex",
        cwd="/tmp",
        created_at=older.created_at + timedelta(seconds=1),
    )
    await db.write(lambda uow: (uow.sessions.insert(older), uow.sessions.insert(newer)))
    listed = await db.read(lambda r: r.sessions.list_page(10))
    assert [s.id for s in listed] == ["s-new", "s-old"]
    state = RunningState(turn_id="t1", prompt_request_id="p-1")
    running = older.evolve(activity=SessionActivity(revision=1, state=state))
    await db.write(lambda uow: uow.sessions.update(running, ("activity",), expected_revision=0))
    with pytest.raises(ActivityConflictError):
        await db.write(lambda uow: uow.sessions.update(running, ("activity",), expected_revision=0))
    got = await db.read(lambda r: r.sessions.get("s-old"))
    assert got is not None and got.activity.revision == 1
    assert got.snapshot().wire()["activity"]["state"] == {
        "kind": "running",
        "turn_id": "t1",
        "prompt_request_id": "p-1",
    }
    interrupted = await db.write(lambda uow: uow.sessions.interrupt_in_flight())
    assert [(s.id, request_id, parked) for s, request_id, parked in interrupted] == [
        ("s-old", "p-1", [])
    ]
    assert interrupted[0][0].activity.state.kind == "failed"


async def test_store_session_pages_stitch_newest_first(store):
    """Pages of the session list (ties on created_at broken by id) stitch into the whole list
    exactly once; a session created between two pages sorts before them, one deleted drops
    out, and neither shifts a later page."""
    db, _ = store
    base = utcnow()
    records = [
        SessionRecord(
            id=f"s{i:02d}", provider="codex", cwd="/tmp", created_at=base + timedelta(i // 3)
        )
        for i in range(11)
    ]
    await db.write(partial(_insert_all, records))

    async def page(after: str | None) -> SessionPage:
        position = None if after is None else decode_cursor(after)

        def read(r: ReadUnit) -> SessionPage:
            return read_session_page(r, 4, position)

        got: SessionPage = await db.read(read)
        return got

    first = await page(None)
    assert [s.id for s in first.records] == ["s10", "s09", "s08", "s07"]
    late = SessionRecord(id="s99", provider="codex", cwd="/tmp", created_at=base + timedelta(9))
    gone = records[5].evolve(archived=True)
    await db.write(
        lambda uow: (uow.sessions.insert(late), uow.sessions.update(gone, ("archived",)))
    )
    second = await page(first.next_cursor)
    assert [s.id for s in second.records] == ["s06", "s04", "s03", "s02"]
    third = await page(second.next_cursor)
    assert [s.id for s in third.records] == ["s01", "s00"] and third.next_cursor is None
    everything = await db.read(lambda r: read_session_page(r, 200, None))
    assert [s.id for s in everything.records][:2] == ["s99", "s10"]
    assert everything.next_cursor is None and len(everything.records) == 11


async def test_store_sessions_keep_modes_and_mcp_servers_with_secrets(store):
    """Modes and MCP servers (env values and headers included) survive the store; the snapshot
    shows only each server's name and type."""
    db, _ = store
    servers = parse_mcp_servers(
        [
            {
                "name": "fs",
                "command": "/bin/cat",
                "args": ["-u"],
                "env": [{"name": "K", "value": "v"}],
            },
            {
                "type": "sse",
                "name": "web",
                "url": "http://127.0.0.1:1/",
                "headers": [{"name": "H", "value": "w"}],
            },
        ]
    )
    modes = ModesState(available=[ModeChoice(id="plan", name="Plan")], current="plan")
    rec = SessionRecord(
        id="s-mcp", provider="custom:echo", cwd="/tmp", mcp_servers=servers, modes=modes
    )
    await db.write(lambda uow: uow.sessions.insert(rec))
    got = await db.read(lambda r: r.sessions.get("s-mcp"))
    assert got is not None and got.mcp_servers == servers and got.modes == modes
    switched = got.evolve(modes=modes.model_copy(update={"current": "plan"}))
    await db.write(lambda uow: uow.sessions.update(switched, ("modes",)))
    wire = got.snapshot().wire()
    assert wire["mcp_servers"] == [{"name": "fs", "type": "stdio"}, {"name": "web", "type": "sse"}]
    assert wire["modes"] == {
        "available": [{"id": "plan", "name": "Plan", "description": None}],
        "current": "plan",
    }
    assert '"v"' not in json.dumps(wire) and '"w"' not in json.dumps(wire)


def _every_field_set() -> SessionRecord:
    """A record none of whose fields holds its default."""
    moment = utcnow() - timedelta(days=1)
    return SessionRecord(
        id="s-full",
        provider="codex",
        cwd="/tmp/work",
        project_path="/tmp/project",
        title="Full",
        title_origin="manual",
        model="large",
        worktree_path="/tmp/wt",
        worktree_baseline=WorktreeBaseline(
            kind=WorktreeBase.CURRENT, ref="main", sha="a" * 40, display="main"
        ),
        worktree_identity={"branch": "c2/s-full", "head": "b" * 40},
        worktree_discarded=True,
        policy=ExecutionPolicy(mode=PermissionMode.YOLO, sandbox=SandboxPolicy.READ_ONLY),
        activity=SessionActivity(revision=3, state=RunningState(turn_id="t3")),
        acp_session_id="acp-1",
        models=ModelsState(available=[ModelChoice(id="large", name="L")], current="large"),
        config_options=[ConfigOption(id="effort", name="Effort", current="high")],
        modes=ModesState(available=[ModeChoice(id="plan", name="Plan")], current="plan"),
        mcp_servers=parse_mcp_servers([{"name": "fs", "command": "/bin/cat"}]),
        context_window=ContextWindow(used_tokens=10, context_window=100),
        forked_from=ForkedFrom(session="s-parent", turn=2),
        prime=True,
        archived=True,
        owner="member-1",
        created_at=moment,
        updated_at=moment + timedelta(seconds=1),
    )


def _insert_all(records: list[SessionRecord], uow: UnitOfWork) -> None:
    for rec in records:
        uow.sessions.insert(rec)


async def test_store_sessions_keep_every_field_and_update_only_the_named(store):
    """Every SessionRecord field survives the store; an update of some fields writes those
    (and updated_at), leaving the stored value of every other field as it was."""
    db, _ = store
    full = _every_field_set()
    defaults = SessionRecord(id="s-full", provider="custom:echo", cwd="/")
    changed = [f.name for f in dataclasses.fields(SessionRecord) if f.name != "id"]
    assert all(getattr(full, name) != getattr(defaults, name) for name in changed)
    await db.write(lambda uow: uow.sessions.insert(full))
    assert await db.read(lambda r: r.sessions.get("s-full")) == full
    fresh = dataclasses.replace(defaults, created_at=full.created_at)
    fields = ("title", "policy", "activity", "config_options", "forked_from", "prime")
    await db.write(lambda uow: uow.sessions.update(fresh, fields))
    got = await db.read(lambda r: r.sessions.get("s-full"))
    assert got is not None
    for name in changed:
        want = fresh if name in (*fields, "title_origin", "updated_at") else full
        assert getattr(got, name) == getattr(want, name), name


async def test_store_event_and_state_commit_together(store):
    """A state change and its event commit in one transaction: both or neither."""
    db, _ = store
    rec = SessionRecord(id="s1", provider="custom:echo", cwd="/tmp")

    def create_then_fail(uow: UnitOfWork) -> None:
        uow.sessions.insert(rec)
        uow.emit(TurnStarted(session="s1"))
        raise RuntimeError("after the event")

    with pytest.raises(RuntimeError):
        await db.write(create_then_fail)
    assert await db.read(lambda r: r.sessions.get("s1")) is None
    assert await db.read(lambda r: r.events.last_seq()) == 0


async def test_store_devices_bearers_tokens_tickets(store):
    """Bearers resolve by digest; tokens redeem once before expiry; tickets once per device."""
    db, _ = store
    paired = await db.write(lambda uow: create_device(uow, "phone"))
    device = await db.read(lambda r: DeviceRepository(r.conn).by_bearer(digest(paired.bearer)))
    assert device is not None and device.id == paired.device_id and device.name == "phone"
    assert await db.read(lambda r: DeviceRepository(r.conn).by_bearer(digest("nope"))) is None

    now = utcnow()
    token = digest("token")
    expired = digest("expired")

    def add_tokens(uow: UnitOfWork) -> None:
        repo = DeviceRepository(uow.conn)
        repo.add_pairing_token(token, now, now + timedelta(minutes=15), frozenset({Scope.READ}))
        repo.add_pairing_token(
            expired, now - timedelta(hours=1), now - timedelta(minutes=1), ALL_SCOPES
        )

    await db.write(add_tokens)

    async def redeem(token_hash: str) -> frozenset[Scope] | None:
        scopes: frozenset[Scope] | None = await db.write(
            lambda uow: DeviceRepository(uow.conn).redeem_pairing_token(token_hash, utcnow())
        )
        return scopes

    assert await redeem(token) == frozenset({Scope.READ})
    assert await redeem(token) is None
    assert await redeem(expired) is None

    async def add_ticket(ticket_hash: str) -> None:
        expires = now + timedelta(minutes=5)
        await db.write(
            lambda uow: DeviceRepository(uow.conn).add_ticket(
                ticket_hash, paired.device_id, expires
            )
        )

    async def use(ticket_hash: str) -> Device | None:
        device: Device | None = await db.write(
            lambda uow: DeviceRepository(uow.conn).redeem_ticket(ticket_hash, utcnow())
        )
        return device

    ticket = digest("ticket")
    await add_ticket(ticket)
    first = await use(ticket)
    assert first is not None and first.id == paired.device_id
    assert await use(ticket) is None

    later = utcnow() + timedelta(minutes=1)
    await db.write(lambda uow: DeviceRepository(uow.conn).touch({paired.device_id: later}))
    await db.write(lambda uow: DeviceRepository(uow.conn).touch({paired.device_id: now}))
    (listed,) = await db.read(lambda r: DeviceRepository(r.conn).all())
    assert listed.last_seen is not None and abs((listed.last_seen - later).total_seconds()) < 0.01

    other = digest("other-ticket")
    await add_ticket(other)
    assert await db.write(lambda uow: DeviceRepository(uow.conn).delete(paired.device_id)) is True
    assert await db.write(lambda uow: DeviceRepository(uow.conn).delete(paired.device_id)) is False
    assert await use(other) is None
    assert await db.write(lambda uow: DeviceRepository(uow.conn).prune(utcnow())) >= 1


async def test_store_idempotency_records(store):
    """Records are per (device, request_id), replaced by put, pruned after 24 h."""
    db, _ = store
    await db.write(lambda uow: uow.idempotency.put("d1", "r1", "h1", 201, '{"a":1}'))
    await db.write(lambda uow: uow.idempotency.put("d1", "r1", "h2", 202, '{"a":2}'))
    rec = await db.read(lambda r: r.idempotency.get("d1", "r1"))
    assert rec is not None and (rec.op_hash, rec.status, rec.body_json) == ("h2", 202, '{"a":2}')
    assert await db.read(lambda r: r.idempotency.get("d2", "r1")) is None
    assert await db.write(lambda uow: uow.idempotency.prune()) == 0


def test_store_migrations_are_idempotent(database_url: str):
    """Migrating an up-to-date database is a no-op that leaves it at the head revision."""
    store = Store(database_url)
    try:
        store.migrate()
        store.migrate()
    finally:
        store.close()
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()
    assert version == ScriptDirectory(str(MIGRATIONS)).get_current_head() == HEAD_REVISION


def test_store_at_head_starts_without_alembic(database_url: str):
    """A database already at the head revision is not handed to Alembic: a server start on it
    imports none of Alembic (HEAD_REVISION must follow each new migration)."""
    store = Store(database_url)
    store.migrate()  # in this process: the database is now at head
    store.close()
    probe = (
        "import sys; from c2.core.store.database import Store; s = Store(sys.argv[1]); "
        "s.migrate(); s.close(); print('alembic' in sys.modules)"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, database_url], capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "False"


async def test_store_transcript_rows_and_events_batch_consistently(store):
    """Streamed rows keep per-session seqs matching their events across a failed job in the
    same group commit; the failed job's seq is never given to a later row."""
    db, published = store

    def chunk(session: str, text: str):
        def write(uow: UnitOfWork) -> None:
            seq = uow.parts.append(session, "agent", TextPart(text=text))
            uow.emit(AgentText(session=session, message_id="m", text=text, transcript_seq=seq))

        return write

    def boom(uow: UnitOfWork) -> None:
        uow.parts.append("a", "agent", TextPart(text="doomed"))
        raise RuntimeError("boom")

    futures = [db.submit(chunk(s, f"{s}{i}")) for i in range(300) for s in ("a", "b")]
    futures.insert(101, db.submit(boom))
    futures += [db.submit(chunk("a", "tail"))]
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert sum(isinstance(r, RuntimeError) for r in results) == 1
    # The doomed job was queued after the 600 chunks: its seq 300 of "a" stays a gap.
    expected = {"a": [*range(300), 301], "b": list(range(300))}
    for session, seqs in expected.items():
        rows = await db.read(lambda r, s=session: r.parts.range(s, 0, 400))
        assert [row.seq for row in rows] == seqs
        assert all("doomed" not in row.part.text for row in rows)
    events = [json.loads(ev.payload) for ev in published]
    by_session = {
        s: [(e["transcript_seq"], e["text"]) for e in events if e["session"] == s]
        for s in ("a", "b")
    }
    assert [seq for seq, _ in by_session["a"]] == expected["a"]
    assert by_session["a"][-1] == (301, "tail")
    stored = await db.read(lambda r: r.events.after(0, limit=1000))
    assert [ev.seq for ev in stored] == [ev.seq for ev in published]
    assert [ev.seq for ev in published] == sorted(ev.seq for ev in published)


# Text that a store's bulk insert must carry as it is: what quoting, array literals (NULL,
# braces, commas, quotes, backslashes) or an encoding could change on the way.
AWKWARD_TEXTS = [
    'say "hi"',
    "back\\slash \\\\ and \\u0000 spelled out",
    "NULL",
    "{a,b}",
    "comma, {brace} and 'single'",
    "line\nbreak\ttab",
    "é ñ 中文 😀 \U0001f9ea",
    "",
    " ",
    "x" * 5000,
]


@pytest.mark.parametrize("bulk", [True, False], ids=["bulk", "generic"])
async def test_store_batch_rows_land_as_written_whatever_their_text(
    store, bulk: bool, monkeypatch: pytest.MonkeyPatch
):
    """One group commit of transcript rows and events, texts that any quoting could alter and an
    event of no session among them: read back, each is exactly what was written. On PostgreSQL
    both through psycopg's arrays and through the generic executemany of other drivers."""
    db, published = store
    if not bulk:
        if db.dialect == "sqlite":
            pytest.skip("SQLite has one path")
        monkeypatch.setattr(buffer, "BULK_DRIVERS", frozenset())

    def write(uow: UnitOfWork) -> None:
        for i, body in enumerate(AWKWARD_TEXTS):
            session = f"s{i % 3}"
            seq = uow.parts.append(session, "agent", TextPart(text=body))
            uow.emit(AgentText(session=session, message_id="m", text=body, transcript_seq=seq))
        uow.emit(ErrorEvent(session=None, message=AWKWARD_TEXTS[0], terminal=False))

    await db.write(write)
    rows = {s: await db.read(lambda r, s=s: r.parts.range(s, 0, 100)) for s in ("s0", "s1", "s2")}
    assert [row.part.text for i in range(3) for row in rows[f"s{i}"]] == [
        body for i in range(3) for body in AWKWARD_TEXTS[i::3]
    ]
    stored = await db.read(lambda r: r.events.after(0, limit=100))
    assert [(ev.seq, ev.session, ev.payload) for ev in stored] == [
        (ev.seq, ev.session, ev.payload) for ev in published
    ]
    decoded = [json.loads(ev.payload) for ev in stored]
    assert [e["text"] for e in decoded[:-1]] == AWKWARD_TEXTS
    assert stored[-1].session is None and decoded[-1]["message"] == AWKWARD_TEXTS[0]


def test_store_device_scopes_migration_keeps_full_scopes(database_url: str):
    """Devices and unredeemed pairing tokens from before 0005_device_scopes keep all four
    scopes."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(database_url)
    now = utcnow()
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0003_agent_processes")
            conn.execute(
                text(
                    "INSERT INTO devices (id, name, bearer_hash, created_at)"
                    " VALUES ('old', 'laptop', :h, :now)"
                ),
                {"h": digest("bearer"), "now": now},
            )
            conn.execute(
                text(
                    "INSERT INTO pairing_tokens (token_hash, created_at, expires_at)"
                    " VALUES (:h, :now, :later)"
                ),
                {"h": digest("token"), "now": now, "later": now + timedelta(minutes=15)},
            )
    finally:
        engine.dispose()
    store = Store(database_url)
    try:
        store.migrate()
        device = store.write_sync(lambda uow: DeviceRepository(uow.conn).get("old"))
        token = store.write_sync(
            lambda uow: DeviceRepository(uow.conn).redeem_pairing_token(digest("token"), utcnow())
        )
    finally:
        store.close()
    assert device is not None and device.scopes == ALL_SCOPES
    assert token == ALL_SCOPES


def test_store_lean_chunk_rows_migration_keeps_the_transcript(database_url: str):
    """0015 rebuilds `parts` on SQLite (rows in the key's b-tree) and drops the events' stamp
    index: every row and its role survive, prompts stay indexed, and downgrading restores it."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(database_url)
    rows = [("s1", 0, "user", '{"kind":"prompt","text":"hi"}')] + [
        ("s1", seq, "agent", f'{{"kind":"text","text":"c{seq}"}}') for seq in range(1, 50)
    ]
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0014_user_parts_index")
            for row in rows:
                conn.execute(
                    text("INSERT INTO parts VALUES (:s, :q, :r, :p)"),
                    dict(zip("sqrp", row, strict=True)),
                )
            command.upgrade(cfg, "0015_lean_chunk_rows")
            kept = conn.execute(
                text("SELECT session_id, seq, role, part_json FROM parts ORDER BY seq")
            ).all()
            assert [tuple(r) for r in kept] == rows
            indexes = {i["name"] for i in inspect(conn).get_indexes("events")}
            assert "ix_events_created_at" not in indexes
            assert "ix_parts_user" in {i["name"] for i in inspect(conn).get_indexes("parts")}
            if conn.dialect.name == "sqlite":
                ddl = conn.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = 'parts'")
                ).scalar_one()
                assert ddl.rstrip().endswith("WITHOUT ROWID")
            command.downgrade(cfg, "0014_user_parts_index")
            again = conn.execute(text("SELECT count(*) FROM parts")).scalar_one()
            assert again == len(rows)
            assert "ix_events_created_at" in {
                i["name"] for i in inspect(conn).get_indexes("events")
            }
    finally:
        engine.dispose()


async def test_store_event_log_prune_drops_what_is_older_than_the_window(store):
    """Retention drops exactly the events stamped before its cutoff, found by seq (stamps rise
    with seqs), across gaps left by earlier prunes; the newest is kept even when older."""
    db, published = store
    await db.write(lambda uow: [uow.emit(_error(f"day {day}")) for day in range(30)])
    seqs = [ev.seq for ev in published]
    start = utcnow() - timedelta(days=30)

    def restamp(uow: UnitOfWork) -> None:
        for day, seq in enumerate(seqs):
            uow.conn.execute(
                text("UPDATE events SET created_at = :t WHERE seq = :q"),
                {"t": start + timedelta(days=day), "q": seq},
            )

    await db.write(restamp)
    now = start + timedelta(days=30)

    async def prune(days: float) -> int:
        removed: int = await db.write(lambda uow: uow.events.prune(timedelta(days=days), now=now))
        return removed

    async def held() -> list[int]:
        return [ev.seq for ev in await db.read(lambda r: r.events.after(0, limit=100))]

    assert await prune(20) == 10  # days 0..9; day 10 is stamped at the cutoff: kept
    assert await held() == seqs[10:]
    assert await prune(20) == 0
    assert await prune(5.5) == 15  # days 10..24, the search starting below a gap
    assert await held() == seqs[25:]
    assert await prune(0) == 4  # all but the newest
    assert await held() == seqs[-1:]
