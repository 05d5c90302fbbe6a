"""What a session holds and shows: its durable activity (docs/protocol.md: Durable session
activity), its transcript parts (the part union), the state its agent reports (models, modes,
config options, context window) and the session snapshot (docs/api.md §5).

Just over 300 lines: the states, parts and agent-reported state that both the snapshot and
the events embed, kept together so `events` imports them from one module.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
)

from c2.core.protocol.values import ExecutionPolicy, Timestamp, WorktreeBaseline


def _absent_when_none() -> Any:
    """An optional field the wire omits when it is None (activity states: docs/api.md §5)."""
    return Field(default=None, exclude_if=lambda value: value is None)


class PendingInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    input_id: str
    kind: Literal["permission"] = "permission"
    title: str
    options: list[tuple[str, str]]
    sequence: int


class IdleState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Literal["idle"] = "idle"


class RunningState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Literal["running"] = "running"
    turn_id: str
    prompt_request_id: str | None = _absent_when_none()


class AwaitingInputState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Literal["awaiting_input"] = "awaiting_input"
    turn_id: str
    prompt_request_id: str | None = _absent_when_none()
    pending: list[PendingInput]


class FailedState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Literal["failed"] = "failed"
    turn_id: str | None = _absent_when_none()
    reason: Literal["interrupted", "provider_error"]
    message: str


RunState = Annotated[
    IdleState | RunningState | AwaitingInputState | FailedState, Field(discriminator="kind")
]


# A session's activity; its states omit their optional fields when absent.
class SessionActivity(BaseModel):
    model_config = ConfigDict(extra="ignore")
    revision: int = 0
    state: RunState = Field(default_factory=IdleState)

    def wire(self) -> dict[str, Any]:
        """The wire form as a dict."""
        return self.model_dump(mode="json")


# -- Transcript parts (docs/protocol.md: part union) --


class ForkedFrom(BaseModel):
    """Lineage of a forked session: the parent session and the turn it was forked at."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    session: str
    turn: int


class PromptPart(BaseModel):
    kind: Literal["prompt"] = "prompt"
    text: str
    display: str
    # A fork's first turn whose agent got the parent's turns as a primer (`turn_started`'s
    # `primed_from`, kept with the prompt so a reload still shows it; issue 14).
    primed_from: ForkedFrom | None = None


class TextPart(BaseModel):
    kind: Literal["text"] = "text"
    text: str


class ReasoningPart(BaseModel):
    kind: Literal["reasoning"] = "reasoning"
    text: str


class ToolContent(BaseModel):
    """One item of a tool call's reviewable content (ACP `ToolCallContent`), size-bounded:
    `text` (output, or the reason a call was refused), `diff` (`path`, `old_text` — absent for a
    new file — and `new_text`) or `terminal` (`terminal_id`). `truncated` marks a shortened one."""

    type: Literal["text", "diff", "terminal"]
    text: str | None = None
    path: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    terminal_id: str | None = None
    truncated: bool | None = None


class ToolLocation(BaseModel):
    """A file (and line) a tool call touches (ACP `ToolCallLocation`)."""

    path: str
    line: int | None = None


class ToolCallPart(BaseModel):
    kind: Literal["tool_call"] = "tool_call"
    id: str
    title: str
    status: str
    tool_kind: str | None = None
    agent_input: dict[str, str] | None = None
    # As last reported by the agent for this update (absent: this update did not report it).
    content: list[ToolContent] | None = None
    locations: list[ToolLocation] | None = None


class PlanPart(BaseModel):
    kind: Literal["plan"] = "plan"
    entries: list[str]


class AnsweredBy(BaseModel):
    """The paired device that answered a permission request."""

    device_id: str
    name: str


class PermissionPart(BaseModel):
    """The answer to a parked permission request: which option (null: cancelled) and which
    device chose it (null: answered by c2 itself, e.g. the turn ended or was cancelled)."""

    kind: Literal["permission"] = "permission"
    input_id: str
    title: str
    option_id: str | None = None
    answered_by: AnsweredBy | None = None


class CheckpointPart(BaseModel):
    """The working tree as a turn left it (issue 14): git tree id `checkpoint` of turn `turn`."""

    kind: Literal["checkpoint"] = "checkpoint"
    turn: int
    checkpoint: str


class RewindPart(BaseModel):
    """The working tree was rewound to the state after `to_turn` (null: to a checkpoint that
    ends no turn); `pre_rewind_checkpoint` restores what it replaced."""

    kind: Literal["rewind"] = "rewind"
    to_turn: int | None = None
    checkpoint: str
    pre_rewind_checkpoint: str


Part = Annotated[
    PromptPart
    | TextPart
    | ReasoningPart
    | ToolCallPart
    | PlanPart
    | PermissionPart
    | CheckpointPart
    | RewindPart,
    Field(discriminator="kind"),
]
PART_ADAPTER: TypeAdapter[Part] = TypeAdapter(Part)


def part_wire(part: Part) -> dict[str, Any]:
    """Wire form of a part: optional fields omitted when absent, except a permission's audit
    fields (`option_id`, `answered_by`), which are present as null."""
    wire = part.model_dump(mode="json", exclude_none=True)
    if isinstance(part, PermissionPart):
        wire.setdefault("option_id", None)
        wire.setdefault("answered_by", None)
    if isinstance(part, RewindPart):
        wire.setdefault("to_turn", None)
    return wire


class TranscriptEntry(BaseModel):
    """One transcript row, or (in a page) consecutive streamed chunks of one agent message or
    thought merged into one part: rows `seq`..`last_seq`, every one of them a chunk of it
    (`last_seq` == `seq` for a single row)."""

    seq: int
    last_seq: int
    role: Literal["user", "agent"]
    part: Part


# -- Session-level state carried in snapshots and events --


class ModelChoice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    name: str
    description: str | None = None


class ModelsState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    available: list[ModelChoice]
    current: str = ""


class ModeChoice(BaseModel):
    """One ACP session mode (e.g. Claude Code's default / acceptEdits / plan)."""

    model_config = ConfigDict(extra="ignore")
    id: str
    name: str
    description: str | None = None


class ModesState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    available: list[ModeChoice]
    current: str = ""


class McpServerSummary(BaseModel):
    """What clients see of an MCP server: never its env, headers, command or url."""

    model_config = ConfigDict(extra="ignore")
    name: str
    type: Literal["stdio", "http", "sse"]


class AuthMethodInfo(BaseModel):
    """An ACP `authMethods` entry as a person reads it (what to run to log in)."""

    model_config = ConfigDict(extra="ignore")
    id: str
    name: str
    description: str | None = None


class ConfigChoice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    name: str
    description: str | None = None


class ConfigOption(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    name: str
    category: str | None = None
    current: str = ""
    choices: list[ConfigChoice] = Field(default_factory=list)


class ContextWindow(BaseModel):
    model_config = ConfigDict(extra="ignore")
    used_tokens: int
    context_window: int


class SessionSnapshot(BaseModel):
    """The session snapshot of docs/api.md §5; optional fields are present as null."""

    id: str
    title: str
    provider: str | dict[str, str]
    model: str | None
    cwd: str
    project_path: str | None
    worktree_path: str | None
    worktree_baseline: WorktreeBaseline | None
    policy: ExecutionPolicy
    activity: SessionActivity
    models: ModelsState | None
    modes: ModesState | None = None
    config_options: list[ConfigOption]
    mcp_servers: list[McpServerSummary] = Field(default_factory=list)
    context_window: ContextWindow | None
    forked_from: ForkedFrom | None = None
    # The session's worktree was discarded: `worktree_path` stays as provenance (issue 14).
    worktree_discarded: bool = False
    # The cluster member whose agent and worktree serve the session (issue 18); null when
    # the server is not clustered.
    owner: str | None = None
    created_at: Timestamp
    updated_at: Timestamp

    def wire(self) -> dict[str, Any]:
        """The wire form as a dict."""
        return self.model_dump(mode="json")
