"""Revisioned activity projection and the live turn that owns parked inputs.

Every semantic transition bumps the revision by exactly one (docs/protocol.md §4.1); the
functions here compute the next `SessionActivity`, the engine persists (CAS) and emits it.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from c2.core.protocol.state import (
    AwaitingInputState,
    FailedState,
    IdleState,
    PendingInput,
    RunningState,
    SessionActivity,
)

INTERRUPTED = "C2 stopped before the turn finished"

# One global FIFO order for pending inputs across sessions (docs/protocol.md: pending.sequence).
_sequence = itertools.count(1)


def next_sequence() -> int:
    """The next pending-input sequence number (process-wide, increasing)."""
    return next(_sequence)


@dataclass
class ParkedInput:
    """A permission request parked on a turn and the future its answer resolves."""

    pending: PendingInput
    reply: asyncio.Future[str | None]


@dataclass
class LiveTurn:
    """The single turn slot of a session and the permission requests parked in it."""

    turn_id: str
    request_id: str | None
    parked: dict[str, ParkedInput] = field(default_factory=dict)
    accepted: bool = False  # turn_started was committed
    cancel_requested: bool = False  # a cancel was forwarded to the agent during this turn
    number: int | None = None  # turn number, from 1 in start order (set when accepted)
    task: asyncio.Task[None] | None = None  # the supervised task running the turn
    interruption: str = INTERRUPTED  # why the turn ends if its task is cancelled

    def pending(self) -> list[PendingInput]:
        """The parked inputs, oldest first."""
        return sorted((p.pending for p in self.parked.values()), key=lambda p: p.sequence)

    def state(self) -> RunningState | AwaitingInputState:
        """Running, or awaiting_input while anything is parked."""
        pending = self.pending()
        if pending:
            return AwaitingInputState(
                turn_id=self.turn_id, prompt_request_id=self.request_id, pending=pending
            )
        return RunningState(turn_id=self.turn_id, prompt_request_id=self.request_id)

    def drain(self) -> list[PendingInput]:
        """Answer every parked input `cancelled`; returns them, oldest first."""
        drained = self.pending()
        for parked in self.parked.values():
            if not parked.reply.done():
                parked.reply.set_result(None)
        self.parked.clear()
        return drained


def advance(
    prev: SessionActivity, state: IdleState | RunningState | AwaitingInputState | FailedState
) -> SessionActivity:
    """The next revision of `prev` in `state`."""
    return SessionActivity(revision=prev.revision + 1, state=state)


def is_busy(activity: SessionActivity) -> bool:
    """Whether a turn runs (`running` or `awaiting_input`)."""
    return activity.state.kind in ("running", "awaiting_input")
