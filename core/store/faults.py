"""What the store's writer makes of a failed write: worth retrying or not, and how to say why.

A database that is unreachable, locked by another connection, full or read-only may come back:
such a failure is retried on a new connection. Anything else (a constraint, a conflict, a bug
in a write) fails only the write that caused it.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from c2.core.store.ownership import OwnershipError


class StoreWriteError(Exception):
    """A write could not be committed: the database stayed unreachable, unwritable or owned by
    another c2 for longer than the write could wait, or the store was closing."""


class StepsLostError(Exception):
    """Some steps of a job of several (Store.submit_steps) failed on their own; the others
    committed. `cause` is the first failure."""

    def __init__(self, failed: int, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.failed, self.cause = failed, cause


def is_transient(exc: BaseException) -> bool:
    """The failure may go away with time or a new connection (retry), else it is the write's."""
    if isinstance(exc, OwnershipError | StoreWriteError):
        return True
    if isinstance(exc, sqlite3.OperationalError | sqlite3.InterfaceError):
        return True  # raised by the bulk-insert path, which bypasses SQLAlchemy
    if isinstance(exc, DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(
            exc, OperationalError | InterfaceError
        )
    return False


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
