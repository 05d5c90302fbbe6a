"""The live-agent registry: which sessions are loaded in this process and which hold an agent.

It owns the `LiveSession` map (loaded on demand from the store), the agent slots with their
capacity (least recently used idle agents are closed to make room), starting an agent through
the injected `AgentFactory`, and ending agents: at once, or retired in the background (owned
and awaited at shutdown). Turns, lifecycle and settings reach agents only through it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator

from c2.core.acp_sessions import agent_failure
from c2.core.agents.port import Agent, AgentFactory
from c2.core.agents.updates import AgentError
from c2.core.errors import (
    CapacityError,
    ProviderUnavailableError,
    SessionNotFoundError,
    StoreUnavailableError,
)
from c2.core.live import LiveSession, SessionFeed
from c2.core.processes import AgentRecords
from c2.core.providers import ProviderRegistry
from c2.core.session import SessionRecord
from c2.core.store.database import Store
from c2.core.supervisor import Supervisor

log = logging.getLogger(__name__)


class LiveAgents:
    """Loaded sessions and their agents, capacity-bounded (`max_live_agents`)."""

    def __init__(
        self,
        store: Store,
        providers: ProviderRegistry,
        *,
        feed: Callable[[LiveSession], SessionFeed],
        agent_factory: AgentFactory,
        max_live_agents: int = 32,
    ) -> None:
        self._store = store
        self._providers = providers
        self._feed = feed
        self._agent_factory = agent_factory
        self.max_live_agents = max_live_agents
        self._sessions: dict[str, LiveSession] = {}
        # Sessions holding an agent slot: reserved before the spawn, released on close.
        self._slots: set[LiveSession] = set()
        # Sessions whose accepted turn will start their agent: a slot each, held from before
        # turn_started until that start (or the turn's end without one), so prompts accepted
        # together never outnumber the slots (the last one's turn would fail on capacity).
        self._reserved: set[LiveSession] = set()
        self._process_records = AgentRecords(store)
        # Agents detached from their session and still shutting down (deletion, ignored cancel).
        self._retiring: set[Agent] = set()
        self._closers = Supervisor("agent-close")

    # -- sessions ------------------------------------------------------------------------------

    def new(self, record: SessionRecord) -> LiveSession:
        """A live session for `record` with its handler, not yet registered (see `add`)."""
        return LiveSession(record, self._feed)

    def add(self, live: LiveSession) -> None:
        """Register a loaded session (a new one, once it is persisted)."""
        self._sessions[live.id] = live

    def get(self, session_id: str) -> LiveSession | None:
        """The session if it is loaded in this process (no store read)."""
        return self._sessions.get(session_id)

    def drop(self, session_id: str) -> None:
        """Forget a session (deleted); its agent is closed by the caller."""
        self._sessions.pop(session_id, None)

    def __iter__(self) -> Iterator[LiveSession]:
        return iter(list(self._sessions.values()))

    async def load(self, session_id: str, request_id: str | None = None) -> LiveSession:
        """The loaded session, read from the store on first use; a missing or deleted session
        raises SessionNotFoundError, an unreadable store StoreUnavailableError."""
        live = self._sessions.get(session_id)
        if live is not None and live.deleted:
            raise SessionNotFoundError("no such session", session=session_id, request_id=request_id)
        if live is not None:
            return live
        try:
            record = await self._store.read(lambda r: r.sessions.get(session_id))
        except Exception as exc:
            raise StoreUnavailableError(
                f"couldn't read persisted session {session_id}: {exc}",
                session=session_id,
                request_id=request_id,
            ) from exc
        if record is None or record.archived:
            raise SessionNotFoundError("no such session", session=session_id, request_id=request_id)
        # Another coroutine may have loaded it while we read.
        return self._sessions.setdefault(session_id, self.new(record))

    # -- agents --------------------------------------------------------------------------------

    async def spawn(self, live: LiveSession) -> Agent:
        """Start the session's agent (capacity-checked); raises ProviderUnavailableError."""
        entry = self._providers.get(live.record.provider)
        entry.check_available()
        if live not in self._reserved:
            await self.make_room()
        # Reserved with no await since make_room's last count: concurrent spawns see it.
        self._slots.add(live)
        self._reserved.discard(live)
        try:
            agent = await self._agent_factory(
                entry.launch(live.record.cwd), live.handler, self._process_records
            )
        except AgentError as exc:
            self._slots.discard(live)
            failed = ProviderUnavailableError(
                f"couldn't start provider {entry.display_name}: {exc}", session=live.id
            )
            raise agent_failure(exc, failed) from exc
        except BaseException:
            self._slots.discard(live)
            raise
        self._providers.observe_auth(entry.key, methods=agent.auth_methods)
        live.agent, live.acp_session_id = agent, None
        return agent

    async def respawn(self, live: LiveSession) -> Agent:
        """A fresh agent for the session: the old one (if any) ended first."""
        await self.close(live)
        return await self.spawn(live)

    def reserve(self, live: LiveSession) -> None:
        """Hold a slot for the session's agent, to be started by its turn (`spawn` takes it);
        call right after `make_room`, with no await in between."""
        self._reserved.add(live)

    def release(self, live: LiveSession) -> None:
        """Give back a slot held by `reserve` and not taken (the turn ended without a start)."""
        self._reserved.discard(live)

    def _occupied(self) -> list[LiveSession]:
        """Slots in use: held for a turn, agents starting (no agent yet) or alive."""
        starting = [live for live in self._slots if live.agent is None or live.agent.alive]
        return starting + [live for live in self._reserved if live not in self._slots]

    async def make_room(self, session: str | None = None, request_id: str | None = None) -> None:
        """Make sure a slot is free (closing the least recently used idle agents) or raise
        capacity (for `session`'s request `request_id`, when named). Re-counts after each
        eviction, as other spawns may run meanwhile."""
        while len(occupied := self._occupied()) >= self.max_live_agents:
            idle = [live for live in occupied if live.agent_alive and live.turn is None]
            if not idle:
                raise CapacityError(
                    f"all {self.max_live_agents} live agents are busy",
                    session=session,
                    request_id=request_id,
                    retry_after=5,
                )
            await self.close(min(idle, key=lambda live: live.last_used))

    async def close(self, live: LiveSession) -> None:
        """End the session's agent (session/close first where supported) and free its slot."""
        agent, acp_session = self._detach(live)
        if agent is not None:
            await agent.close(acp_session_id=acp_session)

    def retire(self, live: LiveSession, grace: float) -> Agent | None:
        """Detach the session's agent now and end it in the background (owned, awaited at
        shutdown): session/close, stdin EOF, then TERM and KILL of its group within `grace`s.
        Returns the agent retired, if there was one."""
        agent, acp_session = self._detach(live)
        if agent is None:
            return None
        self._retiring.add(agent)

        async def close() -> None:
            try:
                await agent.close(grace, acp_session_id=acp_session)
            finally:
                self._retiring.discard(agent)

        self._closers.spawn(close(), name=f"agent-close-{agent.pid}")
        return agent

    def _detach(self, live: LiveSession) -> tuple[Agent | None, str | None]:
        """Take the agent off the session and free its slot, synchronously."""
        agent, acp_session = live.agent, live.acp_session_id
        live.agent, live.acp_session_id = None, None
        self._slots.discard(live)
        return agent, acp_session

    async def shutdown(self) -> None:
        """Close every agent, those retiring included (after the turns have ended)."""
        await asyncio.gather(*(self.close(live) for live in self))
        await asyncio.gather(*(agent.close() for agent in list(self._retiring)))
        await self._closers.close()
