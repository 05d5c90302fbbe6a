"""A scripted in-process agent behind core's agent seam (core/agents/port.py `Agent`), and a
harness running the real engine over a SQLite store with it: turn, permission and settings
logic tested without subprocesses. The subprocess tests (tests/e2e) stay the contract that the
real ACP client behaves as this fake does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from c2.core.agents.port import LaunchSpec, ProcessRegistry
from c2.core.agents.updates import (
    AcpSessionInfo,
    AgentError,
    AgentHandler,
    AgentUpdate,
    PermissionAsk,
    TextChunk,
)
from c2.core.engine import Engine
from c2.core.protocol.ops import NewSessionOp, PromptOp, TextBlock
from c2.core.protocol.state import AuthMethodInfo, ConfigOption, ModelsState, ModesState
from c2.core.protocol.values import StopReason
from c2.core.store.database import Store, sqlite_url
from c2.core.store.events import CommittedEvent

WAIT = 10.0  # bound on any wait for an event (never a timing assertion)
ALLOW_REJECT = [("allow", "Allow", "allow_once"), ("reject", "Reject", "reject_once")]
# One turn of the fake: given the agent and the prompt text, it reports and answers.
Script = Callable[["FakeAgent", str], Awaitable[StopReason]]


async def echo(agent: FakeAgent, text: str) -> StopReason:
    """The default turn: say the prompt back."""
    await agent.say(text)
    return StopReason.END_TURN


@dataclass
class FakeAgent:
    """One scripted agent; `calls` records every request core made of it, in order."""

    handler: AgentHandler
    script: Script = echo
    models: ModelsState | None = None
    modes: ModesState | None = None
    config_options: list[ConfigOption] = field(default_factory=list)
    supports_load_session: bool = False
    supports_resume: bool = False
    supports_fork: bool = False
    mcp_http: bool = False
    mcp_sse: bool = False
    auth_methods: tuple[AuthMethodInfo, ...] = ()
    refuse_switch: bool = False  # set_model / set_mode answer an ACP error
    pid: int = 0
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    _sessions: int = 0

    @property
    def alive(self) -> bool:
        return not self.closed

    # -- what a script does --------------------------------------------------------------------

    async def say(self, text: str) -> None:
        await self.handler.on_update(TextChunk(message_id="m1", text=text))

    async def update(self, update: AgentUpdate) -> None:
        await self.handler.on_update(update)

    async def ask(
        self, kind: str | None, options: list[tuple[str, str, str]] | None = None
    ) -> str | None:
        """A permission request for a tool of `kind`; returns the option core chose."""
        ask = PermissionAsk(
            tool_call_id="t1",
            title=f"Do {kind}",
            kind=kind,
            options=ALLOW_REJECT if options is None else options,
        )
        return await self.handler.on_permission(ask)

    # -- the Agent protocol --------------------------------------------------------------------

    def _info(self, acp_session_id: str) -> AcpSessionInfo:
        return AcpSessionInfo(
            acp_session_id=acp_session_id,
            models=self.models,
            config_options=list(self.config_options),
            modes=self.modes,
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        self._sessions += 1
        self.calls.append(("new_session", cwd))
        return self._info(f"acp-{self.pid}-{self._sessions}")

    async def load_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        self.calls.append(("load_session", acp_session_id))
        return self._info(acp_session_id)

    async def resume_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        self.calls.append(("resume_session", acp_session_id))
        return self._info(acp_session_id)

    async def fork_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        self._sessions += 1
        self.calls.append(("fork_session", acp_session_id, cwd))
        return self._info(f"acp-{self.pid}-{self._sessions}")

    async def prompt(self, acp_session_id: str, text: str) -> StopReason:
        self.calls.append(("prompt", acp_session_id, text))
        if self.closed:
            raise AgentError("prompt failed: acp connection closed")
        return await self.script(self, text)

    async def cancel(self, acp_session_id: str) -> None:
        self.calls.append(("cancel", acp_session_id))
        self.cancelled.set()

    async def set_model(self, acp_session_id: str, model_id: str) -> None:
        self.calls.append(("set_model", acp_session_id, model_id))
        if self.refuse_switch:
            raise AgentError("no such model here")

    async def set_mode(self, acp_session_id: str, mode_id: str) -> None:
        self.calls.append(("set_mode", acp_session_id, mode_id))
        if self.refuse_switch:
            raise AgentError("no such mode here")

    async def set_config_option(
        self, acp_session_id: str, config_id: str, value: str
    ) -> list[ConfigOption]:
        self.calls.append(("set_config_option", acp_session_id, config_id, value))
        self.config_options = [
            o.model_copy(update={"current": value}) if o.id == config_id else o
            for o in self.config_options
        ]
        return list(self.config_options)

    async def close(self, grace: float = 2.0, *, acp_session_id: str | None = None) -> None:
        self.calls.append(("close", acp_session_id))
        self.closed = True


class FakeAgents:
    """The `AgentFactory` handing out FakeAgents built from `template` (keyword defaults)."""

    def __init__(self, **template: Any) -> None:
        self.template = template
        self.started: list[FakeAgent] = []

    async def __call__(
        self, spec: LaunchSpec, handler: AgentHandler, registry: ProcessRegistry | None
    ) -> FakeAgent:
        agent = FakeAgent(handler, pid=len(self.started) + 1, **self.template)
        self.started.append(agent)
        return agent

    @property
    def last(self) -> FakeAgent:
        return self.started[-1]


class Harness:
    """The real engine with fake agents; `events` holds every committed event, in order."""

    def __init__(self, engine: Engine, agents: FakeAgents, cwd: Path) -> None:
        self.engine, self.agents, self.cwd = engine, agents, cwd
        self.events: list[dict[str, Any]] = []
        self._grew = asyncio.Event()

    def publish(self, committed: list[CommittedEvent]) -> None:
        self.events.extend(json.loads(ev.payload) for ev in committed)
        self._grew.set()

    async def new_session(self, **fields: Any) -> str:
        op = NewSessionOp(provider={"custom": "echo"}, cwd=str(self.cwd), use_worktree=False)
        snapshot = await self.engine.submit(op.model_copy(update=fields))
        return snapshot.id  # type: ignore[union-attr]

    async def prompt(self, sid: str, text: str, request_id: str | None = None) -> Any:
        doc = [TextBlock(type="text", text=text)]
        return await self.engine.submit(PromptOp(session=sid, doc=doc, request_id=request_id))

    def of(self, kind: str, sid: str | None = None) -> list[dict[str, Any]]:
        return [
            e for e in self.events if e["event"] == kind and (sid is None or e["session"] == sid)
        ]

    async def until(self, kind: str, *, after: int = 0) -> dict[str, Any]:
        """The first `kind` event at index >= `after`, waiting (bounded) for it."""
        async with asyncio.timeout(WAIT):
            while True:
                for ev in self.events[after:]:
                    if ev["event"] == kind:
                        return ev
                self._grew.clear()
                await self._grew.wait()

    async def turn(self, sid: str, text: str) -> list[dict[str, Any]]:
        """Prompt and wait for the turn to end; the events of that turn."""
        start = len(self.events)
        await self.prompt(sid, text)
        async with asyncio.timeout(WAIT):
            while not any(_ends_turn(e) for e in self.events[start:]):
                self._grew.clear()
                await self._grew.wait()
        return self.events[start:]


def _ends_turn(ev: dict[str, Any]) -> bool:
    return bool(ev["event"] == "turn_ended" or (ev["event"] == "error" and ev["terminal"]))


@asynccontextmanager
async def running(tmp_path: Path, agents: FakeAgents, **engine: Any) -> AsyncIterator[Harness]:
    """A started engine over a fresh SQLite store in `tmp_path`, shut down afterwards."""
    home = tmp_path / "home"
    home.mkdir()
    cwd = tmp_path / "work"
    cwd.mkdir()
    store = Store(sqlite_url(home))
    store.migrate()
    harness = Harness(Engine(store, home, agent_factory=agents, **engine), agents, cwd)
    store.start(harness.publish)
    try:
        await harness.engine.start()
        yield harness
    finally:
        await harness.engine.shutdown()
        await asyncio.to_thread(store.close)
