"""The agent seam: what core needs of one live agent, and how it gets one.

`Agent` is the interface the turn, lifecycle and settings code drive; `AgentProcess`
(core/agents/client.py) is the real one, an ACP subprocess. Core receives an `AgentFactory`
instead of calling `AgentProcess.start`, as httpx receives a transport instead of opening
sockets: tests put a scripted in-process agent behind the same seam (tests/unit/fakeagent.py),
while the subprocess tests stay the contract for the real client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from c2.core.agents.updates import AcpSessionInfo, AgentHandler
from c2.core.protocol.state import AuthMethodInfo, ConfigOption
from c2.core.protocol.values import StopReason


@dataclass(frozen=True)
class LaunchSpec:
    """How to start an agent: argv (never a shell line), full environment, working directory."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str


class ProcessRegistry(Protocol):
    """Told of each agent process group: right after spawn, and once it is gone."""

    async def spawned(self, pid: int) -> None:
        """The leader `pid` (also its process group id) was just started."""

    async def gone(self, pid: int) -> None:
        """The group of leader `pid` was ended."""


class Agent(Protocol):
    """One live agent connection: ACP session requests, the prompt turn, and its end.

    Capabilities are read once `initialize` answered (they never change afterwards). Every
    request raises `AgentError` on failure; `cancel` and `close` never raise.
    """

    pid: int
    supports_load_session: bool
    supports_resume: bool
    supports_fork: bool  # `sessionCapabilities.fork` (unstable in ACP)
    mcp_http: bool
    mcp_sse: bool
    auth_methods: tuple[AuthMethodInfo, ...]

    @property
    def alive(self) -> bool:
        """True while the agent runs and its connection is open."""

    async def new_session(
        self, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        """`session/new` in `cwd` with `mcp_servers` (ACP wire shape)."""

    async def load_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        """`session/load` (advertised by `supports_load_session`)."""

    async def resume_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        """`session/resume` (advertised by `supports_resume`)."""

    async def fork_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        """`session/fork` (advertised by `supports_fork`): a new ACP session continuing
        `acp_session_id`'s conversation, working in `cwd`."""

    async def prompt(self, acp_session_id: str, text: str) -> StopReason:
        """Run one turn; returns after every update that preceded the answer was delivered."""

    async def cancel(self, acp_session_id: str) -> None:
        """`session/cancel`; never raises."""

    async def set_model(self, acp_session_id: str, model_id: str) -> None:
        """`session/set_model`."""

    async def set_mode(self, acp_session_id: str, mode_id: str) -> None:
        """`session/set_mode`."""

    async def set_config_option(
        self, acp_session_id: str, config_id: str, value: str
    ) -> list[ConfigOption]:
        """`session/set_config_option`; returns the agent's new option set."""

    async def close(self, grace: float = 2.0, *, acp_session_id: str | None = None) -> None:
        """End the agent (its `acp_session_id` closed first where supported). Idempotent."""


# Starts an agent for `spec` whose updates and permission asks go to the handler; raises
# AgentError when it can't start. The real one is `AgentProcess.start`.
AgentFactory = Callable[[LaunchSpec, AgentHandler, ProcessRegistry | None], Awaitable[Agent]]
