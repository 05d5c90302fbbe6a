"""Turns Ops into Events: the one place that sequences a session's state changes.

Every op either raises a `DomainError` (after broadcasting the protocol's `error` event where
the protocol says the outcome is an event) or returns an outcome from core/outcomes.py.
Prompt turns run in supervised tasks that outlive the request that started them (API.md §3).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from core.acp_sessions import agent_failure
from core.agents.client import AgentProcess
from core.agents.updates import AgentError
from core.checkpoints import CheckpointService
from core.errors import (
    CapacityError,
    DomainError,
    SessionNotFoundError,
    StoreUnavailableError,
)
from core.forks import ForkService
from core.lifecycle import SessionLifecycle, resolve_cwd
from core.live import LiveSession
from core.outcomes import (
    BaselineChoice,
    PromptPreview,
    TranscriptPage,
    WorktreeDiscarded,
)
from core.processes import AgentRecords, end_orphans
from core.protocol import (
    AnsweredBy,
    AnswerPermissionOp,
    CancelOp,
    Doc,
    EditQueuedOp,
    ErrorEvent,
    Event,
    ForkOp,
    NewSessionOp,
    Op,
    PromptOp,
    QueuePromptOp,
    RemoveQueuedOp,
    ResumeQueueOp,
    RewindOp,
    SessionActivityChanged,
    SessionSnapshot,
    SetConfigOptionOp,
    SetExecutionPolicyOp,
    SetModelOp,
    SetModeOp,
    SetPermissionModeOp,
    SetSandboxOp,
)
from core.providers import ProviderRegistry, ProviderUnavailableError
from core.queue import FollowUpQueue
from core.session import SessionRecord
from core.session_settings import SessionSettings
from core.skills import SkillLibrary
from core.store.database import Store, UnitOfWork
from core.supervisor import Supervisor
from core.transcript import read_page
from core.turn_flow import TurnFlow
from core.turns import SessionHandler
from core.usage import UsageLedger
from core.worktrees import (
    preview_baselines_async,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


class Engine:
    def __init__(
        self,
        store: Store,
        home: Path,
        *,
        providers: ProviderRegistry | None = None,
        skills: SkillLibrary | None = None,
        max_live_agents: int = 32,
    ) -> None:
        self.store = store
        self.home = home
        self.providers = providers or ProviderRegistry.load(home)
        self.skills = skills or SkillLibrary(home / "skills")
        self.max_live_agents = max_live_agents
        self.live_sessions: dict[str, LiveSession] = {}
        self.handlers: dict[str, SessionHandler] = {}
        # Sessions holding an agent slot: reserved before the spawn, released on close.
        self._slots: set[LiveSession] = set()
        self.process_records = AgentRecords(store)
        # Agents detached from their session and still shutting down (deletion).
        self._retiring: set[AgentProcess] = set()
        self.agent_tasks = Supervisor("agent-close")
        self.turn_tasks = Supervisor("turn")
        self.lifecycle = SessionLifecycle(self)
        self.turns = TurnFlow(self)
        self.settings = SessionSettings(self)
        self.usage = UsageLedger(store, self.turns.cancel)
        self.checkpoints = CheckpointService(self)  # issue 14
        self.forks = ForkService(self)
        self.queue = FollowUpQueue(self)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover persisted in-flight activity as failed/interrupted (before any list).

        Unlike the original core we broadcast the recovery, so a client resuming its stream
        after a restart also drops its stale running indicator (protocol: Durable activity).
        """

        def recover(uow: UnitOfWork) -> int:
            changed = uow.sessions.interrupt_in_flight()
            for rec in changed:
                uow.emit(SessionActivityChanged(session=rec.id, activity=rec.activity))
            return len(changed)

        await end_orphans(self.store)
        recovered = await self.store.write(recover)
        if recovered:
            log.info("marked %d interrupted turn(s) as failed", recovered)
        await self.queue.interrupted()  # issue 14: queues wait for a client after a restart

    async def shutdown(self) -> None:
        """End turns (terminal error, never turn_ended), then close every agent."""
        for live in self.live_sessions.values():
            if live.turn is not None:
                live.turn.drain()
        await self.turn_tasks.close()
        await self.queue.close()
        await asyncio.gather(*(self.close_agent(live) for live in self.live_sessions.values()))
        await asyncio.gather(*(agent.close() for agent in list(self._retiring)))
        await self.agent_tasks.close()

    # -- dispatch ------------------------------------------------------------------------------

    async def submit(self, op: Op, actor: AnsweredBy | None = None) -> Any:
        """Apply one op on behalf of `actor` (the device that sent it, when known): a new
        session takes that device's default budget, a permission answer records who gave it.
        Returns the op's outcome or raises a DomainError."""
        match op:
            case NewSessionOp():
                return await self.lifecycle.new_session(op, actor.device_id if actor else None)
            case PromptOp():
                return await self.turns.prompt(op)
            case CancelOp():
                return await self.turns.cancel(op.session)
            case AnswerPermissionOp():
                return await self.turns.answer_permission(op, actor)
            case SetExecutionPolicyOp():
                return await self.settings.set_policy(
                    op.session, op.mode, op.sandbox, op.request_id
                )
            case SetPermissionModeOp():
                return await self.settings.set_policy(op.session, op.mode, None, None)
            case SetSandboxOp():
                return await self.settings.set_policy(op.session, None, op.sandbox, None)
            case SetModelOp():
                return await self.settings.set_model(op)
            case SetModeOp():
                return await self.settings.set_mode(op)
            case SetConfigOptionOp():
                return await self.settings.set_config_option(op)
            case RewindOp():  # issue 14
                return await self.checkpoints.rewind(op)
            case ForkOp():
                return await self.forks.fork(op)
            case QueuePromptOp():
                return await self.queue.append(op)
            case EditQueuedOp():
                return await self.queue.edit(op)
            case RemoveQueuedOp():
                return await self.queue.remove(op)
            case ResumeQueueOp():
                return await self.queue.resume(op)
        raise AssertionError(f"unhandled op {op!r}")  # pragma: no cover

    # -- helpers -------------------------------------------------------------------------------

    async def emit(self, *events: Event) -> None:
        def write(uow: UnitOfWork) -> None:
            for ev in events:
                uow.emit(ev)

        await self.store.write(write)

    async def reject(self, error: DomainError, *, terminal: bool) -> DomainError:
        """Broadcast `error` as the protocol's error event, then hand it back to raise."""
        try:
            await self.emit(
                ErrorEvent(
                    session=error.session,
                    message=error.message,
                    terminal=terminal,
                    request_id=error.request_id,
                    code=error.code,
                    auth_methods=error.details.get("auth_methods"),
                    stderr_tail=error.details.get("stderr_tail"),
                )
            )
        except Exception:
            log.exception("could not broadcast error event")
        return error

    async def load(self, session_id: str, request_id: str | None = None) -> LiveSession:
        live = self.live_sessions.get(session_id)
        if live is not None:
            return live
        try:
            record = await self.store.read(lambda r: r.sessions.get(session_id))
        except Exception as exc:
            raise StoreUnavailableError(
                f"couldn't read persisted session {session_id}: {exc}",
                session=session_id,
                request_id=request_id,
            ) from exc
        if record is None or record.archived:
            raise SessionNotFoundError("no such session", session=session_id, request_id=request_id)
        # Another coroutine may have loaded it while we read.
        return self.live_sessions.setdefault(session_id, LiveSession(record=record))

    def handler_for(self, live: LiveSession) -> SessionHandler:
        handler = self.handlers.get(live.id)
        if handler is None:
            handler = self.handlers[live.id] = SessionHandler(
                live, self.store, self.usage, on_park=self.queue.parked
            )
        return handler

    async def spawn_agent(self, live: LiveSession) -> AgentProcess:
        """Start the session's agent (capacity-checked); raises ProviderUnavailableError."""
        entry = self.providers.get(live.record.provider)
        entry.check_available()
        await self.make_room()
        # Reserved with no await since make_room's last count: concurrent spawns see it.
        self._slots.add(live)
        try:
            agent = await AgentProcess.start(
                entry.launch(live.record.cwd),
                self.handler_for(live),
                registry=self.process_records,
            )
        except AgentError as exc:
            self._slots.discard(live)
            failed = ProviderUnavailableError(
                f"couldn't start provider {entry.display_name}: {exc}", session=live.id
            )
            raise agent_failure(exc, failed) from exc
        except BaseException:
            self._slots.discard(live)
            raise
        self.providers.observe_auth(entry.key, methods=agent.auth_methods)
        live.agent, live.acp_session_id = agent, None
        return agent

    def _occupied(self) -> list[LiveSession]:
        """Slots in use: agents starting (reserved, no agent yet) or alive."""
        return [live for live in self._slots if live.agent is None or live.agent.alive]

    async def make_room(self) -> None:
        """Make sure a slot is free (closing the least recently used idle agents) or raise
        capacity. Re-counts after each eviction, as other spawns may run meanwhile."""
        while len(occupied := self._occupied()) >= self.max_live_agents:
            idle = [live for live in occupied if live.agent_alive and live.turn is None]
            if not idle:
                raise CapacityError(
                    f"all {self.max_live_agents} live agents are busy", retry_after=5
                )
            await self.close_agent(min(idle, key=lambda live: live.last_used))

    async def close_agent(self, live: LiveSession) -> None:
        """End the session's agent (session/close first where supported) and free its slot."""
        agent, acp_session = self.detach_agent(live)
        if agent is not None:
            await agent.close(acp_session_id=acp_session)

    def detach_agent(self, live: LiveSession) -> tuple[AgentProcess | None, str | None]:
        """Take the agent off the session and free its slot, synchronously."""
        agent, acp_session = live.agent, live.acp_session_id
        live.agent, live.acp_session_id = None, None
        self._slots.discard(live)
        return agent, acp_session

    def retire_agent(self, live: LiveSession, grace: float) -> None:
        """Detach the session's agent now and end it in the background (owned, awaited at
        shutdown): session/close, stdin EOF, then TERM and KILL of its group within `grace`s."""
        agent, acp_session = self.detach_agent(live)
        if agent is not None:
            self.retire(agent, acp_session, grace)

    def retire(self, agent: AgentProcess, acp_session: str | None, grace: float) -> None:
        """End a detached agent in the background (see retire_agent)."""
        self._retiring.add(agent)

        async def close() -> None:
            try:
                await agent.close(grace, acp_session_id=acp_session)
            finally:
                self._retiring.discard(agent)

        self.agent_tasks.spawn(close(), name=f"agent-close-{agent.pid}")

    # -- new_session ---------------------------------------------------------------------------

    # -- prompt --------------------------------------------------------------------------------

    # -- cancel and permissions ----------------------------------------------------------------

    # -- policy, model, config -----------------------------------------------------------------

    # -- session resources ---------------------------------------------------------------------

    async def delete_session(self, session_id: str) -> None:
        """Cancel a running turn, end the agent's process group, archive the session."""
        await self.lifecycle.delete_session(session_id)

    async def discard_worktree(self, session_id: str) -> WorktreeDiscarded:
        return await self.lifecycle.discard_worktree(session_id)

    # -- reads ---------------------------------------------------------------------------------

    async def _read(self, fn: Callable[[Any], T]) -> T:
        try:
            return await self.store.read(fn)
        except DomainError:
            raise
        except Exception as exc:
            raise StoreUnavailableError(f"couldn't read sessions: {exc}") from exc

    async def list_sessions(self) -> list[SessionSnapshot]:
        records = await self._read(lambda r: r.sessions.list_active())
        return [rec.snapshot() for rec in records]

    async def sessions_frame(self, session: str | None = None) -> tuple[list[SessionSnapshot], int]:
        """The welcome snapshot and the log position it reflects, from one read transaction."""

        def read(r: Any) -> tuple[list[SessionRecord], int]:
            if session is None:
                records = r.sessions.list_active()
            else:  # one row by key, not the whole list filtered
                record = r.sessions.get(session)
                records = [record] if record is not None and not record.archived else []
            return records, r.events.last_seq()

        records, through = await self._read(read)
        return [rec.snapshot() for rec in records], through

    async def get_session(self, session_id: str) -> SessionSnapshot:
        record: SessionRecord | None = await self._read(lambda r: r.sessions.get(session_id))
        if record is None or record.archived:  # a deleted session is gone (API.md §4)
            raise SessionNotFoundError("no such session", session=session_id)
        return record.snapshot()

    async def transcript_page(
        self, session_id: str, before: int | None, limit: int | None, request_id: str | None
    ) -> TranscriptPage:
        def read(r: Any) -> TranscriptPage:
            if r.sessions.get(session_id) is None:
                raise SessionNotFoundError(
                    "no such session", session=session_id, request_id=request_id
                )
            return read_page(r, session_id, before, limit, request_id)

        return await self._read(read)

    async def prompt_preview(self, session_id: str, doc: Doc) -> PromptPreview:
        record: SessionRecord | None = await self._read(lambda r: r.sessions.get(session_id))
        if record is None:
            raise SessionNotFoundError("no such session", session=session_id)
        return await self.turns.compile(record.cwd, doc)

    async def worktree_baselines(self, cwd: str) -> list[BaselineChoice]:
        options = await preview_baselines_async(resolve_cwd(cwd))
        return [
            BaselineChoice(
                kind=o.kind.value, resolved=o.resolved, unavailable_reason=o.unavailable_reason
            )
            for o in options
        ]

    def list_providers(self) -> list[dict[str, Any]]:
        return [p.wire() for p in self.providers.list()]

    def list_skills(self, cwd: str | None) -> list[dict[str, Any]]:
        return [s.model_dump(mode="json") for s in self.skills.list(cwd)]
