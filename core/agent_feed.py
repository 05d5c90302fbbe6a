"""Agent → core traffic of one live session: updates become transcript rows and events,
permission requests are decided by policy or parked until a client answers.

Each update's row and event commit in one transaction before any client sees the event
(docs/protocol.md: transcript_seq). Writes are queued without waiting so a fast agent is never paced
by fsync; the writer commits them in order and in groups. The updates that arrive together
(one read from the agent's pipe) are one write job: one hand-off to the writer and one
completion back, not one per chunk. An update the store cannot commit fails its turn: later
updates are dropped, the agent is asked to cancel, and the turn ends `failed` with a terminal
error naming the cause (never a silent gap in the transcript).

Slightly over ~300 lines: updates and permission parking share the write queue, whose order
(updates flushed before a park) is the point.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from c2.core.acp_sessions import effective_models, mode_option, model_option
from c2.core.activity import LiveTurn, ParkedInput, next_sequence
from c2.core.agents.updates import (
    AgentUpdate,
    ConfigOptionsUpdate,
    ModeUpdate,
    PermissionAsk,
    PlanUpdate,
    TextChunk,
    ThoughtChunk,
    ToolCallUpdate,
    TurnUsage,
    UsageUpdate,
)
from c2.core.commits import commit_activity, commit_turn_state, record_resolution
from c2.core.permissions import Decision, automatic_answer, decide, grants_standing_permission
from c2.core.protocol.chunks import ChunkKind, ChunkRun, json_string
from c2.core.protocol.events import (
    ConfigOptions,
    ContextWindowEvent,
    Event,
    Modes,
    PermissionRequest,
    PlanEvent,
    ToolCall,
    Usage,
)
from c2.core.protocol.state import (
    ContextWindow,
    Part,
    PendingInput,
    PlanPart,
    ToolCallPart,
)
from c2.core.store.database import DivisibleWrite, Store, UnitOfWork
from c2.core.store.faults import StepsLostError, describe

if TYPE_CHECKING:
    from c2.core.live import LiveSession
    from c2.core.usage import UsageLedger, UsageStep

log = logging.getLogger(__name__)
# Queued-but-uncommitted write jobs per session before the reader waits for the writer.
MAX_IN_FLIGHT = 128
# Updates in one write job at most; a longer burst is split.
MAX_GROUP = 64
# One update's write, run by the store's writer thread in the update's transaction.
Write = Callable[[UnitOfWork], None]


# What only a running turn records: transcript rows and their events. Session state (config
# options, modes, usage, the context window) is taken whenever the agent reports it.
TRANSCRIPT_UPDATES = (TextChunk, ThoughtChunk, ToolCallUpdate, PlanUpdate)


class AgentFeed:
    """The AgentHandler of one live session: records what its agent says, decides or parks
    what it asks."""

    def __init__(
        self,
        live: LiveSession,
        store: Store,
        usage: UsageLedger | None = None,
        on_park: Callable[[LiveSession, LiveTurn], None] | None = None,
        on_mode: Callable[[LiveSession], None] | None = None,
    ) -> None:
        self._live = live
        self._on_park = on_park  # told of every parked permission (the follow-up queue)
        self._on_mode = on_mode  # told when the agent switched its own mode (the policy)
        self._store = store
        self._usage = usage  # the usage ledger (core/usage.py); None: usage is not recorded
        self._in_flight: deque[asyncio.Future[None]] = deque()
        self._group: WriteGroup | None = None  # updates not yet handed to the writer
        self._lost: LostWrites | None = None  # this turn's updates that could not be committed
        self._cancels: set[asyncio.Task[None]] = set()
        self._detached = False

    def detach(self) -> None:
        """Stop recording: a peer took the session over while this member had lapsed."""
        self._detached = True

    # -- updates -------------------------------------------------------------------------------

    def take_update(self, update: AgentUpdate) -> bool:
        """Record `update` now unless the writer is MAX_IN_FLIGHT groups behind (then
        `on_update` records it and waits)."""
        if self._backlogged():
            return False
        self._record(update)
        return True

    async def on_update(self, update: AgentUpdate) -> None:
        """Record one agent update; the reader waits only while the writer is backlogged."""
        self._record(update)
        if self._backlogged():
            await asyncio.wait([self._in_flight[-1]])

    def _record(self, update: AgentUpdate) -> None:
        """Queue the write recording `update` (a transcript row with its event, or the session
        state it changes), in arrival order; never waits for the writer."""
        if self._detached:
            return  # dropped from this process: someone else records this session now
        if isinstance(update, TRANSCRIPT_UPDATES) and not self._in_turn():
            # Said after its turn ended without it (deleted, cancelled past the grace, c2
            # stopping): a turn that ended with a terminal error, or a session deleted, must
            # get nothing more in its transcript or on the stream.
            log.debug("session %s: %s after its turn ended, dropped", self._live.id, update)
            return
        match update:
            case TextChunk():
                self._add_chunk("text", update.message_id, update.text)
                return
            case ThoughtChunk():
                self._add_chunk("reasoning", None, update.text)
                return
        step = self._step(update)
        if step is not None:
            self._add(*step)

    def _in_turn(self) -> bool:
        turn = self._live.turn
        return turn is not None and turn.accepted

    def _step(self, update: AgentUpdate) -> tuple[Write, UsageStep | None] | None:
        """The write recording `update` (and the usage ledger's step riding on it), applying
        to the live record at once what the update changes of the session."""
        row = transcript_row(self._live.id, update)
        if row is not None:
            return row_write(self._live.id, *row), None
        match update:
            case UsageUpdate():
                return self._context(update)
            case TurnUsage():
                return self._turn_usage(update)
            case ConfigOptionsUpdate():
                return self._config_options(update), None
            case ModeUpdate():
                write = self._mode(update)
                return (write, None) if write is not None else None
        return None  # pragma: no cover - the union is closed

    def _context(self, update: UsageUpdate) -> tuple[Write, UsageStep | None]:
        # Session-level state, not transcript content (docs/protocol.md: context_window).
        sid = self._live.id
        window = ContextWindow(used_tokens=update.used, context_window=update.size)
        self._live.record = self._live.record.evolve(context_window=window)
        record = self._live.record
        cost = update.cost
        ledger = None
        if self._usage is not None:
            ledger = self._usage.context(self._live, update.used, update.size, cost)

        def write(uow: UnitOfWork) -> None:
            uow.sessions.update(record, ("context_window",))
            uow.emit(
                Usage(session=sid, input_tokens=window.used_tokens, output_tokens=0, cost=cost)
            )
            uow.emit(
                ContextWindowEvent(
                    session=sid,
                    used_tokens=window.used_tokens,
                    context_window=window.context_window,
                )
            )
            if ledger is not None:
                ledger(uow)

        return write, ledger

    def _turn_usage(self, update: TurnUsage) -> tuple[Write, UsageStep | None]:
        usage = Usage(
            session=self._live.id,
            input_tokens=update.input_tokens,
            output_tokens=update.output_tokens,
            total_tokens=update.total_tokens,
            thought_tokens=update.thought_tokens,
            cached_read_tokens=update.cached_read_tokens,
            cached_write_tokens=update.cached_write_tokens,
        )
        ledger = None
        if self._usage is not None:
            ledger = self._usage.turn_usage(self._live, update)

        def write(uow: UnitOfWork) -> None:
            uow.emit(usage)
            if ledger is not None:
                ledger(uow)

        return write, ledger

    def _config_options(self, update: ConfigOptionsUpdate) -> Write:
        sid = self._live.id
        options = update.options
        changes: dict[str, Any] = {"config_options": options}
        if (option := model_option(options)) is not None and option.current:
            # The snapshot's model (and picker) follow the agent's model option.
            known = self._live.record.models
            changes["model"] = option.current
            changes["models"] = effective_models(
                known.model_copy(update={"current": option.current}) if known else None,
                options,
            )
        known_modes = self._live.record.modes
        if (modes_option := mode_option(options)) is not None and known_modes is not None:
            current = {"current": modes_option.current}
            changes["modes"] = known_modes.model_copy(update=current)
        self._live.record = self._live.record.evolve(**changes)
        record = self._live.record

        def write(uow: UnitOfWork) -> None:
            uow.sessions.update(record, tuple(changes))
            uow.emit(ConfigOptions(session=sid, options=options))

        return write

    def _mode(self, update: ModeUpdate) -> Write | None:
        sid = self._live.id
        modes = self._live.record.modes
        if modes is None:
            return None  # a mode switch of an agent that never listed its modes
        modes = modes.model_copy(update={"current": update.mode_id})
        self._live.record = self._live.record.evolve(modes=modes)
        record = self._live.record
        if self._on_mode is not None:
            self._on_mode(self._live)

        def write(uow: UnitOfWork) -> None:
            uow.sessions.update(record, ("modes",))
            uow.emit(Modes(session=sid, available=modes.available, current=modes.current))

        return write

    def _add(self, write: Write, ledger: UsageStep | None = None) -> None:
        """Add `write` to the group going to the writer once this loop iteration's updates
        are in (or at MAX_GROUP updates)."""
        if self._lost is not None:
            self._lost.count += 1  # the turn is failing: nothing after a gap is kept
            return
        group = self._open_group()
        group.writes.append(write)
        if ledger is not None:
            group.committed.append(ledger.committed)  # acts on a budget crossing
        self._added(group)

    def _add_chunk(self, kind: ChunkKind, message_id: str | None, text: str) -> None:
        """Add a streamed chunk to the group: consecutive chunks of one message are one write
        (a ChunkRun), so a chunk costs no model, closure or write step of its own."""
        if self._lost is not None:
            self._lost.count += 1
            return
        try:
            body = json_string(text)
        except TypeError as exc:  # a lone surrogate: JSON in UTF-8 cannot carry it
            self._lose(1, exc)
            return
        group = self._open_group()
        run = group.writes[-1] if group.writes else None
        if not (isinstance(run, RunWrite) and run.run.continues(kind, message_id)):
            run = RunWrite(ChunkRun(kind, self._live.id, message_id))
            group.writes.append(run)
        run.run.add(text, body)
        self._added(group)

    def _open_group(self) -> WriteGroup:
        """The group this loop iteration's updates join (submitted when the iteration ends)."""
        group = self._group
        if group is None:
            group = self._group = WriteGroup()
            asyncio.get_running_loop().call_soon(self._submit, group)
        return group

    def _added(self, group: WriteGroup) -> None:
        group.updates += 1
        if group.updates >= MAX_GROUP:
            self._submit(group)

    def _backlogged(self) -> bool:
        """More than MAX_IN_FLIGHT groups are uncommitted: the agent's reader must wait."""
        while self._in_flight and self._in_flight[0].done():
            self._in_flight.popleft()
        return len(self._in_flight) > MAX_IN_FLIGHT

    def _submit(self, group: WriteGroup) -> None:
        """Hand `group` to the writer as one paced job (once; later calls do nothing)."""
        if group is not self._group:
            return
        self._group = None
        future = self._store.submit_steps(group.writes, paced=True)
        future.add_done_callback(partial(self._written, group.updates))
        for committed in group.committed:
            future.add_done_callback(committed)
        self._in_flight.append(future)

    def _written(self, updates: int, future: asyncio.Future[None]) -> None:
        if future.cancelled() or (exc := future.exception()) is None:
            return
        if isinstance(exc, StepsLostError):
            updates = exc.failed  # the group's other updates were committed
        self._lose(updates, exc)

    def _lose(self, updates: int, exc: BaseException) -> None:
        """`updates` of this turn could not be recorded (`exc`): the turn fails."""
        if self._lost is not None:
            self._lost.count += updates
            return
        self._lost = LostWrites(cause=describe(exc), count=updates)
        log.error("agent update of %s was not persisted; failing its turn: %s", self._live.id, exc)
        live = self._live
        if live.agent is not None and live.acp_session_id is not None:
            # The agent must not keep working while nothing of it is recorded.
            task = asyncio.get_running_loop().create_task(live.agent.cancel(live.acp_session_id))
            self._cancels.add(task)
            task.add_done_callback(self._cancels.discard)

    async def flush(self) -> None:
        """Wait until every queued update is committed (before the turn's closing events)."""
        if self._group is not None:
            self._submit(self._group)
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
            self._in_flight.clear()

    def take_lost_writes(self) -> str | None:
        """Why the turn must fail (updates that could not be committed), once; None if every
        update since the last call was committed. Call after `flush`."""
        lost, self._lost = self._lost, None
        if lost is None:
            return None
        return f"the agent's output could not be saved ({lost.count} update(s) lost): {lost.cause}"

    # -- permissions ---------------------------------------------------------------------------

    async def on_permission(self, ask: PermissionAsk) -> str | None:
        """Answer an agent's permission request: decided by the session's policy, or parked
        for a client's answer while the turn waits."""
        if self._detached:
            return None  # answered cancelled: nobody may answer it here any more
        live = self._live
        decision = decide(live.record.policy, ask.kind)
        if decision is not Decision.ASK:
            # Automatic decisions emit nothing and leave activity alone (docs/protocol.md §2.2).
            answer = automatic_answer(decision, ask.options)
            if answer is not None or decision is Decision.DENY:
                return answer
            # Allowed, but the agent offers no one-shot allow: the user decides.
        await self.flush()  # earlier stream events precede the park in the log
        async with live.lock:
            turn = live.turn
            if turn is None or not turn.accepted:
                # No accepted turn to park in: answered cancelled (docs/protocol.md §5.1).
                return None
            pending = PendingInput(
                input_id=str(uuid.uuid4()),
                title=ask.title,
                options=[(oid, name) for oid, name, _kind in ask.options],
                sequence=next_sequence(),
            )
            reply: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
            turn.parked[pending.input_id] = ParkedInput(pending=pending, reply=reply)
            # Activity (awaiting_input) first, then the request itself (docs/protocol.md §5.1).
            request = PermissionRequest(
                session=live.id,
                request_id=pending.input_id,
                title=pending.title,
                options=pending.options,
                tool_kind=ask.kind,
            )
            try:
                await commit_turn_state(self._store, live, extra=(request,))
            except Exception:
                turn.parked.pop(pending.input_id, None)
                log.exception("could not park permission request for %s", live.id)
                return None
            if self._on_park is not None:
                self._on_park(live, turn)
        try:
            choice = await reply
        except asyncio.CancelledError:
            # The agent withdrew the request (it died or the connection closed): the input
            # must not stay actionable. A turn that is ending drains it anyway.
            await asyncio.shield(self._withdraw(turn, pending.input_id))
            raise
        if grants_standing_permission(choice, ask.options):
            # The user's own "always": a stricter policy later restarts the agent's session.
            live.agent_grants = True
        return choice

    async def _withdraw(self, turn: LiveTurn, input_id: str) -> None:
        live = self._live
        async with live.lock:
            parked = turn.parked.pop(input_id, None) if live.turn is turn else None
            if parked is not None:
                resolved = record_resolution(live.id, parked.pending, None, None)
                await commit_activity(self._store, live, turn.state(), after=(resolved,))


class RunWrite(DivisibleWrite):
    """The write of a run of streamed chunks: their rows and events, encoded without their
    models (the hot path of every streaming agent: core/protocol/chunks.py)."""

    __slots__ = ("run",)

    def __init__(self, run: ChunkRun) -> None:
        self.run = run

    def __call__(self, uow: UnitOfWork) -> None:
        """Append the run's rows and events in `uow`."""
        uow.append_run(self.run)

    def divide(self) -> list[Callable[[UnitOfWork], None]]:
        """One write per chunk (a DivisibleWrite: replayed so, a refused row loses itself)."""
        return [RunWrite(single) for single in self.run.singles()]


def transcript_row(sid: str, update: AgentUpdate) -> tuple[Part, Callable[[int], Event]] | None:
    """The transcript part a tool call or plan update persists and its event given the row's
    seq (streamed chunks: `RunWrite`); None for anything else."""
    match update:
        case ToolCallUpdate(id=tool_id, title=title, status=status, kind=kind):
            agent_input, content, locations = update.agent_input, update.content, update.locations
            part = ToolCallPart(
                id=tool_id,
                title=title,
                status=status,
                tool_kind=kind,
                agent_input=agent_input,
                content=content,
                locations=locations,
            )
            return part, lambda seq: ToolCall(
                session=sid,
                id=tool_id,
                title=title,
                status=status,
                kind=kind,
                agent_input=agent_input,
                transcript_seq=seq,
                content=content,
                locations=locations,
            )
        case PlanUpdate(entries=entries):
            return PlanPart(entries=entries), lambda seq: PlanEvent(
                session=sid, entries=entries, transcript_seq=seq
            )
    return None


def row_write(sid: str, part: Part, event_at: Callable[[int], Event]) -> Write:
    """The write of one agent transcript row and, numbered by it, its event."""

    def write(uow: UnitOfWork) -> None:
        uow.emit(event_at(uow.parts.append(sid, "agent", part)))

    return write


@dataclass
class WriteGroup:
    """Updates queued together: one write job, and what to tell once it committed."""

    writes: list[Write] = field(default_factory=list)
    updates: int = 0  # the updates the writes record (a run of chunks is one write)
    committed: list[Callable[[asyncio.Future[None]], None]] = field(default_factory=list)


@dataclass
class LostWrites:
    """A turn's agent updates that could not be committed: the first cause, how many."""

    cause: str
    count: int = 1
