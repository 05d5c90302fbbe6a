"""One owner per home and per database: the lock a serving c2 holds for its whole life.

Two servers on one database corrupt each other (each marks the other's live turn interrupted,
both allocate the same sequences), so the second refuses to start and names the first.
- The home: an exclusive `flock` on `<home>/c2.lock`, whose content names the owner. The kernel
  drops it when the process dies, however it dies; a stale file never blocks a start.
- PostgreSQL: a session-level advisory lock taken by the store's writer connection itself, so a
  commit can only succeed on a session that holds it. A lost connection loses the lock; the
  writer takes it again on its new connection before committing anything, or its writes fail.
  The owner is named by the lock session's `application_name`.

Cluster members (`c2 serve --cluster`, core/cluster/) take the same PostgreSQL key in *shared*
mode instead: any number of members hold it together, while an exclusive holder (a plain
server) and shared holders exclude each other. So a plain `c2 serve` refuses a database that
cluster members use, and a cluster member refuses one a plain server owns, with no registry
row that a crash could leave behind.

Everything that enforces exclusivity lives here.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Connection, text

LOCK_FILE = "c2.lock"
# pg_try_advisory_lock(int4, int4) key: "c2" and a hash of the schema c2's tables live in.
# Advisory locks are scoped to one database: each (database, schema) has its own owner.
_PG_CLASS = 0x6332
_STARTED = datetime.now(UTC)
_TRY_LOCK = text("SELECT pg_try_advisory_lock(:a, hashtext(current_schema()))")
_TRY_SHARED = text("SELECT pg_try_advisory_lock_shared(:a, hashtext(current_schema()))")
_HOLDER = text(
    "SELECT a.application_name, a.client_addr, a.backend_start, l.mode FROM pg_locks l "
    "JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = CAST(:a AS oid) "
    "AND l.objid = CAST(hashtext(current_schema()) AS oid) AND l.objsubid = 2 "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


class OwnershipError(Exception):
    """Another c2 owns this home or database."""


def reader_label() -> str:
    """The name of this process's other database sessions (readers)."""
    return f"c2 reader pid {os.getpid()}"


def owner_label() -> str:
    """This process as an owner: pid, host and start time (fits PostgreSQL's 63-byte names)."""
    host = socket.gethostname()[:20]
    return f"c2 pid {os.getpid()} on {host} since {_STARTED:%Y-%m-%dT%H:%M:%SZ}"


class HomeLock:
    """The held lock on one home folder; `release` (or process exit) lets another c2 in."""

    def __init__(self, home: Path, fd: int) -> None:
        self.home, self._fd, self._users = home, fd, 1

    def release(self) -> None:
        """Release this user's hold; the last one releases the lock."""
        with _HELD_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            _HELD.pop(self.home, None)
            os.close(self._fd)  # closing the only descriptor drops the flock


_HELD: dict[Path, HomeLock] = {}
_HELD_LOCK = threading.Lock()


def claim_home(home: Path) -> HomeLock:
    """Take `<home>/c2.lock` or raise OwnershipError naming the owner (OSError if the home
    cannot be written). Re-entrant within one process: the CLI's start-up check and the
    server it then runs share one claim."""
    home = home.resolve()
    with _HELD_LOCK:
        held = _HELD.get(home)
        if held is not None:
            held._users += 1
            return held
        fd = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown"
                raise OwnershipError(
                    f"another c2 serve owns home {home} ({owner}); stop it first"
                ) from None
            os.fchmod(fd, 0o600)
            label = f"{owner_label()}\n".encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, label, 0)
        except BaseException:
            os.close(fd)
            raise
        lock = _HELD[home] = HomeLock(home, fd)
        return lock


def claim_database(conn: Connection, *, shared: bool = False) -> None:
    """Take the database's owner lock on `conn`'s session (PostgreSQL; SQLite is covered by
    the home lock): exclusive for a plain server, `shared` for a cluster member. Raises
    OwnershipError naming the session that holds it in the conflicting mode."""
    if conn.dialect.name != "postgresql":
        return
    with conn.begin():
        got = conn.execute(_TRY_SHARED if shared else _TRY_LOCK, {"a": _PG_CLASS}).scalar()
        holder = None if got else conn.execute(_HOLDER, {"a": _PG_CLASS}).first()
    if got:
        return
    if holder is None:
        owner, clustered = "holder unknown", False
    else:
        name, addr, since, mode = holder
        clustered = mode == "ShareLock"
        owner = f"{name or 'unnamed'}, connected from {addr or 'a local socket'}"
        owner += f" at {since.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}" if since else ""
    if clustered:
        raise OwnershipError(
            f"c2 cluster members use this PostgreSQL database ({owner}); "
            "start this server with --cluster to join them, or stop them first"
        )
    if shared:
        raise OwnershipError(
            f"a c2 serve without --cluster owns this PostgreSQL database ({owner}); "
            "stop it first, or restart it with --cluster"
        )
    raise OwnershipError(f"another c2 serve owns this PostgreSQL database ({owner}); stop it first")
