"""Idempotency records: the first outcome of an op per (device, request_id) (docs/api.md §1).

In a cluster a record is first inserted as a claim (status 0, PENDING, naming the claimant)
before the op runs, so a duplicate arriving at another member finds it and waits for the
outcome (core/idempotent.py); the outcome replaces the claim once the op is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from c2.core.session import utcnow
from c2.core.store.tables import IdempotencyRow

_IDEM = IdempotencyRow.__table__  # type: ignore[attr-defined]
RETENTION = timedelta(hours=24)
PENDING = 0  # the status of a claim whose op still runs


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
        key = (_IDEM.c.device_id == device_id, _IDEM.c.request_id == request_id)
        self._conn.execute(delete(_IDEM).where(*key))  # one past the window
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
        )
        return None if done.rowcount else self.get(device_id, request_id)

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
    ) -> None:
        """The claimed op's outcome replaces the claim."""
        self._conn.execute(
            update(_IDEM)
            .where(
                _IDEM.c.device_id == device_id,
                _IDEM.c.request_id == request_id,
                _IDEM.c.claimant == claimant,
            )
            .values(status=status, body_json=body, claimant=None)
        )

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
