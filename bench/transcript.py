"""Transcript page latency at 1,000 and 1,000,000 rows (prints figures; asserts nothing).

Run: `.venv/bin/python -m bench.transcript [--rows 1000000] [--reads 200]`. Builds temp SQLite
stores through the real migrations, bulk-loads realistic turns (prompt, reasoning, three tool
updates, five text chunks), then times `read_page` through `Store.read_sync` — the same
transaction the engine uses — for the latest and the oldest page, plus @chat rendering.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from c2.core.store.database import Store, sqlite_url
from c2.core.transcript import DEFAULT_TURNS, read_page, render_chat_context

ROWS_PER_TURN = 10
BATCH = 100_000


def _turn_rows(session: str, turn: int) -> Iterator[tuple[str, int, str, str]]:
    base = turn * ROWS_PER_TURN
    call = f"call-{turn}"
    text = f"Please look at module {turn} and fix the failing test in it."
    yield session, base, "user", json.dumps({"kind": "prompt", "text": text, "display": text})
    yield session, base + 1, "agent", '{"kind":"reasoning","text":"Reading the module first."}'
    for offset, status in ((2, "pending"), (3, "in_progress"), (4, "completed")):
        title = "Run tests" if status == "pending" else ""
        part = {"kind": "tool_call", "id": call, "title": title, "status": status}
        if status == "pending":
            part["tool_kind"] = "execute"
        yield session, base + offset, "agent", json.dumps(part)
    for chunk in range(5):
        words = f"Chunk {chunk} of the answer for turn {turn}: the fix is in place. "
        yield session, base + 5 + chunk, "agent", json.dumps({"kind": "text", "text": words})


def build(path: Path, sessions: dict[str, int]) -> float:
    """Create a migrated store at `path` holding `sessions` (id → row count); seconds taken."""
    started = time.perf_counter()
    store = Store(sqlite_url(path))
    store.migrate()
    store.close()
    conn = sqlite3.connect(path / "c2.db", isolation_level=None)
    # Build-time only: durability does not matter for a throwaway benchmark database.
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-262144")
    insert = "INSERT INTO parts (session_id, seq, role, part_json) VALUES (?, ?, ?, ?)"
    for session, rows in sessions.items():
        batch: list[tuple[str, int, str, str]] = []
        for turn in range(rows // ROWS_PER_TURN):
            batch.extend(_turn_rows(session, turn))
            if len(batch) >= BATCH:
                conn.execute("BEGIN")
                conn.executemany(insert, batch)
                conn.execute("COMMIT")
                batch.clear()
        if batch:
            conn.execute("BEGIN")
            conn.executemany(insert, batch)
            conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - started


def timed(fn: Callable[[], object], reads: int) -> tuple[float, float]:
    """p50 and p99 latency of `fn` in milliseconds over `reads` calls (after a warm-up)."""
    for _ in range(10):
        fn()
    samples = []
    for _ in range(reads):
        started = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - started) / 1e6)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def measure(store: Store, session: str, rows: int, reads: int) -> dict[str, tuple[float, float]]:
    """Latest page, oldest page and @chat render latencies for one session."""
    oldest_cursor = DEFAULT_TURNS * ROWS_PER_TURN  # the user row of turn 20
    latest = store.read_sync(lambda r: read_page(r, session, None, None, None))
    oldest = store.read_sync(lambda r: read_page(r, session, oldest_cursor, None, None))
    assert latest.snapshot_through == rows - 1 and latest.next_before is not None
    assert oldest.next_before is None and oldest.entries[0].seq == 0
    return {
        "latest page": timed(
            lambda: store.read_sync(lambda r: read_page(r, session, None, None, None)), reads
        ),
        "oldest page": timed(
            lambda: store.read_sync(lambda r: read_page(r, session, oldest_cursor, None, None)),
            reads,
        ),
        "@chat render": timed(
            lambda: store.read_sync(lambda r: render_chat_context(r, session, "bench")), reads
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the large session")
    parser.add_argument("--reads", type=int, default=200, help="timed reads per figure")
    args = parser.parse_args()
    small_rows, big_rows = 1_000, args.rows
    with tempfile.TemporaryDirectory(prefix="c2-bench-") as tmp:
        small_dir, big_dir = Path(tmp) / "small", Path(tmp) / "big"
        small_dir.mkdir()
        big_dir.mkdir()
        print(
            f"build small store ({small_rows:,} rows): {build(small_dir, {'s': small_rows}):.1f}s"
        )
        seconds = build(big_dir, {"big": big_rows, "s": small_rows})
        print(f"build large store ({big_rows + small_rows:,} rows): {seconds:.1f}s")
        page_rows = DEFAULT_TURNS * ROWS_PER_TURN
        print(f"page = {DEFAULT_TURNS} turns x {ROWS_PER_TURN} rows ({page_rows} rows read)\n")
        cases = [
            (f"{small_rows:,}-row session, small db", small_dir, "s", small_rows),
            (f"{small_rows:,}-row session, large db", big_dir, "s", small_rows),
            (f"{big_rows:,}-row session, large db", big_dir, "big", big_rows),
        ]
        results: dict[str, dict[str, tuple[float, float]]] = {}
        for label, directory, session, rows in cases:
            store = Store(sqlite_url(directory))
            try:
                results[label] = measure(store, session, rows, args.reads)
            finally:
                store.close()
        print(f"{'case':<36}{'figure':<16}{'p50 ms':>10}{'p99 ms':>10}")
        for label, figures in results.items():
            for name, (p50, p99) in figures.items():
                print(f"{label:<36}{name:<16}{p50:>10.2f}{p99:>10.2f}")
        small, big = results[cases[0][0]], results[cases[2][0]]
        print()
        for name in small:
            ratio = big[name][0] / small[name][0]
            print(f"{name}: large/small p50 ratio {ratio:.2f} (target < 2.0)")
        print(f"latest page p50 at {big_rows:,} rows: {big['latest page'][0]:.2f} ms (target < 20)")


if __name__ == "__main__":
    main()
