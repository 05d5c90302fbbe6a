"""The writer's WAL checkpoint schedule (core/store/wal.py), on a real SQLite file: only after
a commit, at most once per interval, the whole WAL copied, a failure logged and survived."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from c2.core.store.wal import WalCheckpoints


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _wal_database(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")  # only the schedule copies the WAL back
    conn.execute("CREATE TABLE t (b BLOB)")
    return conn


def test_it_checkpoints_only_after_a_commit_and_copies_the_whole_wal(tmp_path: Path) -> None:
    conn = _wal_database(tmp_path / "c.db")
    clock = Clock()
    wal = WalCheckpoints(interval=0.25, clock=clock)
    conn.execute("INSERT INTO t VALUES (randomblob(100000))")
    assert not wal.run_if_due(conn)  # no commit reported: nothing to do
    wal.committed()
    assert wal.run_if_due(conn)
    assert wal.last is not None
    busy, frames, copied = wal.last
    assert busy == 0 and frames > 0 and copied == frames
    assert not wal.run_if_due(conn)  # nothing committed since


def test_commits_in_a_stream_checkpoint_at_most_once_per_interval(tmp_path: Path) -> None:
    conn = _wal_database(tmp_path / "c.db")
    clock = Clock()
    wal = WalCheckpoints(interval=0.25, clock=clock)
    ran = []
    for _ in range(100):  # a commit every 10 ms for a second
        conn.execute("INSERT INTO t VALUES (randomblob(1000))")
        wal.committed()
        ran.append(wal.run_if_due(conn))
        clock.now += 0.01
    assert ran.count(True) == 4  # at 0, 0.25, 0.5 and 0.75 s
    assert ran[0] and ran[25] and ran[50] and ran[75]


def test_a_failed_checkpoint_is_logged_and_the_next_commit_tries_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conn = _wal_database(tmp_path / "c.db")
    clock = Clock()
    wal = WalCheckpoints(interval=0.25, clock=clock)
    broken = sqlite3.connect(tmp_path / "c.db")
    broken.close()  # any statement on it raises sqlite3.ProgrammingError
    wal.committed()
    with caplog.at_level(logging.WARNING, logger="c2.core.store.wal"):
        assert not wal.run_if_due(broken)
    assert "WAL checkpoint failed" in caplog.text
    clock.now += 0.25
    conn.execute("INSERT INTO t VALUES (randomblob(1000))")
    wal.committed()
    assert wal.run_if_due(conn)
