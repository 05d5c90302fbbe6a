"""When the SQLite writer copies its WAL back into the database file: between batches, once the
last batch is published, not inside a COMMIT.

In WAL mode a commit appends pages to the `-wal` file and a checkpoint copies them back into the
database file, syncing both. SQLite's own checkpoint (`wal_autocheckpoint`, 1,000 pages) runs
inside the COMMIT that crosses the threshold, so every event that commit carries waits for the
copy and two `fdatasync` calls before the writer can hand it to the streams. At 50 agents
streaming that was three times a second and ~2.5 ms of the load's p99 (docs/decisions.md,
"eighteenth sitting"); on a disk with slow syncs it is that disk's sync time, twice.

So the writer checkpoints itself, on its own connection, after it has handed a batch to the
event loop: at most once per `interval` while commits come (about as often as the 1,000 pages
did at that load), never while idle. The next batch's jobs queue meanwhile and commit right
after. The checkpoint is PASSIVE and no other connection writes, so it copies the whole WAL
unless a reader still reads an old snapshot, and SQLite then restarts the WAL from its start at
the next commit: the file stays as small as before. (A checkpoint from another thread, tried
first, runs while the writer keeps appending, so it rarely copies the whole WAL, and the file
grew to the safety net.)

SQLite's own checkpoint stays as a safety net at SAFETY_NET_PAGES: should these fail or fall
behind, the writer's commits checkpoint as they did before, at a larger WAL.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

# At most one checkpoint per this many seconds while commits come.
CHECKPOINT_INTERVAL = 0.25
# SQLite's own threshold on the writer's connection (pages in the WAL since it last
# restarted, ~40 MiB): only reached if the checkpoints here fail or fall behind.
SAFETY_NET_PAGES = 10_000


class WalCheckpoints:
    """The writer's checkpoint schedule (see the module): `committed` after each commit that
    may have added pages, `run_if_due` between batches."""

    def __init__(
        self, interval: float = CHECKPOINT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._dirty = False
        self._next = -float("inf")
        # (busy, WAL frames, frames copied) of the last checkpoint: SQLite's own answer.
        self.last: tuple[int, int, int] | None = None

    def committed(self) -> None:
        """A commit may have added pages to the WAL."""
        self._dirty = True

    def run_if_due(self, driver_connection: Any) -> bool:
        """Checkpoint on `driver_connection` (the writer's sqlite3 connection, outside a
        transaction) if something was committed since the last one and the interval has
        passed; whether it ran. A failure is logged: the safety net covers it."""
        if not self._dirty:
            return False
        now = self._clock()
        if now < self._next:
            return False
        self._dirty, self._next = False, now + self.interval
        try:
            row = driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            log.warning("WAL checkpoint failed: %s", exc)
            return False
        self.last = (int(row[0]), int(row[1]), int(row[2]))
        return True
