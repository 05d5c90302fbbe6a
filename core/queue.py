"""The durable follow-up queue of a session (issue 14 part 3).

Prompts wait in `queue_items` (core/store/queue.py) and run as their own turns, one after the
other, whether or not a client is connected: when a turn ends with `end_turn` the next item
starts (its `turn_started` carries the item's request_id). A turn that fails, is cancelled or
stops otherwise, and a permission parked during a queued turn, pause the queue
(`queue_paused`) until a client resumes it (`queue_resumed`); after a restart every non-empty
queue is paused (`interrupted`). The `prompt` op keeps the protocol's rule (409 while a turn
runs).

Over 300 lines: appending, editing, pausing and starting the next item share one lock per
session and one set of waiting sessions; split, their ordering rules could not be read whole.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from c2.core.activity import LiveTurn, is_busy
from c2.core.errors import (
    DomainError,
    QueueItemNotFoundError,
    SessionNotFoundError,
    TurnAlreadyRunningError,
)
from c2.core.outcomes import PromptAccepted
from c2.core.protocol.events import (
    Event,
    QueueChanged,
    QueueItem,
    QueuePaused,
    QueueResumed,
    TurnEnded,
)
from c2.core.protocol.ops import (
    PROTOCOL_DOC,
    EditQueuedOp,
    PromptOp,
    QueuePromptOp,
    RemoveQueuedOp,
    ResumeQueueOp,
)
from c2.core.protocol.state import FailedState, RunState
from c2.core.protocol.values import StopReason
from c2.core.session import utcnow
from c2.core.store.database import Store, UnitOfWork
from c2.core.store.idempotency import outside_op
from c2.core.store.queue import QueueRepository, StoredItem
from c2.core.supervisor import Supervisor

if TYPE_CHECKING:
    from c2.core.live import LiveSession
    from c2.core.live_agents import LiveAgents

log = logging.getLogger(__name__)
PauseReason = Literal["cancelled", "failed", "permission", "interrupted"]


class QueueView(BaseModel):  # noqa: D101 - wire model: a docstring becomes its OpenAPI description
    session: str
    paused: bool
    pause_reason: str | None
    items: list[QueueItem]


def _items(stored: list[StoredItem]) -> list[QueueItem]:
    return [
        QueueItem(
            id=s.id,
            doc=PROTOCOL_DOC.validate_json(s.doc_json),
            request_id=s.request_id,
            position=i,
        )
        for i, s in enumerate(stored)
    ]


def _view(repo: QueueRepository, session: str) -> QueueView:
    reason = repo.paused(session)
    items = _items(repo.items(session))
    return QueueView(session=session, paused=reason is not None, pause_reason=reason, items=items)


def _doc_json(doc: object) -> str:
    return PROTOCOL_DOC.dump_json(doc).decode()  # type: ignore[arg-type]


class FollowUpQueue:
    """Queues of every session; `start` starts a prompt turn (TurnRunner.prompt)."""

    def __init__(
        self,
        live: LiveAgents,
        store: Store,
        start: Callable[[PromptOp], Awaitable[PromptAccepted]],
    ) -> None:
        self._live = live
        self._store = store
        self._start = start
        self._queued_turns: set[str] = set()  # turn ids started from the queue
        # Sessions whose queue holds items, so a turn's end costs nothing when none does.
        self._waiting: set[str] = set()
        self._advancing: dict[str, asyncio.Lock] = {}
        self._tasks = Supervisor("queue")

    # -- ops ----------------------------------------------------------------------------------

    async def append(self, op: QueuePromptOp) -> QueueItem:
        """Append a prompt to the session's queue; it starts now if the session is idle and the
        queue not paused."""
        live = await self._live.load(op.session, op.request_id)
        item_id = str(uuid.uuid4())
        doc_json = _doc_json(op.doc)

        def write(uow: UnitOfWork) -> QueueItem:
            repo = QueueRepository(uow.conn)
            repo.append(item_id, live.id, doc_json, op.request_id, utcnow())
            items = _items(repo.items(live.id))
            uow.emit(QueueChanged(session=live.id, items=items))
            added = next(i for i in items if i.id == item_id)
            uow.answer(added)  # the 201, kept with the item (idempotency)
            return added

        item = await self._store.write(write)
        self._waiting.add(live.id)
        await self.advance(live)
        return item

    async def view(self, session: str) -> QueueView:
        """The session's queue: waiting items in order, and whether (and why) it is paused."""
        live = await self._live.load(session)

        return await self._store.read(lambda r: _view(QueueRepository(r.conn), live.id))

    async def edit(self, op: EditQueuedOp) -> QueueItem:
        """Replace the doc of a waiting item; QueueItemNotFoundError once it ran or left."""
        live = await self._live.load(op.session, op.request_id)
        doc_json = _doc_json(op.doc)

        def write(uow: UnitOfWork) -> QueueItem:
            repo = QueueRepository(uow.conn)
            if not repo.replace_doc(live.id, op.item, doc_json):
                raise QueueItemNotFoundError(
                    f"queued prompt {op.item} is not waiting (it ran or was removed)",
                    session=live.id,
                    request_id=op.request_id,
                )
            items = _items(repo.items(live.id))
            uow.emit(QueueChanged(session=live.id, items=items))
            edited = next(i for i in items if i.id == op.item)
            uow.answer(edited)
            return edited

        return await self._store.write(write)

    async def remove(self, op: RemoveQueuedOp) -> QueueView:
        """Remove a waiting item; the queue as it now is."""
        live = await self._live.load(op.session, op.request_id)

        def write(uow: UnitOfWork) -> QueueView:
            repo = QueueRepository(uow.conn)
            if not repo.remove(live.id, op.item):
                raise QueueItemNotFoundError(
                    f"queued prompt {op.item} is not waiting (it ran or was removed)",
                    session=live.id,
                    request_id=op.request_id,
                )
            left = _view(repo, live.id)
            uow.emit(QueueChanged(session=live.id, items=left.items))
            uow.answer(left)
            return left

        view = await self._store.write(write)
        if not view.items:
            self._waiting.discard(live.id)
        return view

    async def resume(self, op: ResumeQueueOp) -> QueueView:
        """Unpause the queue and start its next item if the session is idle."""
        live = await self._live.load(op.session, op.request_id)

        def write(uow: UnitOfWork) -> None:
            repo = QueueRepository(uow.conn)
            if repo.paused(live.id) is not None:
                repo.resume(live.id)
                uow.emit(QueueResumed(session=live.id))

        await self._store.write(write)
        await self.advance(live)
        return await self.view(live.id)

    # -- running items ------------------------------------------------------------------------

    async def advance(self, live: LiveSession) -> None:
        """Start the next item when the session is idle and its queue is not paused. An op
        that advances the queue (append, resume) answers for itself, not for the turn."""
        with outside_op():
            # One at a time per session: two appends at once must not both find it idle and
            # each take an item (the second's prompt would be refused and pause the queue).
            async with self._advancing.setdefault(live.id, asyncio.Lock()):
                await self._advance(live)

    async def _advance(self, live: LiveSession) -> None:
        if live.deleted or live.id not in self._waiting:
            return
        if live.turn is not None or is_busy(live.record.activity):
            return

        def take(uow: UnitOfWork) -> tuple[StoredItem | None, int]:
            repo = QueueRepository(uow.conn)
            items = repo.items(live.id)
            if repo.paused(live.id) is not None or not items:
                return None, len(items)
            repo.remove(live.id, items[0].id)
            uow.emit(QueueChanged(session=live.id, items=_items(items[1:])))
            return items[0], len(items) - 1

        item, left = await self._store.write(take)
        if not left:
            self._waiting.discard(live.id)
        if item is None:
            return
        doc = PROTOCOL_DOC.validate_json(item.doc_json)
        op = PromptOp(session=live.id, doc=doc, request_id=item.request_id)
        try:
            accepted = await self._start(op)
        except SessionNotFoundError:
            return  # deleted meanwhile: its queue goes with it
        except DomainError as exc:
            log.warning("queued prompt %s of %s could not start: %s", item.id, live.id, exc)

            def put_back(uow: UnitOfWork) -> None:
                repo = QueueRepository(uow.conn)
                repo.push_front(item, utcnow())
                uow.emit(QueueChanged(session=live.id, items=_items(repo.items(live.id))))

            await self._store.write(put_back)
            self._waiting.add(live.id)
            if not isinstance(exc, TurnAlreadyRunningError):  # else: next, after that turn
                await self.pause(live.id, "failed")
            return
        self._queued_turns.add(accepted.turn_id)

    async def pause(self, session: str, reason: PauseReason) -> None:
        """Pause the session's queue for `reason` and announce it."""

        def write(uow: UnitOfWork) -> None:
            QueueRepository(uow.conn).pause(session, reason, utcnow())
            uow.emit(QueuePaused(session=session, reason=reason))

        await self._store.write(write)

    # -- hooks --------------------------------------------------------------------------------

    def turn_ended(
        self, live: LiveSession, turn: LiveTurn, state: RunState, closing: Event
    ) -> None:
        """After a turn's end is committed (core/turns.py): start the next item after
        `end_turn`, else pause a queue that has something to run."""
        queued = turn.turn_id in self._queued_turns
        self._queued_turns.discard(turn.turn_id)
        if live.deleted:
            return  # its queue goes with it
        if isinstance(closing, TurnEnded) and closing.stop_reason is StopReason.END_TURN:
            reason: PauseReason | None = None
        elif isinstance(closing, TurnEnded) and closing.stop_reason is StopReason.CANCELLED:
            reason = "cancelled"
        elif isinstance(state, FailedState) and state.reason == "interrupted":
            reason = "interrupted"
        else:
            reason = "failed"
        self._tasks.spawn(self._after_turn(live, reason, queued), name=f"queue-{live.id}")

    async def _after_turn(
        self, live: LiveSession, reason: PauseReason | None, queued: bool
    ) -> None:
        try:
            if reason is None:
                await self.advance(live)
                return
            if queued or live.id in self._waiting:
                await self.pause(live.id, reason)
        except Exception:
            log.exception("the follow-up queue of %s could not go on", live.id)

    async def close(self) -> None:
        """Stop the queue's tasks (server shutdown)."""
        await self._tasks.close()

    def parked(self, live: LiveSession, turn: LiveTurn) -> None:
        """A permission was parked (core/turns.py): a queued turn pauses its queue."""
        if turn.turn_id in self._queued_turns:
            self._tasks.spawn(self.pause(live.id, "permission"), name=f"queue-pause-{live.id}")

    async def interrupted(self, owners: list[str] | None = None, *, unowned: bool = True) -> None:
        """At start-up (or a peer's lease expiry): the turn that was running was interrupted;
        queues wait for a client. `owners` (a cluster): only the sessions of these members
        and (`unowned`) of none."""

        def write(uow: UnitOfWork) -> list[str]:
            repo = QueueRepository(uow.conn)
            waiting = repo.sessions_with_items()
            if owners is not None:
                waiting = [s for s in waiting if _owned_by(uow, s, owners, unowned)]
            for session in waiting:
                if repo.paused(session) is None:
                    repo.pause(session, "interrupted", utcnow())
                    uow.emit(QueuePaused(session=session, reason="interrupted"))
            return waiting

        self._waiting.update(await self._store.write(write))

    async def forget(self, session: str) -> None:
        """Drop the session's queue (it was deleted)."""
        self._waiting.discard(session)
        self._advancing.pop(session, None)
        await self._store.write(lambda uow: QueueRepository(uow.conn).forget(session))


def _owned_by(uow: UnitOfWork, session: str, owners: list[str], unowned: bool) -> bool:
    record = uow.sessions.get(session)
    if record is None:
        return False
    return record.owner in owners or (unowned and record.owner is None)
