"""Turns Ops into Events: the one place that sequences a session's state changes.

Every op either raises a `DomainError` (after broadcasting the protocol's `error` event where
the protocol says the outcome is an event) or returns an outcome from core/outcomes.py.
Prompt turns run in supervised tasks that outlive the request that started them (API.md §3).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from core.activity import INTERRUPTED, LiveTurn, is_busy
from core.agents.client import AgentProcess
from core.agents.updates import AgentError
from core.errors import (
    CapacityError,
    DomainError,
    InvalidCwdError,
    InvalidOptionError,
    OperationFailedError,
    PermissionNotPendingError,
    SessionNotFoundError,
    SessionUnavailableError,
    StoreUnavailableError,
    TurnAlreadyRunningError,
    TurnFailedError,
)
from core.live import LiveSession
from core.outcomes import (
    AnswerResult,
    BaselineChoice,
    CancelResult,
    ConfigResult,
    ModelResult,
    PolicyResult,
    PromptAccepted,
    PromptPreview,
    TranscriptPage,
    WorktreeDiscarded,
)
from core.prompts import canonical_text, compile_prompt, derive_title, display_text
from core.protocol import (
    AnswerPermissionOp,
    CancelOp,
    ConfigOptions,
    Doc,
    ErrorEvent,
    Event,
    ExecutionPolicy,
    ExecutionPolicyChanged,
    FailedState,
    IdleState,
    Models,
    NewSessionOp,
    Op,
    PermissionMode,
    PromptOp,
    PromptPart,
    RunningState,
    SandboxPolicy,
    SessionActivityChanged,
    SessionCreated,
    SessionRefBlock,
    SessionSnapshot,
    SessionTitleChanged,
    SetConfigOptionOp,
    SetExecutionPolicyOp,
    SetModelOp,
    SetPermissionModeOp,
    SetSandboxOp,
    TurnEnded,
    TurnStarted,
    WorktreeBase,
    provider_key,
)
from core.providers import ProviderRegistry, ProviderUnavailableError
from core.session import SessionRecord
from core.skills import SkillLibrary
from core.store.database import Store, UnitOfWork
from core.supervisor import Supervisor
from core.transcript import read_page, referenced_chat_context
from core.turns import SessionHandler, commit_activity, commit_turn_state
from core.worktrees import (
    create_worktree_async,
    discard_worktree_async,
    preview_baselines_async,
    validate_worktree_async,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
DISCARDED = (
    "session worktree was permanently discarded; start a new session from the source project"
)


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
        self._live: dict[str, LiveSession] = {}
        self._handlers: dict[str, SessionHandler] = {}
        self._turns = Supervisor("turn")
        self._closing = False

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

        recovered = await self.store.write(recover)
        if recovered:
            log.info("marked %d interrupted turn(s) as failed", recovered)

    async def shutdown(self) -> None:
        """End turns (terminal error, never turn_ended), then close every agent."""
        self._closing = True
        for live in self._live.values():
            if live.turn is not None:
                live.turn.drain()
        await self._turns.close()
        await asyncio.gather(*(self._close_agent(live) for live in self._live.values()))

    # -- dispatch ------------------------------------------------------------------------------

    async def submit(self, op: Op) -> Any:
        """Apply one op; returns its outcome or raises a DomainError."""
        match op:
            case NewSessionOp():
                return await self.new_session(op)
            case PromptOp():
                return await self.prompt(op)
            case CancelOp():
                return await self.cancel(op.session)
            case AnswerPermissionOp():
                return await self.answer_permission(op)
            case SetExecutionPolicyOp():
                return await self.set_policy(op.session, op.mode, op.sandbox, op.request_id)
            case SetPermissionModeOp():
                return await self.set_policy(op.session, op.mode, None, None)
            case SetSandboxOp():
                return await self.set_policy(op.session, None, op.sandbox, None)
            case SetModelOp():
                return await self.set_model(op)
            case SetConfigOptionOp():
                return await self.set_config_option(op)
        raise AssertionError(f"unhandled op {op!r}")  # pragma: no cover

    # -- helpers -------------------------------------------------------------------------------

    async def _emit(self, *events: Event) -> None:
        def write(uow: UnitOfWork) -> None:
            for ev in events:
                uow.emit(ev)

        await self.store.write(write)

    async def _reject(self, error: DomainError, *, terminal: bool) -> DomainError:
        """Broadcast `error` as the protocol's error event, then hand it back to raise."""
        try:
            await self._emit(
                ErrorEvent(
                    session=error.session,
                    message=error.message,
                    terminal=terminal,
                    request_id=error.request_id,
                )
            )
        except Exception:
            log.exception("could not broadcast error event")
        return error

    async def _load(self, session_id: str, request_id: str | None = None) -> LiveSession:
        live = self._live.get(session_id)
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
        return self._live.setdefault(session_id, LiveSession(record=record))

    def _handler(self, live: LiveSession) -> SessionHandler:
        handler = self._handlers.get(live.id)
        if handler is None:
            handler = self._handlers[live.id] = SessionHandler(live, self.store)
        return handler

    async def _spawn_agent(self, live: LiveSession) -> AgentProcess:
        """Start the session's agent (capacity-checked); raises ProviderUnavailableError."""
        await self._make_room()
        entry = self.providers.get(live.record.provider)
        entry.check_available()
        try:
            agent = await AgentProcess.start(entry.launch(live.record.cwd), self._handler(live))
        except AgentError as exc:
            raise ProviderUnavailableError(
                f"couldn't start provider {entry.display_name}: {exc}", session=live.id
            ) from exc
        live.agent, live.acp_session_id = agent, None
        return agent

    async def _make_room(self) -> None:
        running = [live for live in self._live.values() if live.agent_alive]
        if len(running) < self.max_live_agents:
            return
        idle = [live for live in running if live.turn is None]
        if not idle:
            raise CapacityError(f"all {self.max_live_agents} live agents are busy", retry_after=5)
        await self._close_agent(min(idle, key=lambda live: live.last_used))

    async def _close_agent(self, live: LiveSession) -> None:
        agent, live.agent, live.acp_session_id = live.agent, None, None
        if agent is not None:
            await agent.close()

    # -- new_session ---------------------------------------------------------------------------

    async def new_session(self, op: NewSessionOp) -> SessionSnapshot:
        rid = op.request_id
        try:
            return await self._create(op)
        except DomainError as exc:
            # Creation errors are terminal, not session-scoped, and correlated (§3.6).
            exc.session, exc.request_id = None, rid
            raise await self._reject(exc, terminal=True) from None

    async def _create(self, op: NewSessionOp) -> SessionSnapshot:
        key = provider_key(op.provider)
        self.providers.get(key)  # unknown provider fails before touching the disk
        source = _resolve_cwd(op.cwd)
        session_id = str(uuid.uuid4())
        record = SessionRecord(
            id=session_id,
            provider=key,
            cwd=source,
            project_path=source,
            policy=op.initial_policy or SessionRecord.policy,
        )
        created = None
        if op.use_worktree:
            created = await create_worktree_async(
                source,
                session_id,
                op.worktree_base or WorktreeBase.CURRENT,
                op.worktree_base_sha,
                self.home / "worktrees",
            )
            record = record.evolve(
                cwd=created.cwd,
                project_path=created.project_path,
                worktree_path=created.worktree_path,
                worktree_baseline=created.baseline,
                worktree_identity=created.identity,
            )
        live = LiveSession(record=record)
        try:
            await self._spawn_agent(live)
            created_event = SessionCreated(
                session=session_id,
                cwd=record.cwd,
                project_path=record.project_path,
                worktree_path=record.worktree_path,
                worktree_baseline=record.worktree_baseline,
                request_id=op.request_id,
            )

            def persist(uow: UnitOfWork) -> None:
                uow.sessions.insert(record)
                uow.emit(created_event)

            try:
                await self.store.write(persist)
            except Exception as exc:
                raise TurnFailedError(f"couldn't persist new session: {exc}") from exc
        except BaseException:
            await self._close_agent(live)
            self._handlers.pop(session_id, None)
            if created is not None:
                await discard_worktree_async(created)
            raise
        self._live[session_id] = live
        return record.snapshot()

    # -- prompt --------------------------------------------------------------------------------

    async def prompt(self, op: PromptOp) -> PromptAccepted:
        rid = op.request_id
        try:
            live = await self._load(op.session, rid)
            await self._check_checkout(live.record, rid)
        except DomainError as exc:
            raise await self._reject(exc, terminal=True) from None
        async with live.lock:
            if live.turn is not None or is_busy(live.record.activity):
                raise await self._reject(
                    TurnAlreadyRunningError(
                        "a turn is already running for this session",
                        session=live.id,
                        request_id=rid,
                    ),
                    terminal=False,
                )
            turn = LiveTurn(turn_id=str(uuid.uuid4()), request_id=rid)
            live.turn = turn
            try:
                seq = await self._accept(live, turn, op)
            except Exception as exc:
                live.turn = None  # release the slot silently: the next prompt can start
                error = TurnFailedError(
                    f"couldn't persist prompt: {exc}", session=live.id, request_id=rid
                )
                raise await self._reject(error, terminal=True) from exc
            turn.accepted = True
        live.touch()
        self._turns.spawn(self._run_turn(live, turn, op.doc), name=f"turn-{live.id}")
        return PromptAccepted(
            session=live.id, request_id=rid, turn_id=turn.turn_id, transcript_seq=seq
        )

    async def _check_checkout(self, record: SessionRecord, rid: str | None) -> None:
        if record.worktree_discarded:
            raise SessionUnavailableError(DISCARDED, session=record.id, request_id=rid)
        if record.worktree_identity is not None:
            try:
                await validate_worktree_async(record.worktree_identity)
            except DomainError as exc:
                exc.session, exc.request_id = record.id, rid
                raise
        elif not os.path.isdir(record.cwd):
            raise SessionUnavailableError(
                f"session working directory is unavailable: {record.cwd}",
                session=record.id,
                request_id=rid,
            )

    async def _accept(self, live: LiveSession, turn: LiveTurn, op: PromptOp) -> int:
        """Commit the canonical prompt, the first running revision, title and turn_started in
        one transaction (protocol: turn_started); returns the prompt's transcript seq."""
        canonical = canonical_text(op.doc)
        prompt_part = PromptPart(text=canonical, display=display_text(canonical))
        title = derive_title(op.doc, canonical) if live.record.title_origin == "default" else None
        if title is not None:
            live.record = live.record.evolve(title=title, title_origin="automatic")
        titled = live.record
        seq_box: list[int] = []

        def append_prompt(uow: UnitOfWork) -> None:
            seq_box.append(uow.parts.append(live.id, "user", prompt_part))
            if title is not None:
                uow.sessions.update(titled, ("title",))

        extra: list[Event] = []
        if title is not None:
            extra.append(SessionTitleChanged(session=live.id, title=title))

        def started(uow: UnitOfWork) -> None:
            uow.emit(
                TurnStarted(session=live.id, request_id=turn.request_id, transcript_seq=seq_box[0])
            )

        await commit_activity(
            self.store,
            live,
            RunningState(turn_id=turn.turn_id, prompt_request_id=turn.request_id),
            extra=tuple(extra),
            before=(append_prompt,),
            after=(started,),
        )
        return seq_box[0]

    async def _run_turn(self, live: LiveSession, turn: LiveTurn, doc: Doc) -> None:
        handler = self._handler(live)
        rid = turn.request_id
        try:
            agent = live.agent if live.agent_alive else None
            if agent is None:
                agent = await self._revive(live)
            text = await self._compile_for_turn(live, doc, rid)
            acp_session = await self._ensure_acp_session(live, agent, rid)
            stop = await agent.prompt(acp_session, text)
        except asyncio.CancelledError:
            await handler.flush()
            await self._end_turn(
                live,
                turn,
                FailedState(turn_id=turn.turn_id, reason="interrupted", message=INTERRUPTED),
                ErrorEvent(session=live.id, message=INTERRUPTED, terminal=True, request_id=rid),
            )
            raise
        except (AgentError, DomainError) as exc:
            message = exc.message if isinstance(exc, DomainError) else str(exc)
            await handler.flush()
            await self._end_turn(
                live,
                turn,
                FailedState(turn_id=turn.turn_id, reason="provider_error", message=message),
                ErrorEvent(session=live.id, message=message, terminal=True, request_id=rid),
            )
            return
        await handler.flush()
        await self._end_turn(live, turn, IdleState(), TurnEnded(session=live.id, stop_reason=stop))

    async def _end_turn(
        self, live: LiveSession, turn: LiveTurn, state: IdleState | FailedState, closing: Event
    ) -> None:
        """Release the slot, cancel what is still parked, then commit the terminal activity and
        its closing event together; holding the lock keeps a new prompt out until committed."""
        async with live.lock:
            if live.turn is not turn:
                return  # a stale owner never ends a newer turn
            turn.drain()
            live.turn = None
            try:
                await commit_activity(self.store, live, state, extra=(closing,))
            except Exception:
                log.exception("could not persist the end of a turn for %s", live.id)
        live.touch()

    async def _revive(self, live: LiveSession) -> AgentProcess:
        await self._close_agent(live)
        agent = await self._spawn_agent(live)
        record = live.record
        if record.models is not None:
            await self._emit(
                Models(
                    session=live.id, available=record.models.available, current=record.model or ""
                )
            )
        return agent

    async def _ensure_acp_session(
        self, live: LiveSession, agent: AgentProcess, rid: str | None
    ) -> str:
        """Lazily create (or restore) the ACP session on the first prompt (§3.3 step 5)."""
        if live.acp_session_id is not None:
            return live.acp_session_id
        record = live.record
        info = None
        if agent.supports_load_session and record.acp_session_id:
            try:
                info = await agent.load_session(record.acp_session_id, record.cwd)
            except AgentError as exc:
                await self._emit(
                    ErrorEvent(
                        session=live.id,
                        message=(
                            f"couldn't restore this session's saved context (session/load: {exc}); "
                            "the transcript is kept, but the agent is starting with a fresh memory"
                        ),
                        terminal=False,
                        request_id=rid,
                    )
                )
        if info is None:
            info = await agent.new_session(record.cwd)
        models = info.models
        if models is not None and record.model and record.model != models.current:
            try:
                await agent.set_model(info.acp_session_id, record.model)
                models = models.model_copy(update={"current": record.model})
            except AgentError as exc:
                await self._emit(
                    ErrorEvent(
                        session=live.id,
                        message=f"{record.model} wasn't accepted: {exc}",
                        terminal=False,
                        request_id=rid,
                    )
                )
        updated = record.evolve(
            acp_session_id=info.acp_session_id,
            models=models if models is not None else record.models,
            config_options=info.config_options or record.config_options,
        )
        events: list[Event] = []
        if models is not None and models.available:
            events.append(
                Models(session=live.id, available=models.available, current=models.current)
            )
        if info.config_options:
            events.append(ConfigOptions(session=live.id, options=info.config_options))

        def persist(uow: UnitOfWork) -> None:
            uow.sessions.update(updated, ("acp_session_id", "models", "config_options"))
            for ev in events:
                uow.emit(ev)

        await self.store.write(persist)
        live.record = live.record.evolve(
            acp_session_id=updated.acp_session_id,
            models=updated.models,
            config_options=updated.config_options,
        )
        live.acp_session_id = info.acp_session_id
        return info.acp_session_id

    async def _compile_for_turn(self, live: LiveSession, doc: Doc, rid: str | None) -> str:
        preview = await self._compile(live.record.cwd, doc)
        if preview.unresolved:
            await self._emit(
                *(
                    ErrorEvent(
                        session=live.id, message=f"unresolved: {u}", terminal=False, request_id=rid
                    )
                    for u in preview.unresolved
                )
            )
        return preview.prompt

    async def _compile(self, cwd: str, doc: Doc) -> PromptPreview:
        """The one compiler behind both the real prompt and the preview (API.md §4)."""
        refs = {b.session_id for b in doc if isinstance(b, SessionRefBlock)}
        contexts: dict[str, str | None] = {}
        for ref in refs:
            contexts[ref] = await self.store.read(
                lambda r, ref=ref: referenced_chat_context(r, ref)  # type: ignore[misc]
            )
        compiled = await asyncio.to_thread(
            compile_prompt, doc, skills=self.skills, cwd=cwd, chat_context=contexts.get
        )
        return PromptPreview(prompt=compiled.text, unresolved=compiled.unresolved)

    # -- cancel and permissions ----------------------------------------------------------------

    async def cancel(self, session_id: str) -> CancelResult:
        live = await self._load(session_id)
        async with live.lock:
            turn = live.turn
            if turn is None:
                return CancelResult(session=session_id, cancelled=False)
            # Drain every parked input (answered cancelled) before the provider cancel (§3.5).
            if turn.parked:
                turn.drain()
                await commit_turn_state(self.store, live)
        if live.agent is not None and live.acp_session_id is not None:
            await live.agent.cancel(live.acp_session_id)
        return CancelResult(session=session_id, cancelled=True)

    async def answer_permission(self, op: AnswerPermissionOp) -> AnswerResult:
        live = self._live.get(op.session)
        if live is None:
            raise PermissionNotPendingError("no such pending permission", session=op.session)
        async with live.lock:
            turn = live.turn
            parked = turn.parked.get(op.request_id) if turn is not None else None
            if turn is None or parked is None:
                raise PermissionNotPendingError(
                    f"permission {op.request_id} is not pending", session=op.session
                )
            offered = {oid for oid, _label in parked.pending.options}
            if op.option_id is not None and op.option_id not in offered:
                raise InvalidOptionError(
                    f"option {op.option_id!r} was not offered", session=op.session
                )
            del turn.parked[op.request_id]
            try:
                await commit_turn_state(self.store, live)
            except Exception:
                turn.parked[op.request_id] = parked
                raise
            parked.reply.set_result(op.option_id)
        return AnswerResult(applied=True)

    # -- policy, model, config -----------------------------------------------------------------

    async def set_policy(
        self,
        session_id: str,
        mode: PermissionMode | None,
        sandbox: SandboxPolicy | None,
        request_id: str | None,
    ) -> PolicyResult:
        """Atomic two-axis write: persisted, applied live, then broadcast (§2.3)."""
        try:
            live = await self._load(session_id, request_id)
        except SessionNotFoundError as exc:
            exc.message = "couldn't update execution policy: no such session"
            raise await self._reject(exc, terminal=False) from None
        async with live.lock:
            current = live.record.policy
            policy = ExecutionPolicy(mode=mode or current.mode, sandbox=sandbox or current.sandbox)
            record = live.record.evolve(policy=policy)
            try:
                await self.store.write(lambda uow: uow.sessions.update(record, ("policy",)))
            except Exception as exc:
                error = OperationFailedError(
                    f"couldn't persist execution policy: {exc}",
                    session=session_id,
                    request_id=request_id,
                )
                raise await self._reject(error, terminal=False) from exc
            # The permission handler reads live.record.policy: it now holds the new pair.
            live.record = live.record.evolve(policy=policy)
            await self._emit(
                ExecutionPolicyChanged(session=session_id, policy=policy, request_id=request_id)
            )
        return PolicyResult(session=session_id, policy=policy, request_id=request_id)

    async def set_model(self, op: SetModelOp) -> ModelResult:
        try:
            live = await self._load(op.session)
        except SessionNotFoundError as exc:
            exc.message = "couldn't change model: no such session"
            raise await self._reject(exc, terminal=False) from None
        async with live.lock:
            if live.agent_alive and live.acp_session_id is not None:
                assert live.agent is not None
                try:
                    await self._apply_model(live, live.agent, live.acp_session_id, op.model)
                except AgentError as exc:
                    error = OperationFailedError(
                        f"this agent can't switch models mid-session ({exc}); "
                        f"start a new session to use {op.model}",
                        session=op.session,
                    )
                    raise await self._reject(error, terminal=False) from exc
            models = live.record.models
            if models is not None:
                models = models.model_copy(update={"current": op.model})
            record = live.record.evolve(model=op.model, models=models)
            events: list[Event] = []
            if models is not None:
                events.append(
                    Models(session=op.session, available=models.available, current=op.model)
                )

            def persist(uow: UnitOfWork) -> None:
                uow.sessions.update(record, ("model", "models"))
                for ev in events:
                    uow.emit(ev)

            try:
                await self.store.write(persist)
            except Exception as exc:
                error = OperationFailedError(
                    f"couldn't persist model change: {exc}", session=op.session
                )
                raise await self._reject(error, terminal=False) from exc
            live.record = live.record.evolve(model=op.model, models=models)
        return ModelResult(session=op.session, current=op.model)

    async def _apply_model(
        self, live: LiveSession, agent: AgentProcess, acp_session: str, model: str
    ) -> None:
        # Prefer the agent's model config option when it has one (issue: set_model).
        option = next((o for o in live.record.config_options if o.category == "model"), None)
        if option is not None:
            options = await agent.set_config_option(acp_session, option.id, model)
            live.record = live.record.evolve(config_options=options)
        else:
            await agent.set_model(acp_session, model)

    async def set_config_option(self, op: SetConfigOptionOp) -> ConfigResult:
        live = self._live.get(op.session)
        if live is None or not live.agent_alive or live.acp_session_id is None:
            error = OperationFailedError(
                f"can't set {op.config_id} before the session's first prompt", session=op.session
            )
            raise await self._reject(error, terminal=False)
        assert live.agent is not None
        async with live.lock:
            try:
                options = await live.agent.set_config_option(
                    live.acp_session_id, op.config_id, op.value
                )
            except AgentError as exc:
                error = OperationFailedError(
                    f"{op.config_id} can't be changed here: {exc}", session=op.session
                )
                raise await self._reject(error, terminal=False) from exc
            model_option = next((o for o in options if o.category == "model"), None)
            changes: dict[str, Any] = {"config_options": options}
            if model_option is not None and model_option.current:
                changes["model"] = model_option.current
            record = live.record.evolve(**changes)

            def persist(uow: UnitOfWork) -> None:
                uow.sessions.update(record, ("config_options", "model"))
                uow.emit(ConfigOptions(session=op.session, options=options))

            await self.store.write(persist)
            live.record = live.record.evolve(**changes)
        return ConfigResult(session=op.session, options=options)

    # -- session resources ---------------------------------------------------------------------

    async def delete_session(self, session_id: str) -> None:
        """Cancel a running turn, end the agent's process group, archive the session."""
        live = await self._load(session_id)
        if live.turn is not None:
            await self.cancel(session_id)
            await self._turns.cancel(f"turn-{session_id}")
        await self._close_agent(live)
        async with live.lock:
            record = live.record.evolve(archived=True)
            await self.store.write(lambda uow: uow.sessions.update(record, ("archived",)))
        self._live.pop(session_id, None)
        self._handlers.pop(session_id, None)

    async def discard_worktree(self, session_id: str) -> WorktreeDiscarded:
        live = await self._load(session_id)
        async with live.lock:
            if live.turn is not None:
                raise TurnAlreadyRunningError(
                    "a turn is running; cancel it before discarding the worktree",
                    session=session_id,
                )
            identity = live.record.worktree_identity
            if identity is None or live.record.worktree_discarded:
                raise SessionUnavailableError(
                    "this session has no worktree to discard", session=session_id
                )
            await self._close_agent(live)  # its cwd is about to disappear
            result = await discard_worktree_async(identity)
            record = live.record.evolve(worktree_discarded=True)
            await self.store.write(lambda uow: uow.sessions.update(record, ("worktree_discarded",)))
            live.record = record
        return WorktreeDiscarded(
            session=session_id,
            worktree_path=record.worktree_path,
            removed_checkout=result.removed_checkout,
            deleted_branch=result.deleted_branch,
        )

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
            records = r.sessions.list_active()
            if session is not None:
                records = [rec for rec in records if rec.id == session]
            return records, r.events.last_seq()

        records, through = await self._read(read)
        return [rec.snapshot() for rec in records], through

    async def get_session(self, session_id: str) -> SessionSnapshot:
        record: SessionRecord | None = await self._read(lambda r: r.sessions.get(session_id))
        if record is None:
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
        return await self._compile(record.cwd, doc)

    async def worktree_baselines(self, cwd: str) -> list[BaselineChoice]:
        options = await preview_baselines_async(_resolve_cwd(cwd))
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


def _resolve_cwd(raw: str) -> str:
    """Empty → ".", relative → absolute, must be an existing directory (§8.2)."""
    path = Path(raw.strip() or ".").expanduser()
    absolute = path if path.is_absolute() else Path.cwd() / path
    if "\x00" in raw or not absolute.is_dir():
        raise InvalidCwdError(f"working directory “{absolute}” doesn't exist")
    return str(absolute.resolve())
