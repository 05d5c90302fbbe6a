"""Agent process records: which agent process groups this home's server has running.

Written when an agent is spawned and deleted once its group is gone; read once at start-up
to end the groups a crashed predecessor left behind (core/agents/reaper.py decides which).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select

from c2.core.session import utcnow
from c2.core.store.tables import AgentProcessRow

_PROCS = AgentProcessRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class AgentProcessRecord:
    """An agent process c2 started: enough to find it again after a crash."""

    pid: int
    pgid: int
    start_time: int
    boot_id: str
    session_id: str | None = None
    instance_id: str | None = None  # the cluster member that spawned it (issue 18)


class AgentProcessRepository:
    """The agent processes recorded as running."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def add(self, record: AgentProcessRecord) -> None:
        """Record a spawned agent (replacing a stale row for a reused pid)."""
        self._conn.execute(delete(_PROCS).where(_PROCS.c.pid == record.pid))
        self._conn.execute(
            insert(_PROCS).values(
                pid=record.pid,
                pgid=record.pgid,
                start_time=record.start_time,
                boot_id=record.boot_id,
                session_id=record.session_id,
                instance_id=record.instance_id,
                created_at=utcnow(),
            )
        )

    def remove(self, pid: int, start_time: int) -> None:
        """Forget one agent whose group is gone (a newer row for a reused pid stays)."""
        self._conn.execute(
            delete(_PROCS).where(_PROCS.c.pid == pid, _PROCS.c.start_time == start_time)
        )

    def list(self, instance_id: str | None = None) -> list[AgentProcessRecord]:
        """Every record, or (a cluster member) only those `instance_id` spawned."""
        query = select(_PROCS).order_by(_PROCS.c.pid)
        if instance_id is not None:
            query = query.where(_PROCS.c.instance_id == instance_id)
        return [
            AgentProcessRecord(r.pid, r.pgid, r.start_time, r.boot_id, r.session_id, r.instance_id)
            for r in self._conn.execute(query).all()
        ]

    def clear(self, instance_id: str | None = None) -> int:
        """Forget every record, or (a cluster member) only its own."""
        query = delete(_PROCS)
        if instance_id is not None:
            query = query.where(_PROCS.c.instance_id == instance_id)
        result = self._conn.execute(query)
        return int(result.rowcount or 0)
