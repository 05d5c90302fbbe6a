"""A machine reference: what a cold wake-up and a small commit cost on this machine right now.

On a shared VM the same server code measures 10-16 µs of CPU per frame at 50 x 20 within one
hour (docs/decisions.md, "eighteenth sitting"): what changes is not the code but what waking
a thread and running code gone cold costs, which is most of that load's work. This script
does a fixed piece of such work for a while and prints its CPU per round, so a figure can be
read beside the state of the machine it was taken in. `bench.fleet` runs it beside each fleet
run (its own process, so it shares neither the server's GIL nor the bench's).

A round: the thread waits 10 ms (a timed lock wait, as the store's writer waits for a tick's
jobs), then commits ten ~100-byte rows over 50 keys to a SQLite file in WAL mode with
`synchronous=NORMAL`, as the writer does for one tick at 50 x 20. The figure is the median
of the rounds' thread CPU time: a fixed amount of work, so it moves only with the machine.

Run: .venv/bin/python -m bench.reference [--seconds 5]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

INTERVAL = 0.010  # the pipes' tick at the default commit interval
ROWS = 10  # a tick's chunks at 50 x 20
KEYS = 50  # sessions: the rows land on as many b-tree leaves as a tick's chunks do


def cold_rounds(seconds: float, interval: float = INTERVAL) -> list[float]:
    """CPU microseconds of each round over `seconds` (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "reference.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE rows (key TEXT, seq INTEGER, body TEXT, PRIMARY KEY (key, seq))")
        sleeper = threading.Lock()
        sleeper.acquire()  # never released: each wait times out, as an idle writer's does
        rounds: list[float] = []
        seq = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sleeper.acquire(timeout=interval)
            began = time.thread_time()
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "INSERT INTO rows VALUES (?, ?, ?)",
                [(f"key-{(seq + i) % KEYS}", seq + i, "x" * 100) for i in range(ROWS)],
            )
            db.execute("COMMIT")
            rounds.append((time.thread_time() - began) * 1e6)
            seq += ROWS
        db.close()
    return rounds


def median_round_us(seconds: float) -> float:
    """The median of `cold_rounds(seconds)`."""
    return statistics.median(cold_rounds(seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    print(f"{median_round_us(args.seconds):.1f}")


if __name__ == "__main__":
    main()
