"""Prompt turns: acceptance (prompt row + running revision + turn_started in one commit), the
supervised turn task (revive, compile, lazy ACP session, prompt), its end, cancel and answers
to parked permissions (protocol: turn_started, Durable session activity, Permission parking).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from typing import TYPE_CHECKING, Any, Literal

from core.acp_sessions import (
    ADOPTED_FIELDS,
    adopt,
    agent_failure,
    apply_mode,
    apply_model,
    mode_option,
    model_option,
    open_new,
    restore,
    state_events,
)
from core.activity import INTERRUPTED, LiveTurn, is_busy
from core.agents.client import AgentProcess
from core.agents.updates import AgentError
from core.errors import (
    DomainError,
    InvalidOptionError,
    PermissionNotPendingError,
    SessionUnavailableError,
    TurnAlreadyRunningError,
    TurnFailedError,
)
from core.live import LiveSession
from core.outcomes import (
    AnswerResult,
    CancelResult,
    PromptAccepted,
    PromptPreview,
)
from core.prompts import canonical_text, compile_prompt, derive_title, display_text
from core.protocol import (
    AnsweredBy,
    AnswerPermissionOp,
    Doc,
    ErrorEvent,
    Event,
    FailedState,
    IdleState,
    PromptOp,
    PromptPart,
    RunningState,
    SessionRefBlock,
    SessionTitleChanged,
    StopReason,
    TurnEnded,
    TurnStarted,
)
from core.session import SessionRecord
from core.store.database import UnitOfWork
from core.transcript import referenced_chat_context
from core.turns import SessionHandler, commit_activity, record_resolution
from core.worktrees import (
    validate_worktree_async,
)

if TYPE_CHECKING:
    from core.engine import Engine

log = logging.getLogger(__name__)
GRANTS_RESET = (
    "the execution policy became stricter, so the agent was restarted to drop the permissions "
    "granted to it; it can't restore this session's context, so it starts with a fresh memory "
    "(the transcript is kept)"
)
# How long an agent may take to honour session/cancel before c2 ends the turn `cancelled`
# itself and restarts the agent (it is revived on the next prompt).
CANCEL_GRACE_SECONDS = 5.0
CANCEL_CLOSE_GRACE = 1.0  # per step when ending that agent (EOF, then SIGTERM)
DISCARDED = (
    "session worktree was permanently discarded; start a new session from the source project"
)


class TurnFlow:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._escalations: set[str] = set()  # turn ids with a cancel deadline running
        self._tasks: dict[str, asyncio.Task[Any]] = {}  # turn id -> its running task

    async def prompt(self, op: PromptOp) -> PromptAccepted:
        rid = op.request_id
        try:
            live = await self.engine.load(op.session, rid)
            await self._check_checkout(live.record, rid)
            await self.engine.usage.admit(live.id, rid)  # 409 budget_exceeded
            if not live.agent_alive:
                await self.engine.make_room()  # refuse (503 capacity) before turn_started
        except DomainError as exc:
            raise await self.engine.reject(exc, terminal=True) from None
        async with live.lock:
            if live.turn is not None or is_busy(live.record.activity):
                raise await self.engine.reject(
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
                raise await self.engine.reject(error, terminal=True) from exc
            turn.accepted = True
        live.touch()
        task = self.engine.turn_tasks.spawn(
            self._run_turn(live, turn, op.doc), name=f"turn-{live.id}"
        )
        self._tasks[turn.turn_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(turn.turn_id, None))
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
        titled = live.record.evolve(title=title or live.record.title, title_origin="automatic")
        seq_box: list[int] = []

        def append_prompt(uow: UnitOfWork) -> None:
            turn.number = uow.parts.count_user_rows(live.id) + 1  # issue 14: from 1
            seq_box[:] = [uow.parts.append(live.id, "user", prompt_part)]
            if title is not None:
                uow.sessions.update(titled, ("title",))

        extra: list[Event] = []
        if title is not None:
            extra.append(SessionTitleChanged(session=live.id, title=title))

        def started(uow: UnitOfWork) -> None:
            uow.emit(
                TurnStarted(
                    session=live.id,
                    request_id=turn.request_id,
                    transcript_seq=seq_box[0],
                    turn=turn.number,
                    primed_from=self.engine.forks.primed_from(live.record),  # issue 14
                )
            )

        await commit_activity(
            self.engine.store,
            live,
            RunningState(turn_id=turn.turn_id, prompt_request_id=turn.request_id),
            extra=tuple(extra),
            before=(append_prompt,),
            after=(started,),
        )
        if title is not None:
            live.record = live.record.evolve(title=title, title_origin="automatic")
        return seq_box[0]

    async def _run_turn(self, live: LiveSession, turn: LiveTurn, doc: Doc) -> None:
        handler = self.engine.handler_for(live)
        handler.take_lost_writes()  # a loss between turns is not this turn's
        rid = turn.request_id
        try:
            await self.engine.checkpoints.turn_started(live, turn.number)  # issue 14
            agent = live.agent if live.agent_alive and not live.needs_acp_restart else None
            if agent is None:
                restarting = live.needs_acp_restart
                live.needs_acp_restart = live.agent_grants = False  # a new process holds none
                agent = await self._revive(live)
                if restarting and not agent.supports_load_session:
                    await self.engine.emit(
                        ErrorEvent(
                            session=live.id, message=GRANTS_RESET, terminal=False, request_id=rid
                        )
                    )
            text = await self._compile_for_turn(live, doc, rid)
            text = await self.engine.forks.prime(live, text)  # issue 14: a primed fork
            acp_session = await self._ensure_acp_session(live, agent, rid)
            if turn.cancel_requested:
                # Cancelled while the agent was starting: there was no ACP session to tell.
                stop = StopReason.CANCELLED
            else:
                stop = await agent.prompt(acp_session, text)
        except asyncio.CancelledError:
            await self._flush(handler)
            await self._fail_turn(live, turn, "interrupted", INTERRUPTED)
            raise
        except (AgentError, DomainError) as exc:
            await self._flush(handler)
            if isinstance(exc, AgentError):
                self.engine.providers.observe_auth(live.record.provider, required=exc.auth_required)
                error = agent_failure(exc, TurnFailedError(exc.message, session=live.id))
            else:
                error = exc
            lost = handler.take_lost_writes()
            if lost is not None:  # a lost update explains more than the agent's failure
                await self._fail_turn(live, turn, "provider_error", lost)
            else:
                await self._fail_turn(live, turn, "provider_error", error.message, error)
            return
        except Exception as exc:  # MemoryError and any bug: the turn must still end
            log.exception("turn of session %s failed unexpectedly", live.id)
            await self._flush(handler)
            message = f"turn failed: internal error ({type(exc).__name__})"
            await self._fail_turn(live, turn, "provider_error", message)
            return
        await self._flush(handler)
        lost = handler.take_lost_writes()
        if lost is not None:  # an update could not be committed: never end as if complete
            await self._fail_turn(live, turn, "provider_error", lost)
            return
        # An agent that winds down on our cancel may still say end_turn (OpenCode does).
        if turn.cancel_requested and stop is StopReason.END_TURN:
            stop = StopReason.CANCELLED
        await self._end_turn(live, turn, IdleState(), TurnEnded(session=live.id, stop_reason=stop))

    @staticmethod
    async def _flush(handler: SessionHandler) -> None:
        """Commit what the agent said so far; a failure here must not keep the turn open."""
        try:
            await handler.flush()
        except Exception:
            log.exception("could not flush the agent's last updates")

    async def _fail_turn(
        self,
        live: LiveSession,
        turn: LiveTurn,
        reason: Literal["interrupted", "provider_error"],
        message: str,
        error: DomainError | None = None,
    ) -> None:
        """Failed activity, then the correlated terminal error (never turn_ended); an auth
        refusal's code and authMethods and the agent's stderr tail ride on the event."""
        details = error.details if error is not None else {}
        event = ErrorEvent(
            session=live.id,
            message=message,
            terminal=True,
            request_id=turn.request_id,
            code=error.code if error is not None and error.code != TurnFailedError.code else None,
            auth_methods=details.get("auth_methods"),
            stderr_tail=details.get("stderr_tail"),
        )
        await self._end_turn(
            live,
            turn,
            FailedState(turn_id=turn.turn_id, reason=reason, message=message),
            event,
        )

    async def _end_turn(
        self, live: LiveSession, turn: LiveTurn, state: IdleState | FailedState, closing: Event
    ) -> None:
        """Release the slot, cancel what is still parked, then commit the terminal activity and
        its closing event together; holding the lock keeps a new prompt out until committed."""
        async with live.lock:
            if live.turn is not turn:
                return  # a stale owner never ends a newer turn
            # What is still parked is answered cancelled by c2 itself, before the turn ends.
            resolved = tuple(record_resolution(live.id, p, None, None) for p in turn.drain())
            live.turn = None
            try:
                # issue 14: the tree as the turn left it, on turn_ended and in the transcript
                checkpoint = await self.engine.checkpoints.turn_ended(live, turn.number)
                ended = self.engine.usage.close_turn(turn.turn_id)  # the ledger's end time
                await commit_activity(
                    self.engine.store,
                    live,
                    state,
                    extra=(checkpoint.stamp(closing),),
                    before=resolved + checkpoint.steps,
                    after=(ended,),
                )
            except Exception:
                log.exception("could not persist the end of a turn for %s", live.id)
        live.touch()
        self.engine.queue.turn_ended(live, turn, state, closing)  # issue 14: next queued prompt

    async def _revive(self, live: LiveSession) -> AgentProcess:
        await self.engine.close_agent(live)
        return await self.engine.spawn_agent(live)

    async def _ensure_acp_session(
        self, live: LiveSession, agent: AgentProcess, rid: str | None
    ) -> str:
        """The ACP session of a revived agent: resumed or loaded (else a fresh one, with a
        warning), with the session's MCP servers, its chosen model and mode re-applied."""
        if live.acp_session_id is not None:
            return live.acp_session_id
        record = live.record
        chosen_model = record.current_model()
        chosen_mode = record.modes.current if record.modes is not None else ""
        info = None
        try:
            info = await restore(agent, record)
        except AgentError as exc:
            if exc.auth_required:
                raise
            await self._warn(
                live,
                rid,
                f"couldn't restore this session's saved context ({exc.message}); "
                "the transcript is kept, but the agent is starting with a fresh memory",
            )
        if info is None:
            info = await open_new(agent, record)
        updated, _ = adopt(record, info)
        # Re-apply what the session had chosen when the agent came back with something else, or
        # did not say (a resume answer may omit models/modes): setting it again is harmless.
        said_model = info.models is not None or model_option(info.config_options) is not None
        said_mode = info.modes is not None or mode_option(info.config_options) is not None
        if (
            chosen_model
            and record.models is not None
            and (not said_model or updated.current_model() != chosen_model)
        ):
            try:
                updated = await apply_model(agent, info.acp_session_id, updated, chosen_model)
            except AgentError as exc:
                await self._warn(live, rid, f"{chosen_model} wasn't accepted: {exc.message}")
        modes = updated.modes
        offered = {m.id for m in modes.available} if modes is not None else set()
        if (
            modes is not None
            and chosen_mode in offered
            and (not said_mode or modes.current != chosen_mode)
        ):
            try:
                updated = await apply_mode(agent, info.acp_session_id, updated, chosen_mode)
            except AgentError as exc:
                await self._warn(live, rid, f"mode {chosen_mode} wasn't accepted: {exc.message}")
        events = state_events(updated)

        def persist(uow: UnitOfWork) -> None:
            uow.sessions.update(updated, ADOPTED_FIELDS)
            for ev in events:
                uow.emit(ev)

        await self.engine.store.write(persist)
        adopted = {name: getattr(updated, name) for name in ADOPTED_FIELDS}
        live.record = live.record.evolve(**adopted)
        live.acp_session_id = info.acp_session_id
        return info.acp_session_id

    async def _warn(self, live: LiveSession, rid: str | None, message: str) -> None:
        await self.engine.emit(
            ErrorEvent(session=live.id, message=message, terminal=False, request_id=rid)
        )

    async def _compile_for_turn(self, live: LiveSession, doc: Doc, rid: str | None) -> str:
        preview = await self.compile(live.record.cwd, doc)
        if preview.unresolved:
            await self.engine.emit(
                *(
                    ErrorEvent(
                        session=live.id, message=f"unresolved: {u}", terminal=False, request_id=rid
                    )
                    for u in preview.unresolved
                )
            )
        return preview.prompt

    async def compile(self, cwd: str, doc: Doc) -> PromptPreview:
        """The one compiler behind both the real prompt and the preview (API.md §4)."""
        refs = {b.session_id for b in doc if isinstance(b, SessionRefBlock)}
        contexts: dict[str, str | None] = {}
        for ref in refs:
            contexts[ref] = await self.engine.store.read(
                lambda r, ref=ref: referenced_chat_context(r, ref)  # type: ignore[misc]
            )
        compiled = await asyncio.to_thread(
            compile_prompt, doc, skills=self.engine.skills, cwd=cwd, chat_context=contexts.get
        )
        return PromptPreview(prompt=compiled.text, unresolved=compiled.unresolved)

    async def cancel(self, session_id: str) -> CancelResult:
        live = await self.engine.load(session_id)
        async with live.lock:
            turn = live.turn
            if turn is None:
                return CancelResult(session=session_id, cancelled=False)
            # Drain every parked input (answered cancelled) before the provider cancel (§3.5).
            if turn.parked:
                resolved = tuple(record_resolution(live.id, p, None, None) for p in turn.drain())
                await commit_activity(self.engine.store, live, turn.state(), after=resolved)
            turn.cancel_requested = True
        if live.agent is not None and live.acp_session_id is not None:
            await live.agent.cancel(live.acp_session_id)
        if turn.turn_id not in self._escalations:
            self._escalations.add(turn.turn_id)
            self.engine.turn_tasks.spawn(
                self._escalate_cancel(live, turn), name=f"cancel-{session_id}"
            )
        return CancelResult(session=session_id, cancelled=True)

    async def _escalate_cancel(self, live: LiveSession, turn: LiveTurn) -> None:
        """A cancel the agent ignores: after the grace period end the turn `cancelled` and
        restart the agent (closed now, revived on the next prompt)."""
        try:
            await asyncio.sleep(CANCEL_GRACE_SECONDS)
            if live.turn is not turn:
                return  # the agent honoured the cancel (or the turn ended otherwise)
            # Detached before the turn ends, so a next prompt can't reuse the stuck agent; the
            # turn task then fails on the closed connection as a stale owner (no second end).
            agent, acp_session = self.engine.detach_agent(live)
            if agent is not None:
                log.warning("agent of session %s ignored cancel; restarting it", live.id)
                self.engine.retire(agent, acp_session, CANCEL_CLOSE_GRACE)
            ended = TurnEnded(session=live.id, stop_reason=StopReason.CANCELLED)
            await self._end_turn(live, turn, IdleState(), ended)
            # The task may not even have reached the agent (a slow start): it must not go on
            # to prompt after its turn ended. Cancelled now, it finds its turn ended already.
            task = self._tasks.get(turn.turn_id)
            if task is not None:
                task.cancel()
        finally:
            self._escalations.discard(turn.turn_id)

    async def answer_permission(
        self, op: AnswerPermissionOp, answered_by: AnsweredBy | None
    ) -> AnswerResult:
        """Answer a parked permission as `answered_by` (recorded in the transcript and the
        `permission_resolved` event)."""
        live = self.engine.live_sessions.get(op.session)
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
            resolved = record_resolution(live.id, parked.pending, op.option_id, answered_by)
            try:
                await commit_activity(self.engine.store, live, turn.state(), after=(resolved,))
            except Exception:
                turn.parked[op.request_id] = parked
                raise
            parked.reply.set_result(op.option_id)
        return AnswerResult(applied=True)
