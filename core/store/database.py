"""The store: engines, migrations, and the single-writer unit of work with group commit.

Every state change and the events it produced commit in one transaction on one writer thread,
so the global event sequence is committed (and published) in strictly increasing order on
SQLite and PostgreSQL alike. Reads run on a small pool of reader connections.

A cluster member (`cluster=True`, PostgreSQL) shares the database with other writers: its
writer numbers each batch's events under the sequence lock of core/store/events.py
(`claim_sequences`) instead of its own counter, so the sequence stays strictly increasing in
commit order across every instance. The single-writer path keeps its counter (no lock, no
max() per batch).

Over 300 lines: one concurrency design (the single writer thread, group commit, its retry
loop and the settling of every job), which is only checkable read as a whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.exc import DBAPIError

from c2.core.notify.payloads import WEBHOOK_EVENTS
from c2.core.protocol.chunks import ChunkRun
from c2.core.protocol.events import Event
from c2.core.store.agent_processes import AgentProcessRepository
from c2.core.store.buffer import WriteBuffer
from c2.core.store.cluster import require_lease
from c2.core.store.events import (
    CommittedEvent,
    EventLog,
    claim_sequences,
    notify_position,
)
from c2.core.store.faults import StepsLostError, StoreWriteError, describe, is_transient
from c2.core.store.idempotency import CURRENT_OP, IdempotencyRepository, OpRecord, Reply
from c2.core.store.ownership import claim_database, owner_label, reader_label
from c2.core.store.parts import PartRepository
from c2.core.store.search import SearchState, SearchWriter
from c2.core.store.sessions import SessionRepository
from c2.core.store.signal import Signal
from c2.core.store.wal import SAFETY_NET_PAGES, WalCheckpoints
from c2.core.store.webhooks import record_deliveries

log = logging.getLogger(__name__)
T = TypeVar("T")
MIGRATIONS = Path(__file__).parent / "migrations"
# The newest migration's revision (tests/contract/test_store.py holds it to Alembic's own
# head). A database already there is not handed to Alembic, so a start imports none of it.
HEAD_REVISION = "0015_lean_chunk_rows"
# The writer's SQLite page cache (KiB; the default is 2 MiB). Its inserts land in the right edge
# of `events` and `parts` and in one place per session of their indexes; once those outgrow 2
# MiB each batch read its pages back from the OS. Flat out (bench/fleet.py, the median of four
# runs each, twice) went from 69 / 71 to 75 / 74 % of the bare reader. Only the writer's:
# readers, one per pool thread, keep the default, so RSS grows by at most this much.
SQLITE_WRITER_CACHE_KIB = 32 * 1024
# Jobs drained into one transaction at most; bounds the latency one commit adds to a batch.
MAX_GROUP = 256
# How long a write keeps retrying a database that cannot take it before it fails.
WRITE_RETRY_SECONDS = 30.0
# Back-off between attempts while the database cannot take writes: first, then the cap.
RETRY_BACKOFF = (0.05, 1.0)
# SQLite: how long one attempt waits on another connection's lock before the writer backs off.
SQLITE_WRITER_BUSY_MS = 1000
# A batch not committed after this long means the store cannot commit (readiness says so).
STALL_SECONDS = 3.0
# Paced writes (streamed agent output) start a transaction at most this often (seconds): the
# jobs that arrive meanwhile join it. Each commit is a transaction, a publication to every live
# stream and so a wake-up of each of them; fewer, larger batches cut all three
# (bench/fleet.py). Other writes (an op awaiting its write) are never held back.
COMMIT_INTERVAL = 0.005  # docs/decisions.md, "Performance at load, fourth slice"


class _made_once(Generic[T]):  # noqa: N801 (used as a decorator, like cached_property)
    """A repository made on first use and kept on the instance: `functools.cached_property`
    without its lock (Python 3.11 takes an RLock on every first access, at ~3x the cost,
    and a unit of work is made per write job and used by one thread)."""

    def __init__(self, make: Callable[[Any], T]) -> None:
        self._make = make
        self._name = make.__name__
        self.__doc__ = make.__doc__

    @overload
    def __get__(self, uow: None, owner: Any = None) -> _made_once[T]: ...

    @overload
    def __get__(self, uow: object, owner: Any = None) -> T: ...

    def __get__(self, uow: object, owner: Any = None) -> T | _made_once[T]:
        if uow is None:
            return self  # looked up on the class (help(), inspect)
        # Not a data descriptor: once stored, the instance's own attribute is found first.
        made = uow.__dict__[self._name] = self._make(uow)
        return made


class UnitOfWork:
    """Repositories bound to one open transaction. Events appended here publish after commit.

    Inside a group-commit batch (`buffer` given) transcript and event rows are queued and
    inserted in bulk before COMMIT; `committed` is complete once the batch has flushed.
    `op` is the idempotency record of the op that submitted this write, if any (`answer`).
    """

    def __init__(
        self,
        conn: Connection,
        part_seqs: dict[str, int] | None = None,
        buffer: WriteBuffer | None = None,
        op: OpRecord | None = None,
    ) -> None:
        self.conn = conn
        self.committed: list[CommittedEvent] = []
        self.op = op
        self.answered: Reply | None = None
        self._part_seqs = part_seqs
        self._buffer = buffer
        self._queued: list[tuple[int, str | None, str]] = []

    # The repositories are made on first use: most jobs touch one or two of them, and a
    # unit of work is made per job (thousands a second under agent output).

    @_made_once
    def search(self) -> SearchWriter:
        """The search index writer (queues into the batch's buffer when there is one)."""
        return SearchWriter(self.conn, self._buffer.search if self._buffer is not None else None)

    @_made_once
    def sessions(self) -> SessionRepository:
        """Session rows."""
        return SessionRepository(self.conn, self.search)

    @_made_once
    def parts(self) -> PartRepository:
        """Transcript rows."""
        return PartRepository(self.conn, self._part_seqs, self._buffer, self.search)

    @_made_once
    def events(self) -> EventLog:
        """The durable event log."""
        return EventLog(self.conn)

    @_made_once
    def idempotency(self) -> IdempotencyRepository:
        """Ops' first outcomes, by request_id."""
        return IdempotencyRepository(self.conn)

    @_made_once
    def agent_processes(self) -> AgentProcessRepository:
        """The agent processes this store's server started."""
        return AgentProcessRepository(self.conn)

    def answer(self, outcome: object) -> None:
        """This write completes the op in flight: keep `outcome` (or the DomainError it
        answers) as the op's idempotent reply in this same transaction, so the effect and
        its record commit together (core/store/idempotency.py). Nothing when the write was
        not submitted by an op carrying a request_id."""
        if self.op is not None:
            self.answered = self.op.keep(self.conn, outcome)

    def emit(self, ev: Event) -> None:
        """Append `ev` to the event log in this transaction, with the webhook deliveries it
        needs (the outbox: committed, or not, together with the event)."""
        self._append(ev.session, ev.encode(), ev if ev.event in WEBHOOK_EVENTS else None)

    def append_run(self, run: ChunkRun) -> None:
        """Append a run of streamed chunks: their transcript rows, then their events, encoded
        without models (core/protocol/chunks.py). No webhook takes these events."""
        payloads = run.events(self.parts.append_run(run))
        if self._buffer is None:
            for payload in payloads:
                self._append(run.session, payload, None)
            return
        first = self._buffer.add_session_events(run.session, payloads)
        self._queued.extend(
            [(index, run.session, payload) for index, payload in enumerate(payloads, first)]
        )

    def _append(self, session: str | None, payload: str, notify: Event | None) -> None:
        if self._buffer is None:
            committed = self.events.append_encoded(session, payload)
            self.committed.append(committed)
            if notify is not None:
                record_deliveries(self.conn, [(committed.seq, notify)])
        else:
            index = self._buffer.add_event(session, payload, notify)
            self._queued.append((index, session, payload))

    def settle(self, seqs: list[int]) -> None:
        """Resolve queued events to their sequences after the batch flushed."""
        self.committed = [CommittedEvent(seqs[i], session, p) for i, session, p in self._queued]


class ReadUnit:
    """Repositories bound to one consistent read transaction."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.sessions = SessionRepository(conn)
        self.parts = PartRepository(conn)
        self.events = EventLog(conn)
        self.idempotency = IdempotencyRepository(conn)
        self.agent_processes = AgentProcessRepository(conn)

    def ping(self) -> int:
        """A trivial query: the database answers reads (readiness)."""
        return int(self.conn.execute(text("SELECT 1")).scalar_one())


class DivisibleWrite(ABC):
    """A write step recording several updates at once (a run of streamed chunks). Replayed
    after a failure of its own, it is replayed one update per transaction, so a row the
    database refuses loses only its own update. A base class, not a Protocol: every group of
    agent updates is checked against it, and a runtime protocol check costs several µs."""

    __slots__ = ()

    @abstractmethod
    def __call__(self, uow: UnitOfWork) -> Any:
        """Run the writes of every update."""

    @abstractmethod
    def divide(self) -> list[Callable[[UnitOfWork], Any]]:
        """The same writes, one per update."""


@dataclass(eq=False)
class _Job(Generic[T]):
    fn: Callable[[UnitOfWork], T]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    deadline: float  # monotonic; past it a write the database cannot take fails (inf: patient)
    result: Any = None
    error: BaseException | None = None
    committed: list[CommittedEvent] = field(default_factory=list)
    uow: UnitOfWork | None = None
    op: OpRecord | None = None  # the op in flight that submitted it (UnitOfWork.answer)
    fenced: bool = True  # commits only while the store's fence holds (see Store.fence)
    paced: bool = False  # may wait for the commit interval (see Store.submit)
    # A job of several writes (Store.submit_steps): `fn` runs them all in one unit of work;
    # replayed after a failure as one job per step. None: a single write.
    steps: list[Callable[[UnitOfWork], Any]] | None = None
    group: _StepGroup | None = None  # a step replayed alone: settles its job's future

    def split(self) -> list[_Job[Any]]:
        """This job as one job per step (each in its own transaction; a divisible step as one
        job per update); itself if single."""
        if self.steps is None:
            return [self]
        pieces = [
            piece
            for step in self.steps
            for piece in (step.divide() if isinstance(step, DivisibleWrite) else [step])
        ]
        group = _StepGroup(self.future, len(pieces))
        return [
            _Job(
                fn=step,
                loop=self.loop,
                future=self.future,
                deadline=self.deadline,
                op=self.op,
                fenced=self.fenced,
                group=group,
            )
            for step in pieces
        ]


@dataclass(eq=False)
class _StepGroup:
    """The steps of one job replayed apart: its future settles once every step did, failing
    with StepsLostError when any step failed."""

    future: asyncio.Future[Any]
    remaining: int
    failed: int = 0
    error: BaseException | None = None

    def settle(self, error: BaseException | None) -> None:
        self.remaining -= 1
        if error is not None:
            self.failed += 1
            self.error = self.error or error
        if self.remaining == 0 and not self.future.done():
            if self.error is not None:
                self.future.set_exception(StepsLostError(self.failed, self.error))
            else:
                self.future.set_result(None)


Publisher = Callable[[list[CommittedEvent]], None]

# Set in a connection's info while `driver_transaction` holds its transaction open.
_DRIVER_TRANSACTION = "c2_driver_transaction"


@contextlib.contextmanager
def driver_transaction(conn: Connection) -> Iterator[None]:
    """One SQLite write transaction, begun and ended on the driver connection.

    The writer begins and commits a batch ~100 times a second under agent output, each time
    on a thread woken from sleep: there SQLAlchemy's transaction (its objects, events and pool
    bookkeeping) cost ~130 µs of CPU against ~15 µs for BEGIN and COMMIT alone (docs/decisions.md,
    "fourteenth slice"). A batch of streamed chunks issues no statement through SQLAlchemy
    (their rows go to the driver cursor: buffer.py). One that does makes SQLAlchemy begin its
    own transaction, which joins this one (the engine's `begin` hook sees the mark) and
    ends with it."""
    driver = conn.connection.driver_connection
    assert driver is not None  # checked out, so connected
    driver.execute("BEGIN IMMEDIATE")
    conn.info[_DRIVER_TRANSACTION] = True
    try:
        yield
        if conn.in_transaction():
            conn.commit()  # SQLAlchemy's, begun by a statement of the batch: the same COMMIT
        else:
            driver.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(Exception):
            if conn.in_transaction():
                conn.rollback()
            elif driver.in_transaction:
                driver.execute("ROLLBACK")
        raise
    finally:
        conn.info.pop(_DRIVER_TRANSACTION, None)


def _make_engine(url: str, *, writer: bool, idle_in_transaction: float | None = None) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy own transactions (pysqlite's implicit BEGIN breaks SAVEPOINT), WAL
            # for concurrent readers, NORMAL sync is durable across process crashes in WAL mode.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            if writer:
                cur.execute(f"PRAGMA cache_size=-{SQLITE_WRITER_CACHE_KIB}")
                # The writer checkpoints between batches (core/store/wal.py); SQLite's own
                # checkpoint inside a COMMIT is only the safety net.
                cur.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")
            cur.close()

        begin = "BEGIN IMMEDIATE" if writer else "BEGIN"

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # The writer takes the write lock up front so a transaction never fails on upgrade.
            # Straight to the driver: SQLAlchemy's statement path (events, result object) cost
            # more than the BEGIN itself, once per batch on the writer thread.
            if conn.info.get(_DRIVER_TRANSACTION):
                return  # a statement of `driver_transaction`'s batch: it is begun already
            driver = conn.connection.driver_connection
            assert driver is not None  # checked out, so connected
            try:
                driver.execute(begin)
            except sqlite3.Error as exc:  # as SQLAlchemy would raise it, for callers of either
                raise DBAPIError.instance(begin, None, exc, sqlite3.Error) from exc

        return engine
    options: dict[str, Any] = {"pool_pre_ping": True}
    if writer:
        # Names this process in pg_stat_activity: a second c2 reads it to name the owner.
        options["connect_args"] = {"application_name": owner_label(), "connect_timeout": 5}
    else:
        # One consistent snapshot per read (transcript pages, welcome frames).
        options["isolation_level"] = "REPEATABLE READ"
        options["connect_args"] = {"application_name": reader_label(), "connect_timeout": 5}
    engine = create_engine(url, **options)
    if writer and idle_in_transaction is not None:
        limit = max(1, round(idle_in_transaction * 1000))

        @event.listens_for(engine, "connect")
        def _idle_limit(dbapi_conn: Any, _record: Any) -> None:
            # A stalled process (stopped, swapped out, partitioned) inside a transaction would
            # hold its member row and the sequence lock, so no peer could take over or commit:
            # the database ends such a transaction after this long (Store docstring). Set here,
            # not in connect_args: `options` there would replace the URL's own.
            with dbapi_conn.cursor() as cur:
                cur.execute(f"SET idle_in_transaction_session_timeout = {limit}")
            dbapi_conn.commit()

    return engine


class Store:
    """Owns the database engines, the writer thread and the reader pool.

    The writer survives database trouble: a write the database cannot take right now (lost
    connection, lock held elsewhere, full or read-only disk) is rolled back and retried on a
    new connection with back-off, until it commits or its deadline passes; only then does it
    fail, with StoreWriteError naming the cause. Meanwhile `unavailable()` says why the
    store cannot commit (readiness). With `exclusive`, every writer connection first takes the
    database's owner lock (PostgreSQL; see ownership.py), in shared mode for a `cluster`
    member. A cluster member's writer transactions may sit idle (its process stalled) for at
    most `lease_seconds`: past that its peers judge it dead, and the locks its transaction
    holds must not stop them taking over its sessions or committing their own events.
    """

    def __init__(
        self,
        url: str,
        *,
        readers: int = 4,
        exclusive: bool = False,
        cluster: bool = False,
        instance_id: str | None = None,
        retry_seconds: float = WRITE_RETRY_SECONDS,
        commit_interval: float = COMMIT_INTERVAL,
        lease_seconds: float | None = None,
    ) -> None:
        self.url = url
        self.dialect = "sqlite" if url.startswith("sqlite") else "other"
        if cluster and self.dialect == "sqlite":
            raise ValueError("a cluster needs PostgreSQL: SQLite has one writer")
        self.exclusive = exclusive
        # Other writers share the database: sequences are claimed per batch, under a lock.
        self.cluster = cluster
        # The cluster member this store writes for (core/cluster/): it owns the sessions it
        # creates and the agents it spawns. None when not clustered.
        self.instance_id = instance_id
        self.retry_seconds = retry_seconds
        self.commit_interval = max(0.0, commit_interval)
        self._last_commit = -math.inf  # monotonic start of the last batch (commit_interval)
        self._writer_engine = _make_engine(
            url, writer=True, idle_in_transaction=lease_seconds if cluster else None
        )
        self._reader_engine = _make_engine(url, writer=False)
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="c2-db-read")
        self._writer: threading.Thread | None = None
        # True while the writer thread runs its loop: read for every job, where
        # Thread.is_alive() (a lock round trip) cost more than the rest of the enqueue.
        self._writer_running = False
        self._writer_conn: Connection | None = None
        self._publish: Publisher | None = None
        self._closing = threading.Event()
        # Set by a job that must not wait for the commit interval (see _gather).
        self._urgent = Signal()
        # Next transcript seq per session, owned by the writer thread (saves a MAX() per row).
        self._part_seqs: dict[str, int] = {}
        # The writer's search index states (core/store/search.py), dropped when a batch fails.
        self._search_states: dict[str, SearchState] = {}
        self._next_event_seq: int | None = None  # the writer's global event counter
        # A cluster member whose lease every (fenced) write must hold (see `fence`).
        self._fence: str | None = None
        self._failing: str | None = None  # why the last attempt to commit failed
        self._attempt_since: float | None = None  # monotonic start of the batch in progress
        # SQLite: when the writer copies the WAL back, between batches (core/store/wal.py).
        self._wal = WalCheckpoints() if self.dialect == "sqlite" else None

    # -- lifecycle -----------------------------------------------------------------------------

    def migrate(self) -> None:
        """Apply Alembic migrations up to head (idempotent). On PostgreSQL one migration runs
        at a time: cluster members starting together on a new database each created the same
        types and tables, and all but one failed on a duplicate. UnknownSchemaError when the
        database is at a revision this c2 does not know."""
        with self._writer_engine.connect() as conn:
            if _revision(conn) == HEAD_REVISION:
                return
        # Alembic (about 10 MB and 0.15 s of imports) only when there is something to apply.
        from alembic import command
        from alembic.config import Config
        from alembic.util.exc import CommandError

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self._writer_engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # Held to the commit; the next member then finds the schema at head.
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            cfg.attributes["connection"] = conn
            try:
                command.upgrade(cfg, "head")
            except CommandError as exc:
                raise UnknownSchemaError(
                    f"the database's schema is at revision {_revision(conn)!r}, which this c2"
                    f" does not know (was it made by another version of c2?): {exc}"
                ) from None

    def start(self, publish: Publisher | None = None) -> None:
        """Open the writer's connection (taking the owner lock when exclusive: OwnershipError
        if another c2 holds it), then start the writer thread; `publish` is called on the
        event loop after each commit."""
        self._publish = publish
        self._writer_conn = self._connect()
        self._writer = threading.Thread(target=self._write_loop, name="c2-db-writer", daemon=True)
        self._writer_running = True
        self._writer.start()

    def close(self) -> None:
        """Commit what is queued, then stop. A database that cannot take writes any more is
        not waited for: queued writes fail at once."""
        self._closing.set()
        if self._writer is not None:
            self._jobs.put(None)
            self._urgent.set()
            self._writer.join(timeout=10)
            self._writer = None
        if self._writer_conn is not None:  # start() opened it but the thread never ran
            with contextlib.suppress(Exception):
                self._writer_conn.close()
            self._writer_conn = None
        self._readers.shutdown(wait=True)
        self._writer_engine.dispose()
        self._reader_engine.dispose()

    def fence(self, instance_id: str | None) -> None:
        """From now on, commit a write only while cluster member `instance_id` holds a live
        lease (None: no fence). A member that stalled past its lease (a stopped process, a
        partition) may have had its sessions taken over by a survivor; until it joins again,
        its writes fail with LeaseLostError instead of landing in their new state. Checked in
        each transaction, which also holds the member's row against a takeover until it
        commits (core/store/cluster.py `require_lease`). Membership's own writes (joining,
        heartbeats, leaving) are submitted unfenced."""
        self._fence = instance_id

    def unavailable(self) -> str | None:
        """Why the store cannot commit right now; None while it can (readiness)."""
        writer = self._writer
        if writer is None or not writer.is_alive():
            return "the store writer is not running"
        if self._failing is not None:
            return self._failing
        since = self._attempt_since
        if since is not None and time.monotonic() - since > STALL_SECONDS:
            return f"a write has been waiting {time.monotonic() - since:.0f} s for the database"
        return None

    # -- writes --------------------------------------------------------------------------------

    async def write(
        self,
        fn: Callable[[UnitOfWork], T],
        *,
        patient: bool = False,
        retry_seconds: float | None = None,
        fenced: bool = True,
    ) -> T:
        """Run `fn` in a write transaction; events it emitted are published before this returns."""
        return await self.submit(fn, patient=patient, retry_seconds=retry_seconds, fenced=fenced)

    def submit(
        self,
        fn: Callable[[UnitOfWork], T],
        *,
        patient: bool = False,
        retry_seconds: float | None = None,
        fenced: bool = True,
        paced: bool = False,
    ) -> asyncio.Future[T]:
        """Queue `fn` for the writer without waiting. Jobs commit and publish in submission
        order, so a producer may stream writes and await only the last one (group commit).
        A `paced` job (a stream of many small writes nobody awaits one by one) may wait until
        `commit_interval` after the previous transaction began, so the writes that arrive
        meanwhile share its transaction; a job that is not paced ends that wait.

        A write the database cannot take is retried for `retry_seconds` (the store's unless
        given), then fails with StoreWriteError; a `patient` write is retried until the
        store closes (a state that must land, such as the end of a turn)."""
        return self._enqueue(fn, None, patient, retry_seconds, fenced, paced)

    def submit_steps(
        self, steps: list[Callable[[UnitOfWork], Any]], *, paced: bool = False
    ) -> asyncio.Future[None]:
        """Queue `steps` as one job: run in order in one unit of work (one hand-off to the
        writer and one completion, for a burst of small writes). Should one of them fail on
        its own (not the database's trouble), each step (each update of a DivisibleWrite) is
        replayed in its own transaction like separate jobs, so only the failing one is lost;
        the future then fails with StepsLostError (how many, and the first cause)."""

        def run_all(uow: UnitOfWork) -> None:
            for step in steps:
                step(uow)

        several = len(steps) > 1 or isinstance(steps[0], DivisibleWrite)
        return self._enqueue(run_all, steps if several else None, False, None, True, paced)

    def _enqueue(
        self,
        fn: Callable[[UnitOfWork], T],
        steps: list[Callable[[UnitOfWork], Any]] | None,
        patient: bool,
        retry_seconds: float | None,
        fenced: bool,
        paced: bool,
    ) -> asyncio.Future[T]:
        if self._writer is None:
            raise RuntimeError("store writer is not started")
        if not self._writer_running:
            raise StoreWriteError("the store writer is not running")
        loop = asyncio.get_running_loop()
        wait = self.retry_seconds if retry_seconds is None else retry_seconds
        deadline = math.inf if patient else time.monotonic() + wait
        op = CURRENT_OP.get()
        if op is not None and not op.carried_by_current_task():
            op = None
        job: _Job[T] = _Job(
            fn=fn,
            loop=loop,
            future=loop.create_future(),
            deadline=deadline,
            op=op,
            fenced=fenced,
            paced=paced,
            steps=steps,
        )
        self._jobs.put(job)
        if not paced:
            self.commit_paced()  # it is never held, and takes the paced ones before it along
        return job.future

    def commit_paced(self) -> None:
        """Commit the paced writes queued so far now, not at the end of the interval: the
        agents' pipe tick calls this once it has read (core/agents/pipes.py), so a chunk it
        read waits for that tick only, not for the tick and then the writer's interval."""
        # Set only when not set already: Event.set() takes a lock and notifies every time, a
        # cost paid per job otherwise.
        if not self._urgent.is_set():
            self._urgent.set()

    async def ping_writer(self, timeout: float) -> None:
        """Run a statement on the writer's own connection (so through its owner lock), behind
        whatever is queued; raises if that does not succeed within `timeout`."""
        async with asyncio.timeout(timeout):
            await self.write(
                lambda uow: uow.conn.exec_driver_sql("SELECT 1"), retry_seconds=timeout
            )

    def write_sync(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Run `fn` in its own write transaction on the calling thread (start-up, CLI, tests)."""
        try:
            with self._writer_engine.begin() as conn:
                return fn(UnitOfWork(conn))
        finally:
            self._search_states.clear()  # it may have moved a session's search state

    def _connect(self) -> Connection:
        conn = self._writer_engine.connect()
        try:
            if self.dialect == "sqlite":
                # Wait briefly for another connection's lock, then let the retry loop back off
                # (it reports the wait and notices a closing store between attempts).
                # On the driver: through SQLAlchemy the statement would autobegin a transaction.
                cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
                cursor.execute(f"PRAGMA busy_timeout={SQLITE_WRITER_BUSY_MS}")
                cursor.close()
            if self.exclusive:
                claim_database(conn, shared=self.cluster)
        except BaseException:
            with contextlib.suppress(Exception):
                conn.invalidate()
            raise
        return conn

    def _write_loop(self) -> None:
        conn, self._writer_conn = self._writer_conn, None
        try:
            while True:
                try:
                    # While the database is failing, probe it between writes so readiness
                    # comes back with the database, not only with the next write.
                    first = self._jobs.get(timeout=RETRY_BACKOFF[1] if self._failing else None)
                except queue.Empty:
                    conn = self._probe(conn)
                    continue
                if first is None:
                    return
                batch, stop, urged = self._gather(first)
                self._last_commit = time.monotonic()
                conn = self._commit(conn, batch)
                if stop:
                    return
                if self._wal is not None and conn is not None:
                    # The batch is handed to the loop: its events do not wait for this.
                    self._wal.run_if_due(conn.connection.driver_connection)
                if batch[-1].paced and not (urged and self._jobs.empty()):
                    # A stream of paced writes is under way: sleep out the interval here, not
                    # blocked on the queue. Its next job then neither wakes this thread (a
                    # futex wake paid by the loop at every interval's first job) nor is waited
                    # for twice; a job that is not paced still ends the wait at once. But a
                    # batch that `commit_paced` asked for (agents read on the pipes' tick)
                    # took all of that tick's jobs, and the next come with the next tick:
                    # with nothing queued, the rest would only add a wake-up at its end.
                    self._rest()
        finally:
            self._writer_running = False
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    def _gather(self, first: _Job[Any]) -> tuple[list[_Job[Any]], bool, bool]:
        """`first` and the jobs queued behind it, up to MAX_GROUP; whether the store is
        closing; whether `_urgent` was set (`commit_paced`, or a job that is not paced). A
        paced `first` waits until `commit_interval` after the last batch began, unless a job
        that is not paced arrives meanwhile."""
        if first.paced:
            # Sleep through the interval rather than wake for each paced job: every wake of
            # this thread is a GIL hand-off with the event loop, and at one job per agent
            # chunk those hand-offs cost more than the commits (bench/fleet.py).
            self._rest()
        urged = self._urgent.is_set()
        self._urgent.clear()
        batch: list[_Job[Any]] = [first]
        while len(batch) < MAX_GROUP:
            try:
                nxt = self._jobs.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                return batch, True, urged
            batch.append(nxt)
        return batch, False, urged

    def _rest(self) -> None:
        """Wait until `commit_interval` after the last batch began, or until a job that is not
        paced (or closing) sets `_urgent`."""
        remaining = self._last_commit + self.commit_interval - time.monotonic()
        if remaining > 0:
            self._urgent.wait(remaining)

    def _commit(  # noqa: C901
        self, conn: Connection | None, batch: list[_Job[Any]]
    ) -> Connection | None:
        """Commit `batch` in order, one transaction (group commit); settle every job as
        committed or failed. Returns the writer's connection (None while it has none).

        One retry loop, kept whole (hence its complexity): its outcomes, a commit whose
        result is unknown, a transient failure retried, a write's own failure replayed job by
        job, are easier to check against each other in one place than across helpers."""
        pending = batch
        delay = RETRY_BACKOFF[0]
        # A COMMIT whose outcome is unknown: its first seq, event payloads and the counters
        # it left.
        unverified: tuple[int, list[str], dict[str, int]] | None = None
        self._attempt_since = time.monotonic()
        try:
            while pending:
                ran: list[UnitOfWork] = []  # this attempt's units, to undo their counters
                committing = False
                try:
                    if conn is None:
                        conn = self._connect()
                    if unverified is not None:
                        first, payloads, attempted = unverified
                        count = len(payloads)
                        if self._landed(conn, first, payloads):
                            # The connection died after COMMIT reached the database.
                            self._part_seqs.update(attempted)
                            self._next_event_seq = first + count
                            self._search_states.clear()
                            self._recovered()
                            self._settle_committed(pending, list(range(first, first + count)))
                            return conn
                        unverified = None
                    with self._transaction(conn):
                        fence = self._fence
                        if fence is not None and any(job.fenced for job in pending):
                            require_lease(conn, fence)  # LeaseLostError: fails the batch
                        buffer = WriteBuffer(search_cache=self._search_states)
                        for job in pending:
                            job.uow = UnitOfWork(conn, self._part_seqs, buffer, job.op)
                            ran.append(job.uow)
                            job.result = job.fn(job.uow)
                        if not self.cluster:
                            if self._next_event_seq is None:
                                self._next_event_seq = EventLog(conn).last_seq() + 1
                            first_seq = self._next_event_seq
                        elif buffer.events:
                            # Held until COMMIT: this batch's seqs are the next to commit.
                            first_seq = claim_sequences(conn)
                        else:
                            first_seq = 0  # nothing to number: no lock
                        seqs = buffer.flush(conn, first_seq)
                        if self.cluster and seqs:
                            notify_position(conn, self.instance_id or "", seqs[-1])
                        committing = True
                    if not self.cluster:
                        self._next_event_seq = first_seq + len(seqs)
                except Exception as exc:
                    # Nothing of the attempt is known committed: counters go back to what the
                    # database holds (the event counter is re-read on the next attempt).
                    attempted = self._undo(ran)
                    self._next_event_seq = None
                    self._search_states.clear()
                    if conn is not None and (conn.invalidated or conn.closed or is_transient(exc)):
                        with contextlib.suppress(Exception):
                            conn.invalidate()
                        conn = None
                    if not is_transient(exc):
                        if len(pending) > 1 or pending[0].steps is not None:
                            # A write's own failure: replay one job (one step of a job of
                            # several) per transaction so only the failing one reports it.
                            for job in pending:
                                for one in job.split():
                                    conn = self._commit(conn, [one])
                            return conn
                        self._fail(pending, exc)
                        return conn
                    if committing and seqs:
                        # Without events there is nothing to look for: retried as not landed.
                        unverified = (seqs[0], [p for _, p in buffer.events], attempted)
                    pending = self._wait_out(pending, exc, unverified is not None, delay)
                    delay = min(delay * 2, RETRY_BACKOFF[1])
                    continue
                self._recovered()
                self._settle_committed(pending, seqs)
                return conn
            return conn
        finally:
            self._attempt_since = None

    def _transaction(self, conn: Connection) -> contextlib.AbstractContextManager[Any]:
        """A batch's transaction: on the driver for SQLite (`driver_transaction`)."""
        return driver_transaction(conn) if self.dialect == "sqlite" else conn.begin()

    def _undo(self, ran: list[UnitOfWork]) -> dict[str, int]:
        """Put the transcript counters back to before `ran`; returns the values they had."""
        attempted: dict[str, int] = {}
        for uow in reversed(ran):
            for session, prior in uow.parts.prior.items():
                if session not in attempted:
                    attempted[session] = self._part_seqs[session]
                if prior is None:
                    del self._part_seqs[session]
                else:
                    self._part_seqs[session] = prior
        return attempted

    def _wait_out(
        self, pending: list[_Job[Any]], exc: Exception, unverified: bool, delay: float
    ) -> list[_Job[Any]]:
        """After a failure worth retrying: fail the jobs out of time (all of them once the
        store is closing), back off, and return the jobs still to retry."""
        cause = describe(exc)
        if self._failing is None:
            log.warning("database write failed, retrying: %s", cause)
        self._failing = f"the database cannot take writes ({cause})"
        now = time.monotonic()
        closing = self._closing.is_set()
        if unverified and not closing:
            expired: list[_Job[Any]] = []  # maybe committed: keep them until that is known
        else:
            expired = [job for job in pending if closing or job.deadline <= now]
        if expired:
            reason = "the store is closing" if closing else "gave up retrying"
            self._fail(expired, StoreWriteError(f"{self._failing}; {reason}"))
            pending = [job for job in pending if job not in expired]
        if pending:
            self._closing.wait(delay)
        return pending

    def _probe(self, conn: Connection | None) -> Connection | None:
        """Check the failing database takes writes again (an empty write transaction)."""
        try:
            if conn is None:
                conn = self._connect()
            with conn.begin():
                conn.exec_driver_sql("SELECT 1")
        except Exception as exc:
            self._failing = f"the database cannot take writes ({describe(exc)})"
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.invalidate()
            return None
        self._recovered()
        return conn

    def _recovered(self) -> None:
        if self._failing is not None:
            log.warning("database writes recovered")
            self._failing = None

    def _landed(self, conn: Connection, first: int, payloads: list[str]) -> bool:
        with conn.begin():
            found = EventLog(conn).payloads_between(first, first + len(payloads) - 1)
        # Another writer may have taken those seqs since (a cluster): only our own rows count.
        return found == payloads

    def _fail(self, jobs: list[_Job[Any]], exc: BaseException) -> None:
        for job in jobs:
            job.error, job.committed = exc, []
            # Never hand a lost row's seq to a later row: a client that saw the failure must
            # not see another part under the same number.
            if job.uow is not None:
                for session, seq in job.uow.parts.appended.items():
                    if seq >= self._part_seqs.get(session, 0):
                        self._part_seqs[session] = seq + 1
                job.uow = None
        self._dispatch(jobs)

    def _settle_committed(self, jobs: list[_Job[Any]], seqs: list[int]) -> None:
        # Every committed batch settles here, one whose COMMIT was found to have landed too.
        if self._wal is not None:
            self._wal.committed()
        for job in jobs:
            assert job.uow is not None
            job.uow.settle(seqs)
            if job.op is not None and job.uow.answered is not None:
                job.op.kept = job.uow.answered  # committed: the op need not record it again
            job.committed, job.uow = job.uow.committed, None
        self._dispatch(jobs)

    def _dispatch(self, jobs: list[_Job[Any]]) -> None:
        # One wake-up of the loop per batch; settling in order keeps publication in sequence.
        by_loop: dict[asyncio.AbstractEventLoop, list[_Job[Any]]] = {}
        for job in jobs:
            by_loop.setdefault(job.loop, []).append(job)
        for loop, loop_jobs in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop is already closed
                loop.call_soon_threadsafe(self._settle, loop_jobs)

    def _settle(self, jobs: list[_Job[Any]]) -> None:
        # Runs on the event loop, in commit order: publish the whole batch first (one fan-out
        # per batch, not per job) so a caller that awaits its write observes its own events
        # already delivered to the bus.
        committed = [ev for job in jobs for ev in job.committed]
        if committed and self._publish is not None:
            self._publish(committed)
        for job in jobs:
            if job.group is not None:
                job.group.settle(job.error)
                continue
            if job.future.done():
                continue
            if job.error is not None:
                job.future.set_exception(job.error)
            else:
                job.future.set_result(job.result)

    # -- reads ---------------------------------------------------------------------------------

    async def read(self, fn: Callable[[ReadUnit], T]) -> T:
        """Run `fn` inside one consistent read transaction on a reader thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self.read_sync, fn)

    def read_sync(self, fn: Callable[[ReadUnit], T]) -> T:
        """Run `fn` in a read transaction on the calling thread (start-up and tools)."""
        with self._reader_engine.connect() as conn, conn.begin():
            return fn(ReadUnit(conn))


class UnknownSchemaError(Exception):
    """The database's schema revision is none this c2's migrations know."""


# pg_advisory_xact_lock key of schema migrations ("c2migr" in ASCII).
MIGRATION_LOCK = 0x63326D69_6772


def _revision(conn: Connection) -> str | None:
    """The database's Alembic revision; None for a new database."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def sqlite_url(home: Path) -> str:
    """The URL of the home's SQLite database."""
    return f"sqlite:///{home / 'c2.db'}"
