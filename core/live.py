"""In-memory state of a session loaded in this process: its record, agent, handler and turn.

`LiveSession.lock` serialises every state change of one session (activity revisions, policy,
model), so revisions are persisted and broadcast in order (docs/protocol.md §4.1).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Protocol

from c2.core.activity import LiveTurn
from c2.core.agents.port import Agent
from c2.core.agents.updates import AgentHandler
from c2.core.session import SessionRecord


class SessionFeed(AgentHandler, Protocol):
    """The session's side of its agent connection (core/agent_feed.py `AgentFeed`): what the
    turn needs beyond the callbacks, to order its closing events after the agent's output."""

    async def flush(self) -> None:
        """Wait until every queued update is committed."""

    def take_lost_writes(self) -> str | None:
        """Why the turn must fail (updates that could not be committed), once; else None."""

    def detach(self) -> None:
        """Record nothing more: the session was dropped from this process (its agent may
        still speak while it is being ended)."""


# Why an agent was restarted, told when it cannot restore the session's context.
STRICTER_POLICY = (
    "the execution policy became stricter, so the agent was restarted to drop the permissions "
    "granted to it"
)
FAILING_AGENT = "the agent kept failing its turns, so it was restarted"


@dataclass(eq=False)
class LiveSession:
    """A session loaded in this process: its record, lock, agent, feed and running turn."""

    record: SessionRecord
    # Builds the session's handler (given the session itself): one per session, for its life.
    feed: InitVar[Callable[[LiveSession], SessionFeed]]
    handler: SessionFeed = field(init=False)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    agent: Agent | None = None
    # The ACP session id valid for *this* agent process (None until session/new or load).
    acp_session_id: str | None = None
    turn: LiveTurn | None = None
    last_used: float = field(default_factory=time.monotonic)
    # A user chose an "always" option: the agent holds a standing grant of its own.
    agent_grants: bool = False
    # Why the agent is restarted before the next turn (None: it is not). Its ACP session is
    # restored, else started fresh and the reason told (`STRICTER_POLICY`, `FAILING_AGENT`).
    needs_acp_restart: str | None = None
    # Turns in a row the running agent failed (reset by a turn it completes).
    failed_turns: int = 0
    # Being deleted: nothing starts on it any more (set under `lock`; ops check it there).
    deleted: bool = False

    def __post_init__(self, feed: Callable[[LiveSession], SessionFeed]) -> None:
        self.handler = feed(self)

    @property
    def id(self) -> str:
        """The session's id."""
        return self.record.id

    @property
    def agent_alive(self) -> bool:
        """Whether the session has an agent that still runs."""
        return self.agent is not None and self.agent.alive

    def touch(self) -> None:
        """Mark the session used now (least recently used sessions are evicted first)."""
        self.last_used = time.monotonic()
