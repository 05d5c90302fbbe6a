"""Broadcasting what an op could not do: the protocol's `error` event, committed to the log.

An op failure is both an `error` event (for every client watching the session) and the
problem the op's caller receives; `reject` does the first and hands the error back to raise.
"""

from __future__ import annotations

import logging

from c2.core.errors import DomainError
from c2.core.protocol.events import ErrorEvent, Event
from c2.core.store.database import Store, UnitOfWork

log = logging.getLogger(__name__)


class Reporter:
    """Commits events outside any other transaction: op errors and non-terminal warnings."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def emit(self, *events: Event) -> None:
        """Commit `events` in one transaction (raises when the store can't)."""

        def write(uow: UnitOfWork) -> None:
            for ev in events:
                uow.emit(ev)

        await self._store.write(write)

    async def warn(self, session: str, request_id: str | None, message: str) -> None:
        """A non-terminal `error` event: the op goes on, but a person should know."""
        await self.emit(
            ErrorEvent(session=session, message=message, terminal=False, request_id=request_id)
        )

    async def reject(self, error: DomainError, *, terminal: bool) -> DomainError:
        """Broadcast `error` as the protocol's error event, then hand it back to raise (the
        op's problem reply is kept with the event: a retry replays it, no second event)."""
        event = ErrorEvent(
            session=error.session,
            message=error.message,
            terminal=terminal,
            request_id=error.request_id,
            code=error.code,
            auth_methods=error.details.get("auth_methods"),
            stderr_tail=error.details.get("stderr_tail"),
        )

        def write(uow: UnitOfWork) -> None:
            uow.emit(event)
            uow.answer(error)

        try:
            await self._store.write(write)
        except Exception:
            log.exception("could not broadcast error event")
        return error
