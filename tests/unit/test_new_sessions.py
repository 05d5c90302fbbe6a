"""The step every new session ends with (core/new_sessions.py), through the real engine and a
scripted in-process agent: a session created or forked by a device with a default budget
takes that budget; one with no device, or from a device without a default, takes none."""

from __future__ import annotations

from pathlib import Path

from c2.core.protocol.ops import ForkOp, NewSessionOp
from c2.core.protocol.state import AnsweredBy, SessionSnapshot
from c2.core.session import utcnow
from c2.core.store.database import UnitOfWork
from c2.core.store.usage import Budget, UsageRepository
from tests.unit.fake_agent import FakeAgents, Harness, running

LIMITED = AnsweredBy(device_id="phone", name="Phone")
UNLIMITED = AnsweredBy(device_id="laptop", name="Laptop")
DEFAULT = Budget(max_cost=None, max_tokens=5, action="refuse_new_turns")


async def _budget_of(h: Harness, session: str) -> Budget | None:
    return await h.engine.store.read(lambda r: UsageRepository(r.conn).budget("session", session))


async def _create(h: Harness, actor: AnsweredBy | None) -> str:
    op = NewSessionOp(provider={"custom": "echo"}, cwd=str(h.cwd), use_worktree=False)
    snapshot = await h.engine.submit(op, actor)
    assert isinstance(snapshot, SessionSnapshot)
    return snapshot.id


async def _fork(h: Harness, parent: str, actor: AnsweredBy | None) -> str:
    snapshot = await h.engine.submit(ForkOp(session=parent), actor)
    assert isinstance(snapshot, SessionSnapshot)
    assert snapshot.forked_from is not None and snapshot.forked_from.session == parent
    return snapshot.id


async def test_created_and_forked_sessions_take_the_asking_devices_default_budget(
    tmp_path: Path,
) -> None:
    """A fork asked by a budget-limited device inherits its default like a created session
    does, whoever created the parent; other devices' sessions and forks get no budget."""
    async with running(tmp_path, FakeAgents()) as h:

        def set_default(uow: UnitOfWork) -> None:
            UsageRepository(uow.conn).put_budget("device", LIMITED.device_id, DEFAULT, utcnow())

        await h.engine.store.write(set_default)
        parent = await _create(h, UNLIMITED)
        assert await _budget_of(h, parent) is None
        created = await _create(h, LIMITED)
        assert await _budget_of(h, created) == DEFAULT

        forked = await _fork(h, parent, LIMITED)
        assert await _budget_of(h, forked) == DEFAULT
        assert await _budget_of(h, await _fork(h, created, UNLIMITED)) is None
        assert await _budget_of(h, await _fork(h, parent, None)) is None
        created_events = [e for e in h.of("session_created") if e["session"] == forked]
        assert len(created_events) == 1
