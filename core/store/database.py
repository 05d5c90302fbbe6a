"""The store: engines, migrations, and the single-writer unit of work with group commit.

Every state change and the events it produced commit in one transaction on one writer thread,
so the global event sequence is committed (and published) in strictly increasing order on
SQLite and PostgreSQL alike. Reads run on a small pool of reader connections.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event

from core.protocol import Event
from core.store.agent_processes import AgentProcessRepository
from core.store.buffer import WriteBuffer
from core.store.events import CommittedEvent, EventLog, encode_event
from core.store.idempotency import IdempotencyRepository
from core.store.parts import PartRepository
from core.store.sessions import SessionRepository

log = logging.getLogger(__name__)
T = TypeVar("T")
MIGRATIONS = Path(__file__).parent / "migrations"
# Jobs drained into one transaction at most; bounds the latency one commit adds to a batch.
MAX_GROUP = 256


class UnitOfWork:
    """Repositories bound to one open transaction. Events appended here publish after commit.

    Inside a group-commit batch (`buffer` given) transcript and event rows are queued and
    inserted in bulk before COMMIT; `committed` is complete once the batch has flushed.
    """

    def __init__(
        self,
        conn: Connection,
        part_seqs: dict[str, int] | None = None,
        buffer: WriteBuffer | None = None,
    ) -> None:
        self.conn = conn
        self.sessions = SessionRepository(conn)
        self.parts = PartRepository(conn, part_seqs, buffer)
        self.events = EventLog(conn)
        self.idempotency = IdempotencyRepository(conn)
        self.agent_processes = AgentProcessRepository(conn)
        self.committed: list[CommittedEvent] = []
        self._buffer = buffer
        self._queued: list[tuple[int, str | None, str]] = []

    def emit(self, ev: Event) -> None:
        """Append `ev` to the event log in this transaction."""
        payload = encode_event(ev)
        if self._buffer is None:
            self.committed.append(self.events.append_encoded(ev.session, payload))
        else:
            self._queued.append((self._buffer.add_event(ev.session, payload), ev.session, payload))

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


@dataclass
class _Job(Generic[T]):
    fn: Callable[[UnitOfWork], T]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    result: Any = None
    error: BaseException | None = None
    committed: list[CommittedEvent] = field(default_factory=list)
    uow: UnitOfWork | None = None


Publisher = Callable[[list[CommittedEvent]], None]


def _make_engine(url: str, *, writer: bool) -> Engine:
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
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # The writer takes the write lock up front so a transaction never fails on upgrade.
            conn.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

        return engine
    options: dict[str, Any] = {"pool_pre_ping": True}
    if not writer:
        # One consistent snapshot per read (transcript pages, welcome frames).
        options["isolation_level"] = "REPEATABLE READ"
    return create_engine(url, **options)


class Store:
    """Owns the database engines, the writer thread and the reader pool."""

    def __init__(self, url: str, *, readers: int = 4) -> None:
        self.url = url
        self.dialect = "sqlite" if url.startswith("sqlite") else "other"
        self._writer_engine = _make_engine(url, writer=True)
        self._reader_engine = _make_engine(url, writer=False)
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="c2-db-read")
        self._writer: threading.Thread | None = None
        self._publish: Publisher | None = None
        # Next transcript seq per session, owned by the writer thread (saves a MAX() per row).
        self._part_seqs: dict[str, int] = {}
        self._next_event_seq: int | None = None  # the writer's global event counter

    # -- lifecycle -----------------------------------------------------------------------------

    def migrate(self) -> None:
        """Apply Alembic migrations up to head (idempotent)."""
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self._writer_engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    def start(self, publish: Publisher | None = None) -> None:
        """Start the writer thread; `publish` is called on the event loop after each commit."""
        self._publish = publish
        self._writer = threading.Thread(target=self._write_loop, name="c2-db-writer", daemon=True)
        self._writer.start()

    def close(self) -> None:
        if self._writer is not None:
            self._jobs.put(None)
            self._writer.join(timeout=10)
            self._writer = None
        self._readers.shutdown(wait=True)
        self._writer_engine.dispose()
        self._reader_engine.dispose()

    # -- writes --------------------------------------------------------------------------------

    async def write(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Run `fn` in a write transaction; events it emitted are published before this returns."""
        return await self.submit(fn)

    def submit(self, fn: Callable[[UnitOfWork], T]) -> asyncio.Future[T]:
        """Queue `fn` for the writer without waiting. Jobs commit and publish in submission
        order, so a producer may stream writes and await only the last one (group commit)."""
        if self._writer is None:
            raise RuntimeError("store writer is not started")
        loop = asyncio.get_running_loop()
        job: _Job[T] = _Job(fn=fn, loop=loop, future=loop.create_future())
        self._jobs.put(job)
        return job.future

    def write_sync(self, fn: Callable[[UnitOfWork], T]) -> T:
        """Run `fn` in its own write transaction on the calling thread (start-up, CLI, tests)."""
        with self._writer_engine.begin() as conn:
            return fn(UnitOfWork(conn))

    def _write_loop(self) -> None:
        conn = self._writer_engine.connect()
        try:
            while True:
                first = self._jobs.get()
                if first is None:
                    return
                batch: list[_Job[Any]] = [first]
                stop = False
                while len(batch) < MAX_GROUP:
                    try:
                        nxt = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                        break
                    batch.append(nxt)
                conn = self._run_batch(conn, batch)
                if stop:
                    return
        finally:
            conn.close()

    def _run_batch(self, conn: Connection, batch: list[_Job[Any]]) -> Connection:
        # Group commit: the batch shares one transaction and one COMMIT. Jobs are pure
        # functions of their unit of work, so when any of them fails the batch is rolled back
        # and replayed one job per transaction: only the failing job reports the error.
        try:
            with conn.begin():
                buffer = WriteBuffer()
                for job in batch:
                    job.uow = UnitOfWork(conn, self._part_seqs, buffer)
                    job.result = job.fn(job.uow)
                if self._next_event_seq is None:
                    self._next_event_seq = EventLog(conn).last_seq() + 1
                seqs = buffer.flush(conn, self._next_event_seq)
                self._next_event_seq += len(seqs)
            for job in batch:
                assert job.uow is not None
                job.uow.settle(seqs)
                job.committed, job.uow = job.uow.committed, None
        except Exception as exc:
            # Cached counters may name rows that were rolled back: re-read them.
            self._part_seqs.clear()
            self._next_event_seq = None
            if conn.invalidated or conn.closed:
                conn = self._writer_engine.connect()
            if len(batch) > 1:
                for job in batch:
                    conn = self._run_batch(conn, [job])
                return conn
            batch[0].error, batch[0].committed = exc, []
        # One wake-up of the loop per batch; settling in order keeps publication in sequence.
        by_loop: dict[asyncio.AbstractEventLoop, list[_Job[Any]]] = {}
        for job in batch:
            by_loop.setdefault(job.loop, []).append(job)
        for loop, jobs in by_loop.items():
            loop.call_soon_threadsafe(self._settle, jobs)
        return conn

    def _settle(self, jobs: list[_Job[Any]]) -> None:
        # Runs on the event loop, in commit order: publish the whole batch first (one fan-out
        # per batch, not per job) so a caller that awaits its write observes its own events
        # already delivered to the bus.
        committed = [ev for job in jobs for ev in job.committed]
        if committed and self._publish is not None:
            self._publish(committed)
        for job in jobs:
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
        with self._reader_engine.connect() as conn, conn.begin():
            return fn(ReadUnit(conn))


def sqlite_url(home: Path) -> str:
    return f"sqlite:///{home / 'c2.db'}"
