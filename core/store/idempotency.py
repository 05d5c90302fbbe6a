"""Idempotency records: the first outcome of an op per (device, request_id) (docs/api.md §1).

In a cluster a record is first inserted as a claim (status 0, PENDING, naming the claimant)
before the op runs, so a duplicate arriving at another member finds it and waits for the
outcome (core/idempotent.py); the outcome replaces the claim once the op is done.

The outcome is written in the op's own transaction: while an op runs, its `OpRecord` is the
context's current one, and the write that completes the op (its effect) keeps the reply with
it (`UnitOfWork.answer`, core/store/database.py). The effect and its record therefore commit
together or not at all, so a server that dies right after the effect cannot make a retry run
the op again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from c2.core.session import utcnow
from c2.core.store.tables import IdempotencyRow

_IDEM = IdempotencyRow.__table__  # type: ignore[attr-defined]
RETENTION = timedelta(hours=24)
PENDING = 0  # the status of a claim whose op still runs


@dataclass(frozen=True, slots=True)
class Reply:
    """An op's reply as it is kept: its status and its JSON body."""

    status: int
    body: str


class ClaimLostError(Exception):
    """The op's claim was taken over by another member (this one was judged gone): its effect
    must not commit, the other claimant runs the op."""


@dataclass(eq=False)
class OpRecord:
    """The idempotency record of one op in flight, kept by the write that completes the op.

    `render` turns the op's outcome (or the DomainError it answers) into its reply; a cluster
    member's record completes its claim (`claimant`), a plain server's is inserted. Only
    writes submitted by the op's own task while it runs carry it (a turn or an agent reader
    the op starts inherits the context, never the record). `kept` is the reply committed with
    the op's effect, once that transaction committed."""

    device_id: str
    request_id: str
    op_hash: str
    render: Callable[[object], Reply]
    claimant: str | None = None
    task: asyncio.Task[object] | None = field(default=None)
    open: bool = True
    kept: Reply | None = None

    def carried_by_current_task(self) -> bool:
        """Whether the write running now belongs to the op this record keeps the reply of."""
        return self.open and self.task is not None and asyncio.current_task() is self.task

    def keep(self, conn: Connection, outcome: object) -> Reply | None:
        """Write the reply to `outcome` in the transaction of `conn`; None when it is not
        kept (a server-side failure a retry may turn into a success)."""
        reply = self.render(outcome)
        if reply.status >= 500:
            return None
        repo = IdempotencyRepository(conn)
        if self.claimant is None:
            repo.put(self.device_id, self.request_id, self.op_hash, reply.status, reply.body)
        elif not repo.complete(
            self.device_id, self.request_id, self.claimant, reply.status, reply.body
        ):
            found = repo.get(self.device_id, self.request_id)
            if found is None or (found.status, found.body_json) != (reply.status, reply.body):
                raise ClaimLostError(f"the claim of request {self.request_id!r} was taken over")
            # else: a retried transaction whose first COMMIT had landed after all
        return reply


# The op the current task is performing under a request_id (core/idempotent.py sets it).
CURRENT_OP: ContextVar[OpRecord | None] = ContextVar("c2_current_op", default=None)


@contextmanager
def outside_op() -> Iterator[None]:
    """Writes made inside do not complete the op in flight: work an op sets going on the side
    (the follow-up queue starting its next item as a turn answers nobody's request)."""
    token = CURRENT_OP.set(None)
    try:
        yield
    finally:
        CURRENT_OP.reset(token)


@dataclass(frozen=True)
class IdempotencyRecord:
    """A kept reply: the op's fingerprint, the reply's status and body, when."""

    op_hash: str
    status: int
    body_json: str
    created_at: datetime
    claimant: str | None = None


class IdempotencyRepository:
    """Kept replies by (device, request_id)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def get(self, device_id: str, request_id: str) -> IdempotencyRecord | None:
        """The stored outcome, unless it is older than the 24 h window."""
        row = self._conn.execute(
            select(_IDEM).where(
                _IDEM.c.device_id == device_id,
                _IDEM.c.request_id == request_id,
                _IDEM.c.created_at >= utcnow() - RETENTION,
            )
        ).first()
        if row is None:
            return None
        return IdempotencyRecord(
            row.op_hash, row.status, row.body_json, row.created_at, row.claimant
        )

    def claim(
        self, device_id: str, request_id: str, op_hash: str, claimant: str
    ) -> IdempotencyRecord | None:
        """Claim the key for an op about to run: None when this claim was inserted, else the
        record already there (a claim or an outcome). Concurrent claims from several members
        insert once (ON CONFLICT DO NOTHING)."""
        found = self.get(device_id, request_id)
        if found is not None:
            return found
        # One past the window only: a claim another member committed since our read above is
        # not ours to delete (READ COMMITTED: this statement sees it); the insert below then
        # finds it and the duplicate waits for it.
        self._conn.execute(
            delete(_IDEM).where(
                _IDEM.c.device_id == device_id,
                _IDEM.c.request_id == request_id,
                _IDEM.c.created_at < utcnow() - RETENTION,
            )
        )
        dialect_insert = pg_insert if self._conn.dialect.name == "postgresql" else sqlite_insert
        done = self._conn.execute(
            dialect_insert(_IDEM)
            .values(
                device_id=device_id,
                request_id=request_id,
                op_hash=op_hash,
                status=PENDING,
                body_json="",
                created_at=utcnow(),
                claimant=claimant,
            )
            .on_conflict_do_nothing(index_elements=["device_id", "request_id"])
            # Whether it inserted, from the row itself: psycopg reports no rowcount here.
            .returning(_IDEM.c.request_id)
        )
        return None if done.first() is not None else self.get(device_id, request_id)

    def take_over(self, device_id: str, request_id: str, stale: str, claimant: str) -> bool:
        """Replace a claim whose claimant is gone with `claimant`'s (one taker wins)."""
        done = self._conn.execute(
            update(_IDEM)
            .where(
                _IDEM.c.device_id == device_id,
                _IDEM.c.request_id == request_id,
                _IDEM.c.status == PENDING,
                _IDEM.c.claimant == stale,
            )
            .values(claimant=claimant, created_at=utcnow())
        )
        return bool(done.rowcount)

    def complete(
        self, device_id: str, request_id: str, claimant: str, status: int, body: str
    ) -> bool:
        """The claimed op's outcome replaces the claim; False when the claim is not
        `claimant`'s any more (taken over)."""
        done = self._conn.execute(
            update(_IDEM)
            .where(
                _IDEM.c.device_id == device_id,
                _IDEM.c.request_id == request_id,
                _IDEM.c.claimant == claimant,
            )
            .values(status=status, body_json=body, claimant=None)
        )
        return bool(done.rowcount)

    def release(self, device_id: str, request_id: str, claimant: str) -> None:
        """Drop a claim whose op kept no outcome (a server-side failure a retry may fix)."""
        self._conn.execute(
            delete(_IDEM).where(
                _IDEM.c.device_id == device_id,
                _IDEM.c.request_id == request_id,
                _IDEM.c.status == PENDING,
                _IDEM.c.claimant == claimant,
            )
        )

    def put(self, device_id: str, request_id: str, op_hash: str, status: int, body: str) -> None:
        """Keep a reply (replacing an expired one of the same key)."""
        self._conn.execute(
            delete(_IDEM).where(_IDEM.c.device_id == device_id, _IDEM.c.request_id == request_id)
        )
        self._conn.execute(
            insert(_IDEM).values(
                device_id=device_id,
                request_id=request_id,
                op_hash=op_hash,
                status=status,
                body_json=body,
                created_at=utcnow(),
            )
        )

    def prune(self) -> int:
        """Delete replies past the retention; how many."""
        result = self._conn.execute(delete(_IDEM).where(_IDEM.c.created_at < utcnow() - RETENTION))
        return int(result.rowcount or 0)
