"""What the store's writer makes of a failed write: worth retrying or not, and how to say why.

A database that is unreachable, locked by another connection, full or read-only may come back:
such a failure is retried on a new connection. Anything else (a constraint, a conflict, a bug
in a write) fails only the write that caused it.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from c2.core.errors import StoreWriteError
from c2.core.store.ownership import OwnershipError

__all__ = ["StepsLostError", "StoreWriteError", "describe", "is_transient"]


class StepsLostError(Exception):
    """Some steps of a job of several (Store.submit_steps) failed on their own; the others
    committed. `cause` is the first failure."""

    def __init__(self, failed: int, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.failed, self.cause = failed, cause


# SQLite reports some failures of a write's own statements as OperationalError too: its
# primary result codes SQLITE_ERROR (no such table, a syntax error, too many variables),
# TOOBIG, CONSTRAINT, MISMATCH, MISUSE and RANGE. Retried as the database's, one such write
# would hold every write queued behind it for the whole retry window, then fail them with it.
_SQLITE_WRITES_OWN = frozenset({1, 18, 19, 20, 21, 25})
# PostgreSQL's SQLSTATE class 54, program limit exceeded (a word too long for a tsvector, a
# value too long for an index row), arrives as an OperationalError as well.
_PG_WRITES_OWN_CLASSES = frozenset({"54"})


def is_transient(exc: BaseException) -> bool:
    """The failure may go away with time or a new connection (retry), else it is the write's."""
    if isinstance(exc, OwnershipError | StoreWriteError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    cause = exc.orig if isinstance(exc, DBAPIError) else exc
    if isinstance(cause, sqlite3.Error):
        # The bulk-insert path raises sqlite3's own errors, bypassing SQLAlchemy.
        return isinstance(cause, sqlite3.OperationalError | sqlite3.InterfaceError) and (
            _sqlite_code(cause) not in _SQLITE_WRITES_OWN
        )
    sqlstate = getattr(cause, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate[:2] in _PG_WRITES_OWN_CLASSES:
        return False
    return isinstance(exc, OperationalError | InterfaceError)


def _sqlite_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of `exc`; None for an error SQLite did not report."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def describe(exc: BaseException) -> str:
    """One line naming the cause, without SQL or parameters (they can be long or secret)."""
    if isinstance(exc, StepsLostError):
        exc = exc.cause
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        kind, message = type(exc.orig).__name__, str(exc.orig)
    else:
        kind, message = type(exc).__name__, str(exc)
    first = message.strip().splitlines()[0] if message.strip() else ""
    return f"{kind}: {first}" if first else kind
