"""The store's writer alone: CPU per streamed chunk, on a real SQLite file.

An agent's text chunk costs the writer one transcript row, one event, the search index step
and its share of a transaction. `bench/fleet.py` sees that cost mixed with everything else on a
noisy machine; here the writer gets exactly the jobs `AgentFeed` submits for text chunks (one
paced `submit_steps` job per burst, holding a `RunWrite` of the burst's chunks), spread evenly
over S sessions at a given rate, and the figure is the writer thread's own CPU time (read on
the writer thread by a job at the start and the end): on this shared machine it still varies
by ~15 % from run to run, so compare changes over several alternating runs.

    python -m bench.writer [--sessions 20] [--rate 2000] [--seconds 5] [--burst 1]

`--rate` is chunks/s over all sessions; `--burst` chunks per job (one read of an agent's pipe
holds several when it streams fast). The SQLite floor printed beside it is the same two rows
per chunk inserted with the sqlite3 module alone, in transactions of the size the writer made.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from c2.core.agent_feed import RunWrite
from c2.core.protocol.chunks import ChunkRun, json_string
from c2.core.session import utcnow
from c2.core.store.buffer import SQLITE_DATETIME, SQLITE_INSERT_EVENTS, SQLITE_INSERT_PARTS
from c2.core.store.database import COMMIT_INTERVAL, Store, UnitOfWork
from c2.core.store.tables import EventRow, PartRow


def _burst_job(session: str, first: int, burst: int) -> Callable[[UnitOfWork], None]:
    """The write `AgentFeed` queues for `burst` text chunks of one message read together: one
    run, its transcript rows, then their events."""
    run = ChunkRun("text", session, f"m-{session}")
    for n in range(first, first + burst):
        text = f"w{n} "
        run.add(text, json_string(text))
    return RunWrite(run)


async def _feed(store: Store, sessions: int, rate: float, seconds: float, burst: int) -> int:
    names = [f"bench-{i:04d}" for i in range(sessions)]
    interval = burst / rate
    sent = 0
    start = time.monotonic()
    last: asyncio.Future[None] | None = None
    while (now := time.monotonic()) < start + seconds:
        due = int((now - start) / interval)
        while sent // burst < due:
            session = names[(sent // burst) % sessions]
            last = store.submit_steps([_burst_job(session, sent, burst)], paced=True)
            sent += burst
        await asyncio.sleep(interval / 2)
    if last is not None:
        await last
    return sent


async def writer_cost(
    directory: Path, sessions: int, rate: float, seconds: float, burst: int, interval: float
) -> tuple[float, int, int]:
    """(writer CPU s, chunks written, transactions) for one run."""
    store = Store(f"sqlite:///{directory / 'c2.db'}", commit_interval=interval)
    store.migrate()
    store.start()
    try:
        cpu0 = await store.submit(lambda _uow: time.thread_time())
        chunks = await _feed(store, sessions, rate, seconds, burst)
        cpu1 = await store.submit(lambda _uow: time.thread_time())
    finally:
        store.close()
    # A transaction stamps all its events with one time: their count is the transactions'.
    with sqlite3.connect(directory / "c2.db") as db:
        (commits,) = db.execute("SELECT COUNT(DISTINCT created_at) FROM events").fetchone()
    return cpu1 - cpu0, chunks, int(commits)


def floor_db(path: Path) -> sqlite3.Connection:
    """A SQLite file with c2's `parts` and `events` tables and indexes (their DDL from c2's
    table metadata), its pragmas, and nothing else: what recording a chunk costs the database
    itself."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    dialect = sqlite.dialect()
    for table in (PartRow.__table__, EventRow.__table__):  # type: ignore[attr-defined]
        db.execute(str(CreateTable(table).compile(dialect=dialect)))
        for index in table.indexes:
            db.execute(str(CreateIndex(index).compile(dialect=dialect)))
    return db


FloorRow = tuple[str, int, str, str]  # session, seq, part JSON, event JSON


def floor_row(session: str, seq: int, text: str) -> FloorRow:
    """A text chunk's transcript row and event as the floor records them: c2's shapes, built
    with the standard JSON encoder and nothing else."""
    part = json.dumps({"kind": "text", "text": text})
    event = json.dumps({"event": "agent_text", "session": session, "text": text, "seq": seq})
    return session, seq, part, event


def insert_chunks(db: sqlite3.Connection, rows: list[FloorRow]) -> None:
    """One transaction of (session, seq, part JSON, event JSON) rows, with the statements the
    writer's bulk insert uses; each row's seq doubles as its event's (callers keep them unique
    across sessions)."""
    stamp = utcnow().strftime(SQLITE_DATETIME)
    db.execute("BEGIN IMMEDIATE")
    db.executemany(SQLITE_INSERT_PARTS, [(s, n, "agent", part) for s, n, part, _ in rows])
    db.executemany(SQLITE_INSERT_EVENTS, [(n, s, event, stamp) for s, n, _, event in rows])
    db.execute("COMMIT")


def sqlite_floor(directory: Path, chunks: int, per_transaction: int) -> float:
    """CPU µs per chunk of the same rows through the sqlite3 module alone."""
    db = floor_db(directory / "floor.db")
    started = time.process_time()
    for first in range(0, chunks, per_transaction):
        last = min(chunks, first + per_transaction)
        insert_chunks(db, [floor_row(f"s{n % 20}", n, f"w{n} ") for n in range(first, last)])
    db.close()
    return (time.process_time() - started) / chunks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--rate", type=float, default=2000, help="chunks/s, all sessions")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--burst", type=int, default=1, help="chunks per write job")
    parser.add_argument(
        "--interval-ms", type=float, default=COMMIT_INTERVAL * 1000, help="commit interval"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="c2-bench-writer-") as tmp:
        cpu, chunks, commits = asyncio.run(
            writer_cost(
                Path(tmp),
                args.sessions,
                args.rate,
                args.seconds,
                args.burst,
                args.interval_ms / 1000,
            )
        )
        per_tx = max(1, round(chunks / max(1, commits)))
        floor = sqlite_floor(Path(tmp), chunks, per_tx)
    print(
        f"writer: {args.sessions} sessions, {args.rate:,.0f} chunks/s, {args.burst} per job,"
        f" {args.interval_ms:g} ms commit interval: {chunks:,} chunks in {commits:,} transactions"
        f" ({chunks / max(1, commits):.1f} each)"
    )
    print(
        f"  writer CPU {cpu / chunks * 1e6:6.1f} us per chunk ({cpu / args.seconds:.0%} of a core)"
    )
    print(f"  sqlite3 alone, same rows and transactions: {floor:6.1f} us per chunk")
    print(
        "  (no target of its own: issue 17's < 15 us of server CPU per delivered frame leaves"
        " ~165 us per chunk for everything at 10 + 1 clients)"
    )


if __name__ == "__main__":
    main()
