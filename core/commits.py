"""Commits of a session's activity: the next revision (CAS-guarded) with its events in one
transaction, and the write step recording how a parked permission was answered.

Every semantic transition bumps the revision by exactly one (docs/protocol.md §4.1); the
caller holds the session's lock, so revisions are persisted and broadcast in order.
"""

from __future__ import annotations

from collections.abc import Callable

from c2.core.activity import INTERRUPTED, advance
from c2.core.live import LiveSession
from c2.core.protocol.events import (
    ErrorEvent,
    Event,
    PermissionResolved,
    SessionActivityChanged,
)
from c2.core.protocol.state import (
    AnsweredBy,
    FailedState,
    IdleState,
    PendingInput,
    PermissionPart,
    RunState,
)
from c2.core.store.database import Store, UnitOfWork


def record_resolution(
    sid: str, pending: PendingInput, option_id: str | None, answered_by: AnsweredBy | None
) -> Callable[[UnitOfWork], None]:
    """The write step that records how a parked permission was answered: a `permission`
    transcript row and its `permission_resolved` event (answered_by None: by c2 itself)."""
    part = PermissionPart(
        input_id=pending.input_id,
        title=pending.title,
        option_id=option_id,
        answered_by=answered_by,
    )

    def write(uow: UnitOfWork) -> None:
        seq = uow.parts.append(sid, "agent", part)
        uow.emit(
            PermissionResolved(
                session=sid,
                request_id=pending.input_id,
                option_id=option_id,
                answered_by=answered_by,
                transcript_seq=seq,
            )
        )

    return write


async def commit_turn_state(
    store: Store, live: LiveSession, *, extra: tuple[Event, ...] = ()
) -> None:
    """Persist the live turn's state as the next activity revision (CAS), emit it, then
    `extra` events, in one transaction. Caller holds `live.lock`."""
    assert live.turn is not None
    await commit_activity(store, live, live.turn.state(), extra=extra)


async def commit_activity(
    store: Store,
    live: LiveSession,
    state: RunState,
    *,
    extra: tuple[Event, ...] = (),
    before: tuple[Callable[[UnitOfWork], None], ...] = (),
    after: tuple[Callable[[UnitOfWork], None], ...] = (),
) -> None:
    """Advance the activity to `state` (revision+1, CAS-guarded) and emit it, then `extra`,
    in one transaction between the `before` and `after` steps."""
    prev = live.record.activity
    activity = advance(prev, state)
    # The end of a turn must land, or the session would read `running` for good: it waits
    # for a database that is down rather than giving up like other writes.
    patient = isinstance(state, IdleState | FailedState)
    record = live.record.evolve(activity=activity)

    def write(uow: UnitOfWork) -> None:
        for step in before:
            step(uow)
        uow.sessions.update(record, ("activity",), expected_revision=prev.revision)
        uow.emit(SessionActivityChanged(session=live.id, activity=activity))
        for ev in extra:
            uow.emit(ev)
        for step in after:
            step(uow)

    await store.write(write, patient=patient)
    live.record = live.record.evolve(activity=activity)


def interrupt_in_flight(
    uow: UnitOfWork,
    owners: list[str] | None,
    *,
    unowned: bool = True,
    session: str | None = None,
) -> int:
    """Mark the turns that were running (in this store, of `owners`) failed/interrupted, each
    broadcast as a turn that stopped: its activity, then its terminal error correlated to its
    prompt, as a turn that ends while c2 runs is (clients clear a running turn on the latter;
    docs/protocol.md). Start-up recovery and a cluster takeover; `unowned` and `session`
    narrow as `SessionRepository.interrupt_in_flight` does. Returns how many."""
    changed = uow.sessions.interrupt_in_flight(owners, unowned=unowned, session=session)
    for record, request_id, parked in changed:
        # What it had parked is answered by c2 (cancelled), as a turn ending while c2 runs
        # does: clients, push notifications and webhooks close those requests.
        for pending in parked:
            record_resolution(record.id, pending, None, None)(uow)
        uow.emit(SessionActivityChanged(session=record.id, activity=record.activity))
        uow.emit(
            ErrorEvent(session=record.id, message=INTERRUPTED, terminal=True, request_id=request_id)
        )
    return len(changed)
