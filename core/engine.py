"""Turns Ops into Events: the op switch over the parts that own each kind of state change,
plus the reads.

Every op either raises a `DomainError` (after broadcasting the protocol's `error` event where
the protocol says the outcome is an event) or returns an outcome from core/outcomes.py.
The engine only composes: the live-agent registry (core/live_agents.py) owns loaded sessions
and their agents; turns (core/turns.py), the lifecycle (core/lifecycle.py) and the settings
ops (core/session_options.py) each receive what they use, never the engine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, assert_never

from core.agent_feed import AgentFeed
from core.agents.client import start_agent
from core.agents.port import AgentFactory
from core.checkpoints import CheckpointService, RewindResult
from core.errors import DomainError, SessionNotFoundError, StoreUnavailableError
from core.forks import ForkService
from core.lifecycle import SessionLifecycle, resolve_cwd
from core.live_agents import LiveAgents
from core.outcomes import (
    AnswerResult,
    BaselineChoice,
    CancelResult,
    ConfigResult,
    ModelResult,
    ModeResult,
    PolicyResult,
    PromptAccepted,
    PromptPreview,
    TranscriptPage,
    WorktreeDiscarded,
)
from core.processes import end_orphans
from core.prompt_compiler import PromptCompiler
from core.protocol import (
    AnsweredBy,
    AnswerPermissionOp,
    CancelOp,
    Doc,
    EditQueuedOp,
    ForkOp,
    NewSessionOp,
    Op,
    PromptOp,
    QueueItem,
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
from core.providers import ProviderRegistry
from core.queue import FollowUpQueue, QueueView
from core.reporter import Reporter
from core.session import SessionRecord
from core.session_list import Position, SessionPage, read_session_page
from core.session_options import SessionOptions
from core.skills import SkillLibrary
from core.store.database import ReadUnit, Store, UnitOfWork
from core.store.usage import Budget
from core.transcript import read_page
from core.turns import TurnRunner
from core.usage import UsageLedger
from core.worktrees import preview_baselines_async

log = logging.getLogger(__name__)
T = TypeVar("T")
# What an op returns (core/outcomes.py; a new session answers its snapshot).
Outcome = (
    SessionSnapshot
    | PromptAccepted
    | CancelResult
    | AnswerResult
    | PolicyResult
    | ModelResult
    | ModeResult
    | ConfigResult
    | RewindResult
    | QueueItem
    | QueueView
)


class Engine:
    """Applies ops (`submit`) and serves reads; composes the parts that do the work."""

    def __init__(
        self,
        store: Store,
        home: Path,
        *,
        providers: ProviderRegistry | None = None,
        skills: SkillLibrary | None = None,
        max_live_agents: int = 32,
        agent_factory: AgentFactory = start_agent,
    ) -> None:
        self.store = store
        self.providers = providers or ProviderRegistry.load(home)
        self.compiler = PromptCompiler(store, skills or SkillLibrary(home / "skills"))
        reporter = Reporter(store)
        # A budget set to cancel_running cancels the turn that crossed it (late-bound: the
        # ledger is needed by the agent feeds the registry builds, turns by the ledger).
        self.usage = UsageLedger(store, lambda session: self.turns.cancel(session))
        self.live = LiveAgents(
            store,
            self.providers,
            feed=lambda live: AgentFeed(live, store, self.usage, on_park=self.queue.parked),
            agent_factory=agent_factory,
            max_live_agents=max_live_agents,
        )
        # issue 14: per-turn checkpoints, forks and the follow-up queue (which starts its
        # items as turns: late-bound like the ledger's cancel).
        self.checkpoints = CheckpointService(self.live, store, home / "checkpoints")
        self.forks = ForkService(self.live, store, self.checkpoints, home / "worktrees")
        self.queue = FollowUpQueue(self.live, store, lambda op: self.turns.prompt(op))
        self.turns = TurnRunner(
            self.live,
            store,
            reporter,
            self.usage,
            self.providers,
            self.compiler,
            checkpoints=self.checkpoints,
            primer=self.forks,
            after_turn=self.queue.turn_ended,
        )
        self.lifecycle = SessionLifecycle(
            self.live,
            store,
            reporter,
            self.providers,
            worktrees=home / "worktrees",
            stop_turn=self.turns.stop,
            checkpoints=self.checkpoints,
            queue=self.queue,
        )
        self.options = SessionOptions(self.live, store, reporter)

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
        await self.turns.shutdown()
        await self.queue.close()
        await self.live.shutdown()

    async def submit(self, op: Op, actor: AnsweredBy | None = None) -> Outcome:
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
                return await self.options.set_policy(op.session, op.mode, op.sandbox, op.request_id)
            case SetPermissionModeOp():
                return await self.options.set_policy(op.session, op.mode, None, None)
            case SetSandboxOp():
                return await self.options.set_policy(op.session, None, op.sandbox, None)
            case SetModelOp():
                return await self.options.set_model(op)
            case SetModeOp():
                return await self.options.set_mode(op)
            case SetConfigOptionOp():
                return await self.options.set_config_option(op)
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
            case _:  # pragma: no cover - the union is closed
                assert_never(op)

    # -- session resources ---------------------------------------------------------------------

    async def delete_session(self, session_id: str) -> None:
        """Cancel a running turn, end the agent's process group, archive the session."""
        await self.lifecycle.delete_session(session_id)

    async def discard_worktree(self, session_id: str) -> WorktreeDiscarded:
        """Remove the session's worktree for good (refused while a turn runs)."""
        return await self.lifecycle.discard_worktree(session_id)

    async def set_session_budget(self, session_id: str, budget: Budget) -> dict[str, Any]:
        """Replace a session's budget (404 for unknown or deleted sessions)."""
        live = await self.live.load(session_id)
        return await self.usage.set_session_budget(live, budget)

    # -- reads ---------------------------------------------------------------------------------

    async def _read(self, fn: Callable[[ReadUnit], T]) -> T:
        try:
            return await self.store.read(fn)
        except DomainError:
            raise
        except Exception as exc:
            raise StoreUnavailableError(f"couldn't read sessions: {exc}") from exc

    async def list_sessions(self, limit: int | None, after: Position | None) -> SessionPage:
        """Active sessions, newest first, after a decoded cursor (core/session_list.py)."""
        return await self._read(lambda r: read_session_page(r, limit, after))

    async def get_session(self, session_id: str) -> SessionSnapshot:
        record: SessionRecord | None = await self._read(lambda r: r.sessions.get(session_id))
        if record is None or record.archived:  # a deleted session is gone (API.md §4)
            raise SessionNotFoundError("no such session", session=session_id)
        return record.snapshot()

    async def transcript_page(
        self, session_id: str, before: int | None, limit: int | None, request_id: str | None
    ) -> TranscriptPage:
        def read(r: ReadUnit) -> TranscriptPage:
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
        return await self.compiler.compile(record.cwd, doc)

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
        return [s.model_dump(mode="json") for s in self.compiler.skills.list(cwd)]
