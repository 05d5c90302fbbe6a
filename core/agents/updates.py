"""Domain values the ACP client hands to the engine: agent updates, permission asks, errors.

Plain frozen dataclasses (the chunks: named tuples), no I/O. The ACP wire shapes never leave
core/agents/; the engine only sees these (docs/protocol.md §3.8, §1.9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeAlias

from c2.core.protocol.events import Cost
from c2.core.protocol.state import (
    AuthMethodInfo,
    ConfigOption,
    ModelsState,
    ModesState,
    ToolContent,
    ToolLocation,
)

# The two chunk updates are named tuples: immutable like the rest, and made for every chunk an
# agent streams, at half a frozen dataclass's cost.


class TextChunk(NamedTuple):
    """An `agent_message_chunk` with text content; `message_id` is stable for one message."""

    message_id: str
    text: str


class ThoughtChunk(NamedTuple):
    """An `agent_thought_chunk` with text content."""

    text: str


@dataclass(frozen=True)
class ToolCallUpdate:
    """A `tool_call` or `tool_call_update`, with remembered title/kind filled in."""

    id: str
    title: str
    status: str
    kind: str | None
    agent_input: dict[str, str] | None
    # Reviewable content and locations, when this update reports them (None: not reported).
    content: list[ToolContent] | None = None
    locations: list[ToolLocation] | None = None


@dataclass(frozen=True)
class PlanUpdate:
    """A `plan` update reduced to its entries' content."""

    entries: list[str]


@dataclass(frozen=True)
class UsageUpdate:
    """A `usage_update`: tokens in context, the context window size, the cost if reported."""

    used: int
    size: int
    cost: Cost | None = None


@dataclass(frozen=True)
class TurnUsage:
    """The `usage` of a `session/prompt` response: the turn's token counts."""

    input_tokens: int
    output_tokens: int
    total_tokens: int | None = None
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None


@dataclass(frozen=True)
class ConfigOptionsUpdate:
    """A `config_option_update`: the agent's full, select-only option set."""

    options: list[ConfigOption]


@dataclass(frozen=True)
class ModeUpdate:
    """A `current_mode_update`: the agent switched its session mode."""

    mode_id: str


AgentUpdate: TypeAlias = (
    TextChunk
    | ThoughtChunk
    | ToolCallUpdate
    | PlanUpdate
    | UsageUpdate
    | TurnUsage
    | ConfigOptionsUpdate
    | ModeUpdate
)


@dataclass(frozen=True)
class PermissionAsk:
    """A `session/request_permission` from the agent, options in ACP order."""

    tool_call_id: str
    title: str
    kind: str | None
    options: list[tuple[str, str, str]]  # (optionId, name, ACP kind e.g. "allow_once")


@dataclass(frozen=True)
class AcpSessionInfo:
    """What `session/new` / `session/load` reported about the agent-side session."""

    acp_session_id: str
    models: ModelsState | None
    config_options: list[ConfigOption]
    modes: ModesState | None = None


class AgentHandler(Protocol):
    """The engine's side of one agent connection."""

    def take_update(self, update: AgentUpdate) -> bool:
        """Handle `update` now if that needs no waiting; False hands it to `on_update` instead.
        Called only while no earlier update is still waiting for `on_update`, so arrival order
        holds (this skips a task hop per chunk: most updates need no wait)."""

    async def on_update(self, update: AgentUpdate) -> None:
        """Called sequentially, in arrival order."""

    async def on_permission(self, ask: PermissionAsk) -> str | None:
        """Return the chosen optionId, or None for cancelled. Called concurrently."""


class AgentError(Exception):
    """An agent failure; `str(error)` is what users see (e.g. "prompt failed: boom"), naming
    the ACP step that failed. `auth_required` (ACP error -32000) comes with the agent's
    `auth_methods`; `stderr_tail` is what the agent wrote to stderr while the step ran."""

    def __init__(
        self,
        message: str,
        *,
        auth_required: bool = False,
        auth_methods: tuple[AuthMethodInfo, ...] = (),
        stderr_tail: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.auth_required = auth_required
        self.auth_methods = auth_methods
        self.stderr_tail = stderr_tail
