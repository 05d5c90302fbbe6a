"""Prompt turns: acceptance (prompt row + running revision + turn_started in one commit), the
supervised turn task (revive, compile, lazy ACP session, prompt), its end, cancel and answers
to parked permissions (docs/protocol.md: Events, turn_started; Durable session activity;
Permission parking).

Longer than ~300 lines on purpose: every path that starts, ends or interrupts a turn is here,
because the rules between them (one turn per session, a stale owner never ends a newer turn,
parked inputs drained before the end commits) only hold when read together.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from typing import Literal

from c2.core.acp_sessions import agent_failure, attach
from c2.core.activity import LiveTurn, is_busy
from c2.core.agents.updates import AgentError
from c2.core.checkpoints import CheckpointService
from c2.core.commits import commit_activity, record_resolution
from c2.core.errors import (
    DomainError,
    InvalidOptionError,
    PermissionNotPendingError,
    SessionNotFoundError,
    SessionUnavailableError,
    TurnAlreadyRunningError,
    TurnFailedError,
)
from c2.core.forks import ForkService
from c2.core.live import FAILING_AGENT, LiveSession, SessionFeed
from c2.core.live_agents import LiveAgents
from c2.core.outcomes import AnswerResult, CancelResult, PromptAccepted
from c2.core.prompt_compiler import PromptCompiler
from c2.core.prompts import canonical_text, derive_title, display_text
from c2.core.protocol.events import ErrorEvent, Event, SessionTitleChanged, TurnEnded, TurnStarted
from c2.core.protocol.ops import AnswerPermissionOp, Doc, PromptOp
from c2.core.protocol.state import (
    AnsweredBy,
    FailedState,
    IdleState,
    PromptPart,
    RunningState,
    RunState,
)
from c2.core.protocol.values import StopReason
from c2.core.providers import ProviderRegistry
from c2.core.reporter import Reporter
from c2.core.session import SessionRecord
from c2.core.store.database import Store, UnitOfWork
from c2.core.supervisor import Supervisor
from c2.core.usage import UsageLedger
from c2.core.worktrees import validate_worktree_async

log = logging.getLogger(__name__)
SESSION_DELETED = "the session was deleted before the turn finished"
CONTEXT_LOST = (
    "; it can't restore this session's context, so it starts with a fresh memory "
    "(the transcript is kept)"
)
# How long an agent may take to honour session/cancel before c2 ends the turn `cancelled`
# itself and restarts the agent (it is revived on the next prompt).
CANCEL_GRACE_SECONDS = 5.0
CANCEL_CLOSE_GRACE = 1.0  # per step when ending that agent (EOF, then SIGTERM)
DISCARDED = (
    "session worktree was permanently discarded; start a new session from the source project"
)


class TurnRunner:
    """Runs prompt turns: one supervised task per turn, which outlives the request that
    started it (docs/api.md §3); cancels them and answers the permissions parked in them."""

    def __init__(
        self,
        live: LiveAgents,
        store: Store,
        reporter: Reporter,
        usage: UsageLedger,
        providers: ProviderRegistry,
        compiler: PromptCompiler,
        *,
        checkpoints: CheckpointService,
        primer: ForkService,
        after_turn: Callable[[LiveSession, LiveTurn, RunState, Event], None],
    ) -> None:
        self._live = live
        self._store = store
        self._reporter = reporter
        self._usage = usage
        self._providers = providers
        self._compiler = compiler
        self._tasks = Supervisor("turn")
        # issue 14: per-turn checkpoints, the primer of a fork, the follow-up queue
        self._checkpoints = checkpoints
        self._primer = primer
        self._after_turn = after_turn
        self._escalations: set[str] = set()  # turn ids with a cancel deadline running

    async def prompt(self, op: PromptOp) -> PromptAccepted:
        """Start a turn: checks, then the prompt row, the running activity and `turn_started`
        in one commit; the turn runs in a task of its own."""
        rid = op.request_id
        try:
            live = await self._live.load(op.session, rid)
            await self._check_checkout(live.record, rid)
            await self._usage.admit(live.id, rid)  # 409 budget_exceeded
        except DomainError as exc:
            raise await self._reporter.reject(exc, terminal=True) from None
        async with live.lock:
            if live.deleted:
                raise await self._reporter.reject(
                    SessionNotFoundError("no such session", session=live.id, request_id=rid),
                    terminal=True,
                )
            if live.turn is not None or is_busy(live.record.activity):
                raise await self._reporter.reject(
                    TurnAlreadyRunningError(
                        "a turn is already running for this session",
                        session=live.id,
                        request_id=rid,
                    ),
                    terminal=False,
                )
            if not live.agent_alive:
                # Refused (503 capacity) before turn_started, or a slot held for this turn's
                # agent until its task starts it: prompts accepted at once never outnumber
                # the slots.
                try:
                    await self._live.make_room(live.id, rid)
                except DomainError as exc:
                    raise await self._reporter.reject(exc, terminal=True) from None
                self._live.reserve(live)
            elif live.needs_acp_restart:
                self._live.reserve(live)  # its own slot, kept while its agent is restarted
            turn = LiveTurn(turn_id=str(uuid.uuid4()), request_id=rid)
            live.turn = turn
            try:
                seq = await self._accept(live, turn, op)
            except Exception as exc:
                live.turn = None  # release the slot silently: the next prompt can start
                self._live.release(live)
                error = TurnFailedError(
                    f"couldn't persist prompt: {exc}", session=live.id, request_id=rid
                )
                raise await self._reporter.reject(error, terminal=True) from exc
            turn.accepted = True
        live.touch()
        turn.task = self._tasks.spawn(self._run_turn(live, turn, op.doc), name=f"turn-{live.id}")
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
        one transaction (docs/protocol.md: turn_started); returns the prompt's transcript seq."""
        canonical = canonical_text(op.doc)
        primed_from = self._primer.primed_from(live.record)  # issue 14: a primed fork
        prompt_part = PromptPart(
            text=canonical, display=display_text(canonical), primed_from=primed_from
        )
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
                    primed_from=primed_from,
                )
            )
            # The 202, kept with the turn's start: a retry never starts a second turn.
            uow.answer(
                PromptAccepted(
                    session=live.id,
                    request_id=turn.request_id,
                    turn_id=turn.turn_id,
                    transcript_seq=seq_box[0],
                )
            )

        await commit_activity(
            self._store,
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
        handler = live.handler
        handler.take_lost_writes()  # a loss between turns is not this turn's
        rid = turn.request_id
        try:
            await self._checkpoints.turn_started(live, turn.number)  # issue 14
            agent = live.agent if live.agent_alive and not live.needs_acp_restart else None
            if agent is None:
                restarted_for = live.needs_acp_restart
                live.needs_acp_restart, live.agent_grants = None, False  # a new process holds none
                live.failed_turns = 0
                agent = await self._live.respawn(live)
                if restarted_for and not agent.supports_load_session:
                    message = restarted_for + CONTEXT_LOST
                    await self._reporter.emit(
                        ErrorEvent(session=live.id, message=message, terminal=False, request_id=rid)
                    )
            text = await self._compile_for_turn(live, doc, rid)
            text = await self._primer.prime(live, text)  # issue 14: a primed fork
            acp_session = await attach(live, agent, rid, self._store, self._reporter)
            if turn.cancel_requested:
                # Cancelled while the agent was starting: there was no ACP session to tell.
                stop = StopReason.CANCELLED
            else:
                stop = await agent.prompt(acp_session, text)
        except asyncio.CancelledError:
            await self._flush(handler)
            await self._fail_turn(live, turn, "interrupted", turn.interruption)
            raise
        except (AgentError, DomainError) as exc:
            await self._flush(handler)
            if isinstance(exc, AgentError):
                self._providers.observe_auth(live.record.provider, required=exc.auth_required)
                error = agent_failure(exc, TurnFailedError(exc.message, session=live.id))
                if not exc.auth_required:
                    self._count_failure(live)
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
        finally:
            self._live.release(live)  # a slot held for an agent the turn never started
        await self._flush(handler)
        lost = handler.take_lost_writes()
        if lost is not None:  # an update could not be committed: never end as if complete
            await self._fail_turn(live, turn, "provider_error", lost)
            return
        live.failed_turns = 0
        # An agent that winds down on our cancel may still say end_turn (OpenCode does).
        if turn.cancel_requested and stop is StopReason.END_TURN:
            stop = StopReason.CANCELLED
        await self._end_turn(live, turn, IdleState(), TurnEnded(session=live.id, stop_reason=stop))

    @staticmethod
    def _count_failure(live: LiveSession) -> None:
        """An agent whose process lives on may still be broken for good: Claude Code's adapter,
        once its `claude` child died, fails every later prompt. After a failed turn the next
        one starts a fresh process when the agent restores the session (session/load); one
        that cannot loses its context in a restart, so only a second failure in a row earns
        it one."""
        if not live.agent_alive:
            return  # it died: the next turn starts a new one anyway
        assert live.agent is not None
        live.failed_turns += 1
        if live.failed_turns >= (1 if live.agent.supports_load_session else 2):
            live.needs_acp_restart = live.needs_acp_restart or FAILING_AGENT

    @staticmethod
    async def _flush(handler: SessionFeed) -> None:
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
                checkpoint = await self._checkpoints.turn_ended(live, turn.number)
                ended = self._usage.close_turn(turn.turn_id)  # the ledger's end time
                await commit_activity(
                    self._store,
                    live,
                    state,
                    extra=(checkpoint.stamp(closing),),
                    before=resolved + checkpoint.steps,
                    after=(ended,),
                )
            except Exception:
                log.exception("could not persist the end of a turn for %s", live.id)
        live.touch()
        self._after_turn(live, turn, state, closing)  # issue 14: the next queued prompt

    async def _compile_for_turn(self, live: LiveSession, doc: Doc, rid: str | None) -> str:
        preview = await self._compiler.compile(live.record.cwd, doc)
        if preview.unresolved:
            await self._reporter.emit(
                *(
                    ErrorEvent(
                        session=live.id, message=f"unresolved: {u}", terminal=False, request_id=rid
                    )
                    for u in preview.unresolved
                )
            )
        return preview.prompt

    async def cancel(self, session_id: str) -> CancelResult:
        """Cancel the running turn: parked permissions answered cancelled, the agent told;
        `cancelled` is false when no turn runs."""
        return await self._cancel(await self._live.load(session_id))

    async def _cancel(self, live: LiveSession) -> CancelResult:
        session_id = live.id
        async with live.lock:
            turn = live.turn
            if turn is None:
                return CancelResult(session=session_id, cancelled=False)
            # Drain every parked input (answered cancelled) before the provider cancel
            # (docs/protocol.md §3.5).
            if turn.parked:
                resolved = tuple(record_resolution(live.id, p, None, None) for p in turn.drain())
                cancelled = CancelResult(session=session_id, cancelled=True)

                def answer(uow: UnitOfWork) -> None:
                    uow.answer(cancelled)  # kept with the drained answers (idempotency)

                await commit_activity(self._store, live, turn.state(), after=(*resolved, answer))
            turn.cancel_requested = True
        if live.agent is not None and live.acp_session_id is not None:
            await live.agent.cancel(live.acp_session_id)
        if turn.turn_id not in self._escalations:
            self._escalations.add(turn.turn_id)
            self._tasks.spawn(self._escalate_cancel(live, turn), name=f"cancel-{session_id}")
        return CancelResult(session=session_id, cancelled=True)

    async def stop(self, live: LiveSession) -> None:
        """Cancel the session's running turn and wait for its task to unwind (deletion)."""
        turn = live.turn
        if turn is None:
            return
        turn.interruption = SESSION_DELETED
        await self._cancel(live)  # not by id: the session no longer loads (it is deleted)
        if turn.task is not None:
            turn.task.cancel()
            await asyncio.gather(turn.task, return_exceptions=True)
        if live.turn is turn:  # its task was cancelled before it ran a line: end it here
            self._live.release(live)
            await self._fail_turn(live, turn, "interrupted", turn.interruption)

    async def abandon(self, live: LiveSession) -> None:
        """Forget the session's live turn in this process without writing anything: another
        member has recorded its end (it took the session over while this member's lease had
        lapsed). Parked inputs are answered cancelled in memory; the task is cancelled and
        awaited, and finds its turn no longer current, so it ends nothing."""
        async with live.lock:
            turn, live.turn = live.turn, None
        if turn is None:
            return
        turn.drain()
        if turn.task is not None:
            turn.task.cancel()
            await asyncio.gather(turn.task, return_exceptions=True)

    async def shutdown(self) -> None:
        """End every turn: tasks cancelled and awaited, each ending failed/interrupted with a
        terminal error (never turn_ended) after answering what it still had parked cancelled,
        recorded as c2's own answers (`_end_turn`), as any other end of a turn does."""
        await self._tasks.close()

    async def _escalate_cancel(self, live: LiveSession, turn: LiveTurn) -> None:
        """A cancel the agent ignores: after the grace period end the turn `cancelled` and
        restart the agent (closed now, revived on the next prompt)."""
        try:
            await asyncio.sleep(CANCEL_GRACE_SECONDS)
            if live.turn is not turn:
                return  # the agent honoured the cancel (or the turn ended otherwise)
            # Detached before the turn ends, so a next prompt can't reuse the stuck agent; the
            # turn task then fails on the closed connection as a stale owner (no second end).
            if self._live.retire(live, CANCEL_CLOSE_GRACE) is not None:
                log.warning("agent of session %s ignored cancel; restarting it", live.id)
            ended = TurnEnded(session=live.id, stop_reason=StopReason.CANCELLED)
            await self._end_turn(live, turn, IdleState(), ended)
            # The task may not even have reached the agent (a slow start): it must not go on
            # to prompt after its turn ended. Cancelled now, it finds its turn ended already.
            if turn.task is not None:
                turn.task.cancel()
        finally:
            self._escalations.discard(turn.turn_id)

    async def answer_permission(
        self, op: AnswerPermissionOp, answered_by: AnsweredBy | None
    ) -> AnswerResult:
        """Answer a parked permission as `answered_by` (recorded in the transcript and the
        `permission_resolved` event)."""
        # A session that does not exist is 404, as for every op (docs/api.md §3), not a
        # permission that is no longer pending.
        live = await self._live.load(op.session)
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
                await commit_activity(self._store, live, turn.state(), after=(resolved,))
            except Exception:
                turn.parked[op.request_id] = parked
                raise
            parked.reply.set_result(op.option_id)
        return AnswerResult(applied=True)
