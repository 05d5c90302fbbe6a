"""Agent process records and the start-up sweep, on SQLite and PostgreSQL, with real processes."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from c2.core.agents.reaper import boot_id, group_members, read_stat, running
from c2.core.processes import AgentRecords, end_orphans
from c2.core.store.agent_processes import AgentProcessRecord
from c2.core.store.database import Store
from tests.contract.pg import STORES, database_url_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
WITH_CHILD = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
)


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url_for(request.param, tmp_path, "c2_procs") as url:
        yield url


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    store = Store(database_url)
    await asyncio.to_thread(store.migrate)
    store.start()
    try:
        yield store
    finally:
        await asyncio.to_thread(store.close)


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Process group leaders started by a test; whatever is left is killed at teardown."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(5)


def start_group(procs: list[subprocess.Popen[bytes]], code: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    procs.append(proc)
    return proc


async def test_end_orphans_ends_recorded_groups_and_spares_reused_pids(
    store: Store, spawned: list[subprocess.Popen[bytes]]
) -> None:
    """A recorded group (leader and child) is killed; a live process whose recorded start
    time is not its own (a reused pid) is left alone; the records are cleared."""
    ours = start_group(spawned, WITH_CHILD)
    stranger = start_group(spawned, "import time; time.sleep(60)")
    await AgentRecords(store).spawned(ours.pid)
    with anyio.fail_after(10):
        while len(group_members(ours.pid)) < 2:  # noqa: ASYNC110 - external process state
            await anyio.sleep(0.02)
    (child,) = [m.pid for m in group_members(ours.pid) if m.pid != ours.pid]
    stat = read_stat(stranger.pid)
    assert stat is not None
    reused = AgentProcessRecord(stranger.pid, stranger.pid, stat.start_time - 1, boot_id())
    await store.write(lambda uow: uow.agent_processes.add(reused))

    assert await end_orphans(store) >= 2
    assert await asyncio.to_thread(ours.wait, 5) == -signal.SIGKILL
    with anyio.fail_after(10):
        while running(read_stat(child)):  # noqa: ASYNC110 - external process state
            await anyio.sleep(0.02)
    assert stranger.poll() is None
    assert await store.read(lambda r: r.agent_processes.list()) == []


async def test_agent_records_forget_an_ended_group(
    store: Store, spawned: list[subprocess.Popen[bytes]]
) -> None:
    """`gone` deletes the row `spawned` wrote (the registry the engine hands to agents)."""
    proc = start_group(spawned, "import time; time.sleep(60)")
    records = AgentRecords(store)
    await records.spawned(proc.pid)
    (row,) = await store.read(lambda r: r.agent_processes.list())
    assert row.pid == row.pgid == proc.pid and row.boot_id == boot_id()
    await records.gone(proc.pid)
    assert await store.read(lambda r: r.agent_processes.list()) == []
