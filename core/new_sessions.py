"""The step every new session ends with, whichever way it came to be (created or forked).

One transaction inserts the session, copies the creating device's default budget onto it,
runs what the caller adds (a fork's copied turns), then emits `session_created` and the
agent's state events; a failure to commit is `turn_failed`, and the caller undoes what it
made before (agent, worktree), so a session is either complete or absent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from c2.core.errors import TurnFailedError
from c2.core.protocol.events import Event, SessionCreated
from c2.core.session import SessionRecord
from c2.core.store.database import Store, UnitOfWork
from c2.core.usage import UsageLedger


async def commit_new_session(
    store: Store,
    record: SessionRecord,
    state: Sequence[Event],
    *,
    request_id: str | None,
    device_id: str | None,
    what: str,
    also: Callable[[UnitOfWork], None] | None = None,
) -> None:
    """Persist `record` with its receipt (`session_created`, correlated by `request_id`) and
    the agent's `state`; `also` runs in the same transaction before the events. `what` names
    the session in the error ("new session", "the forked session")."""
    created = SessionCreated(
        session=record.id,
        cwd=record.cwd,
        project_path=record.project_path,
        worktree_path=record.worktree_path,
        worktree_baseline=record.worktree_baseline,
        request_id=request_id,
    )
    inherit_budget = UsageLedger.inherit(device_id, record.id)

    def persist(uow: UnitOfWork) -> None:
        uow.sessions.insert(record)
        inherit_budget(uow)  # the creating device's default budget
        if also is not None:
            also(uow)
        uow.emit(created)
        for event in state:
            uow.emit(event)
        uow.answer(record.snapshot())  # the 201, kept with the session (idempotency)

    try:
        await store.write(persist)
    except Exception as exc:
        raise TurnFailedError(f"couldn't persist {what}: {exc}") from exc
