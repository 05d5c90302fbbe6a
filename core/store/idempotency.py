"""Idempotency records: the first outcome of an op per (device, request_id) (docs/api.md §1)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, insert, select

from c2.core.session import utcnow
from c2.core.store.tables import IdempotencyRow

_IDEM = IdempotencyRow.__table__  # type: ignore[attr-defined]
RETENTION = timedelta(hours=24)


@dataclass(frozen=True)
class IdempotencyRecord:
    """A kept reply: the op's fingerprint, the reply's status and body, when."""

    op_hash: str
    status: int
    body_json: str
    created_at: datetime


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
        return IdempotencyRecord(row.op_hash, row.status, row.body_json, row.created_at)

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
