"""In-memory state of a session loaded in this process: its record, agent and turn slot.

`LiveSession.lock` serialises every state change of one session (activity revisions, policy,
model), so revisions are persisted and broadcast in order (original-behaviour §4.1).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from core.activity import LiveTurn
from core.agents.client import AgentProcess
from core.session import SessionRecord


@dataclass(eq=False)
class LiveSession:
    record: SessionRecord
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    agent: AgentProcess | None = None
    # The ACP session id valid for *this* agent process (None until session/new or load).
    acp_session_id: str | None = None
    turn: LiveTurn | None = None
    last_used: float = field(default_factory=time.monotonic)
    # A user chose an "always" option: the agent holds a standing grant of its own.
    agent_grants: bool = False
    # The policy became stricter while the agent held grants: before the next turn the agent
    # is restarted, so its grants die with it (its ACP session is restored, else started fresh).
    needs_acp_restart: bool = False

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def agent_alive(self) -> bool:
        return self.agent is not None and self.agent.alive

    def touch(self) -> None:
        self.last_used = time.monotonic()
