"""Turns Ops into Events: the op switch over the parts that own each kind of state change,
plus the reads.

Every op either raises a `DomainError` (after broadcasting the protocol's `error` event where
the protocol says the outcome is an event) or returns an outcome from core/outcomes.py.
The engine only composes: the live-agent registry (core/live_agents.py) owns loaded sessions
and their agents; turns (core/turns.py), the lifecycle (core/lifecycle.py) and the settings
ops (core/session_options.py) each receive what they use, never the engine.

Over 300 lines: the op switch must name every op of the union (assert_never) next to the
reads clients make, and the cluster take-over check that guards them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, assert_never

from c2.core.agent_feed import AgentFeed
from c2.core.agents.factory import paced_agent_factory
from c2.core.agents.port import AgentFactory
from c2.core.checkpoints import CheckpointService, RewindResult
from c2.core.commits import interrupt_in_flight
from c2.core.errors import DomainError, SessionNotFoundError, StoreUnavailableError
from c2.core.forks import ForkService
from c2.core.lifecycle import SessionLifecycle, resolve_cwd
from c2.core.live import LiveSession
from c2.core.live_agents import LiveAgents
from c2.core.outcomes import (
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
from c2.core.processes import end_orphans
from c2.core.prompt_compiler import PromptCompiler
from c2.core.protocol.events import QueueItem
from c2.core.protocol.ops import (
    AnswerPermissionOp,
    CancelOp,
    Doc,
    EditQueuedOp,
    ForkOp,
    NewSessionOp,
    Op,
    PromptOp,
    QueuePromptOp,
    RemoveQueuedOp,
    ResumeQueueOp,
    RewindOp,
    SetConfigOptionOp,
    SetExecutionPolicyOp,
    SetModelOp,
    SetModeOp,
    SetPermissionModeOp,
    SetSandboxOp,
)
from c2.core.protocol.state import AnsweredBy, AwaitingInputState, RunningState, SessionSnapshot
from c2.core.providers import ProviderRegistry
from c2.core.queue import FollowUpQueue, QueueView
from c2.core.reporter import Reporter
from c2.core.session import SessionRecord
from c2.core.session_list import Position, SessionPage, read_session_page
from c2.core.session_options import SessionOptions
from c2.core.skills import SkillLibrary
from c2.core.store.database import ReadUnit, Store
from c2.core.store.usage import Budget
from c2.core.transcript import read_page
from c2.core.turns import TurnRunner
from c2.core.usage import UsageLedger
from c2.core.worktrees import preview_baselines_async

log = logging.getLogger(__name__)
T = TypeVar("T")
# How long a dropped session's agent gets to exit before its group is killed.
SUPERSEDED_GRACE = 1.5
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
        agent_factory: AgentFactory | None = None,
    ) -> None:
        self.store = store
        if agent_factory is None:
            agent_factory = paced_agent_factory(store.commit_interval, store.commit_paced)
        self.providers = providers or ProviderRegistry.load(home)
        self.compiler = PromptCompiler(store, skills or SkillLibrary(home / "skills"))
        reporter = Reporter(store)
        # A budget set to cancel_running cancels the turn that crossed it (late-bound: the
        # ledger is needed by the agent feeds the registry builds, turns by the ledger).
        self.usage = UsageLedger(store, lambda session: self.turns.cancel(session))
        self.live = LiveAgents(
            store,
            self.providers,
            feed=lambda live: AgentFeed(
                live,
                store,
                self.usage,
                on_park=self.queue.parked,
                on_mode=self.options.mode_switched,
            ),
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
        after a restart also drops its stale running indicator (docs/protocol.md: Durable activity).
        """
        # A cluster member recovers only its own sessions (its peers' turns are running).
        owners = None if self.store.instance_id is None else [self.store.instance_id]

        await end_orphans(self.store)
        recovered = await self.store.write(partial(interrupt_in_flight, owners=owners))
        if recovered:
            log.info("marked %d interrupted turn(s) as failed", recovered)
        await self.queue.interrupted(owners)  # issue 14: queues wait for a client after a restart

    async def drop_superseded(self) -> list[str]:
        """After this cluster member's lease lapsed (core/cluster/membership.py, before it
        joins again, while its writes are still refused): drop the live turns and agents of
        the sessions a peer took over (their turn is interrupted in the database) or adopted
        (another member owns them), writing nothing; the database holds their state now.
        Each comes back from the database on next use (its agent revived, as after a
        restart). Returns the sessions dropped."""
        me = self.store.instance_id
        loaded = list(self.live)
        if me is None or not loaded:
            return []
        ids = [live.id for live in loaded]
        records = await self.store.read(lambda r: {sid: r.sessions.get(sid) for sid in ids})
        dropped = []
        for live in loaded:
            if not _superseded(live, records.get(live.id), me):
                continue
            live.handler.detach()  # what its agent still says is not recorded
            await self.turns.abandon(live)
            self.live.retire(live, SUPERSEDED_GRACE)
            self.live.drop(live.id)
            dropped.append(live.id)
        if dropped:
            log.warning("dropped %d session(s) taken over while the lease had lapsed", len(dropped))
        return dropped

    async def shutdown(self) -> None:
        """End turns (terminal error, never turn_ended), then close every agent."""
        await self.turns.shutdown()
        await self.queue.close()
        await self.options.close()
        await self.live.shutdown()

    async def submit(self, op: Op, actor: AnsweredBy | None = None) -> Outcome:  # noqa: C901
        """Apply one op on behalf of `actor` (the device that sent it, when known): a new
        session, created or forked, takes that device's default budget; a permission answer
        records who gave it. Returns the op's outcome or raises a DomainError.

        One case per op of the union (hence its complexity), closed by `assert_never`."""
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
                return await self.forks.fork(op, actor.device_id if actor else None)
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

    async def record_of(self, session_id: str) -> SessionRecord | None:
        """`session_id`'s stored record (its owner, its worktree), None when unknown."""
        return await self._read(lambda r: r.sessions.get(session_id))

    async def list_sessions(self, limit: int | None, after: Position | None) -> SessionPage:
        """Active sessions, newest first, after a decoded cursor (core/session_list.py)."""
        return await self._read(lambda r: read_session_page(r, limit, after))

    async def get_session(self, session_id: str) -> SessionSnapshot:
        """One session's snapshot; a deleted session is not found."""
        record: SessionRecord | None = await self._read(lambda r: r.sessions.get(session_id))
        if record is None or record.archived:  # a deleted session is gone (docs/api.md §4)
            raise SessionNotFoundError("no such session", session=session_id)
        return record.snapshot()

    async def transcript_page(
        self, session_id: str, before: int | None, limit: int | None, request_id: str | None
    ) -> TranscriptPage:
        """A page of the session's transcript, whole turns, newest first (`before` pages back)."""

        def read(r: ReadUnit) -> TranscriptPage:
            if r.sessions.get(session_id) is None:
                raise SessionNotFoundError(
                    "no such session", session=session_id, request_id=request_id
                )
            return read_page(r, session_id, before, limit, request_id)

        return await self._read(read)

    async def prompt_preview(self, session_id: str, doc: Doc) -> PromptPreview:
        """What the agent would receive for `doc` in this session, and what did not resolve."""
        record: SessionRecord | None = await self._read(lambda r: r.sessions.get(session_id))
        if record is None:
            raise SessionNotFoundError("no such session", session=session_id)
        return await self.compiler.compile(record.cwd, doc)

    async def worktree_baselines(self, cwd: str) -> list[BaselineChoice]:
        """The worktree baselines `cwd` offers (current, origin_default) and why one is not."""
        options = await preview_baselines_async(resolve_cwd(cwd))
        return [
            BaselineChoice(
                kind=o.kind.value, resolved=o.resolved, unavailable_reason=o.unavailable_reason
            )
            for o in options
        ]

    def list_providers(self) -> list[dict[str, Any]]:
        """Every provider with its availability, built-ins first."""
        return [p.wire() for p in self.providers.list()]

    def list_skills(self, cwd: str | None) -> list[dict[str, Any]]:
        """The skills a prompt in `cwd` can use (the library's and the project's)."""
        return [s.model_dump(mode="json") for s in self.compiler.skills.list(cwd)]


def _superseded(live: LiveSession, record: SessionRecord | None, me: str) -> bool:
    """Whether a peer took `live` over while this member's lease had lapsed: it owns the
    session now, or the turn running here is no longer the session's running turn."""
    if record is None or record.archived or record.owner != me:
        return True
    turn = live.turn
    if turn is None:
        return False
    state = record.activity.state
    if isinstance(state, RunningState | AwaitingInputState):
        return state.turn_id != turn.turn_id
    return True
