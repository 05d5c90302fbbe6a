"""Agent process records in the store: written per spawn, swept at start-up.

Every agent group is recorded (pid = pgid, leader start time, boot id) right after spawn and
forgotten once ended. A server killed with SIGKILL forgets nothing, so the next server on the
same store ends whatever of those groups still runs (core/agents/reaper.py decides what is
provably ours), then clears the records, before any agent of its own is started.
"""

from __future__ import annotations

import asyncio
import logging

from c2.core.agents.reaper import boot_id, end_orphaned_group, read_stat
from c2.core.store.agent_processes import AgentProcessRecord
from c2.core.store.database import Store

log = logging.getLogger(__name__)


class AgentRecords:
    """The engine's `ProcessRegistry`: one row per live agent group, keyed by leader pid."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._boot = boot_id()
        self._instance = store.instance_id
        self._start_times: dict[int, int] = {}

    async def spawned(self, pid: int) -> None:
        """Record a started agent process (its start time tells it from a reused pid)."""
        stat = read_stat(pid)
        if stat is None:
            return  # already gone: nothing can outlive it unrecorded but its group, ended on exit
        self._start_times[pid] = stat.start_time
        record = AgentProcessRecord(
            pid, stat.pgid, stat.start_time, self._boot, instance_id=self._instance
        )
        await self._store.write(lambda uow: uow.agent_processes.add(record))

    async def gone(self, pid: int) -> None:
        """Forget an agent process that exited."""
        start_time = self._start_times.pop(pid, None)
        if start_time is not None:
            await self._store.write(lambda uow: uow.agent_processes.remove(pid, start_time))


async def end_orphans(store: Store) -> int:
    """End the agent groups a previous server left running, then clear every record. A
    cluster member ends and clears only the records of its own id (kept in its home), so a
    member restarting ends its own old agents and never a peer's."""
    instance = store.instance_id
    records = await store.read(lambda r: r.agent_processes.list(instance))
    hit = 0
    for rec in records:
        hit += await asyncio.to_thread(
            end_orphaned_group, rec.pid, rec.pgid, rec.start_time, rec.boot_id
        )
    if records:
        await store.write(lambda uow: uow.agent_processes.clear(instance))
    if hit:
        log.warning(
            "ended %d process(es) left by agents of a previous c2 (%d group(s) recorded)",
            hit,
            len(records),
        )
    return hit
