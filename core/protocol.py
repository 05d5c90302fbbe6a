"""Wire-exact Op / Event / Part models of the c2 protocol (spec/protocol.txt, API.md).

Owns the JSON shapes only: tagged unions, enums, snapshots. No I/O, no behaviour beyond
(de)serialization. Optional event fields are omitted when absent, except where the protocol
says they are present as null (`error.session`).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, TypeAlias, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    field_validator,
)

# ---------------------------------------------------------------------------------------------
# Enums and small value types


class PermissionMode(StrEnum):
    ASK = "ask"
    ACCEPT_EDITS = "accept_edits"
    YOLO = "yolo"


class SandboxPolicy(StrEnum):
    READ_ONLY = "read_only"
    WORKSPACE_WRITE = "workspace_write"
    DANGER_FULL_ACCESS = "danger_full_access"


class WorktreeBase(StrEnum):
    CURRENT = "current"
    ORIGIN_DEFAULT = "origin_default"


class StopReason(StrEnum):
    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    MAX_TURN_REQUESTS = "max_turn_requests"
    REFUSAL = "refusal"
    CANCELLED = "cancelled"


# The documented builtin provider ids, spelled once: the tuple and the wire type derive from it.
DocumentedProvider: TypeAlias = Literal[
    "claude_code",
    "codex",
    "grok",
    "cursor",
    "opencode",
    "opencode2",
    "pi",
    "kimi",
    "zcode",
]
BUILTIN_PROVIDERS: tuple[str, ...] = get_args(DocumentedProvider)
# Serde spellings of the original core; accepted on input, never emitted (API.md §3).
PROVIDER_ALIASES: dict[str, str] = {"open_code": "opencode", "z_code": "zcode"}
BuiltinProvider: TypeAlias = Literal[DocumentedProvider, "open_code", "z_code"]


class CustomProvider(BaseModel):
    model_config = ConfigDict(extra="ignore")
    custom: str = Field(min_length=1, max_length=128)


ProviderSpec: TypeAlias = BuiltinProvider | CustomProvider


def provider_key(provider: ProviderSpec) -> str:
    """Registry key of a provider: the documented builtin id, or `custom:NAME`."""
    if isinstance(provider, CustomProvider):
        return f"custom:{provider.custom}"
    return PROVIDER_ALIASES.get(provider, provider)


def provider_wire(key: str) -> str | dict[str, str]:
    """Wire form of a registry key: a builtin string or `{"custom": NAME}`."""
    if key.startswith("custom:"):
        return {"custom": key.removeprefix("custom:")}
    return key


# Echoed in the `Request-Id` header: printable, no control characters, no whitespace at
# either end (HTTP forbids it there), so the answer to an op always arrives (API.md §1).
REQUEST_ID_PATTERN = r"^[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f])?$"
RequestId = Annotated[str, Field(min_length=1, max_length=128, pattern=REQUEST_ID_PATTERN)]
SessionId = Annotated[str, Field(min_length=1, max_length=128)]
# RFC 3339 UTC timestamps (core.session.rfc3339), typed as such for API clients.
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class ExecutionPolicy(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    mode: PermissionMode
    sandbox: SandboxPolicy


DEFAULT_POLICY = ExecutionPolicy(mode=PermissionMode.ASK, sandbox=SandboxPolicy.WORKSPACE_WRITE)


class WorktreeBaseline(BaseModel):
    """Immutable provenance of a worktree session: the ref and full sha actually used."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    kind: WorktreeBase
    ref: str
    sha: str
    display: str


# ---------------------------------------------------------------------------------------------
# Doc blocks


class TextBlock(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["text"]
    text: str = Field(max_length=1_000_000)


class SkillBlock(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["skill"]
    skill_id: str = Field(min_length=1, max_length=256)
    params: dict[str, str] = Field(default_factory=dict)


class SessionRefBlock(BaseModel):
    """@chat reference: inlines the referenced session's latest transcript page."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["session"]
    session_id: str = Field(min_length=1, max_length=128)


DocBlock = Annotated[TextBlock | SkillBlock | SessionRefBlock, Field(discriminator="type")]
Doc: TypeAlias = list[DocBlock]
PROTOCOL_DOC: TypeAdapter[Doc] = TypeAdapter(Doc)


# ---------------------------------------------------------------------------------------------
# Ops (client -> core)


class _Op(BaseModel):
    model_config = ConfigDict(extra="ignore")


class NewSessionOp(_Op):
    op: Literal["new_session"] = "new_session"
    provider: ProviderSpec
    cwd: str = Field(max_length=4096)
    use_worktree: bool = Field(strict=True)  # "yes" or 1 is a 422, never coerced to true
    worktree_base: WorktreeBase | None = None
    worktree_base_sha: str | None = Field(default=None, max_length=64)
    initial_policy: ExecutionPolicy | None = None
    # ACP's own wire shape (stdio / http / sse); validated by core/mcp_servers.py so a bad
    # entry is a 422 `invalid_mcp_server` naming it, never echoing a secret value.
    mcp_servers: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=32,
        description=(
            "MCP servers for the agent, in ACP's shape: stdio {name, command (absolute), args, "
            'env:[{name,value}]} or {type:"http"|"sse", name, url, headers:[{name,value}]}'
        ),
    )
    request_id: RequestId | None = None

    @field_validator("worktree_base_sha")
    @classmethod
    def _hex_sha(cls, value: str | None) -> str | None:
        if value is not None and not (
            4 <= len(value) <= 64 and all(c in "0123456789abcdefABCDEF" for c in value)
        ):
            raise ValueError("worktree_base_sha must be a hexadecimal commit id")
        return value.lower() if value is not None else None


class PromptOp(_Op):
    op: Literal["prompt"] = "prompt"
    session: SessionId
    doc: Doc = Field(max_length=256)
    request_id: RequestId | None = None


class CancelOp(_Op):
    op: Literal["cancel"] = "cancel"
    session: SessionId


class AnswerPermissionOp(_Op):
    op: Literal["answer_permission"] = "answer_permission"
    session: SessionId
    # The *permission's* input id, per the protocol (not a client correlation id).
    request_id: RequestId
    option_id: str | None = Field(default=None, max_length=256)


class SetExecutionPolicyOp(_Op):
    op: Literal["set_execution_policy"] = "set_execution_policy"
    session: SessionId
    mode: PermissionMode
    sandbox: SandboxPolicy
    request_id: RequestId | None = None


class SetPermissionModeOp(_Op):
    op: Literal["set_permission_mode"] = "set_permission_mode"
    session: SessionId
    mode: PermissionMode


class SetSandboxOp(_Op):
    op: Literal["set_sandbox"] = "set_sandbox"
    session: SessionId
    sandbox: SandboxPolicy


class SetModelOp(_Op):
    op: Literal["set_model"] = "set_model"
    session: SessionId
    model: str = Field(min_length=1, max_length=256)


class SetModeOp(_Op):
    op: Literal["set_mode"] = "set_mode"
    session: SessionId
    mode_id: str = Field(min_length=1, max_length=256)
    request_id: RequestId | None = None


class SetConfigOptionOp(_Op):
    op: Literal["set_config_option"] = "set_config_option"
    session: SessionId
    config_id: str = Field(min_length=1, max_length=256)
    value: str = Field(max_length=4096)


class ForkOp(_Op):
    """Start a new session from this one's turns up to `at_turn` (omitted: the last finished
    one), in a worktree of its own (`use_worktree`, omitted: as the parent) (issue 14)."""

    op: Literal["fork"] = "fork"
    session: SessionId
    at_turn: int | None = Field(default=None, ge=0, le=2**31)
    use_worktree: bool | None = Field(default=None, strict=True)
    request_id: RequestId | None = None


class QueuePromptOp(_Op):
    """Append a prompt to the session's follow-up queue (issue 14 part 3)."""

    op: Literal["queue_prompt"] = "queue_prompt"
    session: SessionId
    doc: Doc = Field(max_length=256)
    request_id: RequestId | None = None


class EditQueuedOp(_Op):
    """Replace the doc of a queued prompt that has not started."""

    op: Literal["edit_queued"] = "edit_queued"
    session: SessionId
    item: str = Field(min_length=1, max_length=64)
    doc: Doc = Field(max_length=256)
    request_id: RequestId | None = None


class RemoveQueuedOp(_Op):
    op: Literal["remove_queued"] = "remove_queued"
    session: SessionId
    item: str = Field(min_length=1, max_length=64)
    request_id: RequestId | None = None


class ResumeQueueOp(_Op):
    op: Literal["resume_queue"] = "resume_queue"
    session: SessionId
    request_id: RequestId | None = None


class RewindOp(_Op):
    """Restore a session's working tree to the state after turn `to_turn` (0: its baseline)
    or to any of its checkpoints `to_checkpoint` (issue 14); exactly one of the two."""

    op: Literal["rewind"] = "rewind"
    session: SessionId
    to_turn: int | None = Field(default=None, ge=0, le=2**31)
    to_checkpoint: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    force: bool = Field(default=False, strict=True)
    request_id: RequestId | None = None


Op = Annotated[
    NewSessionOp
    | PromptOp
    | CancelOp
    | AnswerPermissionOp
    | SetExecutionPolicyOp
    | SetPermissionModeOp
    | SetSandboxOp
    | SetModelOp
    | SetModeOp
    | SetConfigOptionOp
    | RewindOp
    | ForkOp
    | QueuePromptOp
    | EditQueuedOp
    | RemoveQueuedOp
    | ResumeQueueOp,
    Field(discriminator="op"),
]
OP_ADAPTER: TypeAdapter[Op] = TypeAdapter(Op)


# ---------------------------------------------------------------------------------------------
# Activity projection (protocol: Durable session activity)


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
    prompt_request_id: str | None = None


class AwaitingInputState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Literal["awaiting_input"] = "awaiting_input"
    turn_id: str
    prompt_request_id: str | None = None
    pending: list[PendingInput]


class FailedState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Literal["failed"] = "failed"
    turn_id: str | None = None
    reason: Literal["interrupted", "provider_error"]
    message: str


RunState = Annotated[
    IdleState | RunningState | AwaitingInputState | FailedState, Field(discriminator="kind")
]


class SessionActivity(BaseModel):
    model_config = ConfigDict(extra="ignore")
    revision: int = 0
    state: RunState = Field(default_factory=IdleState)

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


# ---------------------------------------------------------------------------------------------
# Transcript parts (protocol: part union)


class PromptPart(BaseModel):
    kind: Literal["prompt"] = "prompt"
    text: str
    display: str


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


# ---------------------------------------------------------------------------------------------
# Session-level state carried in snapshots and events


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


class ForkedFrom(BaseModel):
    """Lineage of a forked session: the parent session and the turn it was forked at."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    session: str
    turn: int


class SessionSnapshot(BaseModel):
    """The session snapshot of API.md §5; optional fields are present as null."""

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
    created_at: Timestamp
    updated_at: Timestamp

    def wire(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["activity"] = self.activity.wire()
        return data


# ---------------------------------------------------------------------------------------------
# Events (core -> client)


class _Event(BaseModel):
    """Base of every event. `encode()` is the wire JSON: absent optionals are omitted, except
    the fields a subclass lists in `_always_present` (present as null)."""

    model_config = ConfigDict(extra="ignore")
    _always_present: ClassVar[frozenset[str]] = frozenset()
    # Declared first so it leads every encoded event (subclasses narrow it to a Literal).
    event: str
    session: str | None

    def encode(self) -> str:
        """Wire JSON, built by pydantic's serializer (the hot path of every agent chunk)."""
        if not self._always_present:
            return self.model_dump_json(exclude_none=True)
        absent = {
            name
            for name in type(self).model_fields
            if getattr(self, name) is None and name not in self._always_present
        }
        return self.model_dump_json(exclude=absent)

    def wire(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.encode())
        return value


class SessionCreated(_Event):
    event: Literal["session_created"] = "session_created"
    session: str
    cwd: str
    project_path: str | None = None
    worktree_path: str | None = None
    worktree_baseline: WorktreeBaseline | None = None
    request_id: str | None = None


class SessionDeleted(_Event):
    """The session was deleted (archived): clients drop it from their lists at once."""

    event: Literal["session_deleted"] = "session_deleted"
    session: str


class SessionTitleChanged(_Event):
    event: Literal["session_title_changed"] = "session_title_changed"
    session: str
    title: str


class SessionActivityChanged(_Event):
    event: Literal["session_activity_changed"] = "session_activity_changed"
    session: str
    activity: SessionActivity


class TurnStarted(_Event):
    event: Literal["turn_started"] = "turn_started"
    session: str
    request_id: str | None = None
    transcript_seq: int | None = None
    turn: int | None = None  # numbered from 1 in start order (issue 14)
    # A forked session's first turn, when its agent got the parent's turns as a primer.
    primed_from: ForkedFrom | None = None


class AgentText(_Event):
    event: Literal["agent_text"] = "agent_text"
    session: str
    message_id: str
    text: str
    transcript_seq: int | None = None


class AgentThought(_Event):
    event: Literal["agent_thought"] = "agent_thought"
    session: str
    text: str
    transcript_seq: int | None = None


class ToolCall(_Event):
    event: Literal["tool_call"] = "tool_call"
    session: str
    id: str
    title: str
    status: str
    kind: str | None = None
    agent_input: dict[str, str] | None = None
    transcript_seq: int | None = None
    content: list[ToolContent] | None = None
    locations: list[ToolLocation] | None = None


class PlanEvent(_Event):
    event: Literal["plan"] = "plan"
    session: str
    entries: list[str]
    transcript_seq: int | None = None


class PermissionRequest(_Event):
    event: Literal["permission_request"] = "permission_request"
    session: str
    request_id: str
    title: str
    options: list[tuple[str, str]]
    # Additive: the ACP kind of the tool call asking (edit, execute, ...), when the agent says.
    tool_kind: str | None = None


class PermissionResolved(_Event):
    """A parked permission request was answered: by a device (`answered_by`), or by c2 itself
    (`answered_by: null`: the turn ended or was cancelled). `option_id: null` is cancelled."""

    event: Literal["permission_resolved"] = "permission_resolved"
    _always_present: ClassVar[frozenset[str]] = frozenset({"option_id", "answered_by"})
    session: str
    request_id: str
    option_id: str | None
    answered_by: AnsweredBy | None
    transcript_seq: int | None = None


class Cost(BaseModel):
    """Money the agent reports having spent (ACP `Cost`)."""

    amount: float
    currency: str


class Usage(_Event):
    """Token use. From an ACP `usage_update`: `input_tokens` is the context's used tokens and
    `output_tokens` 0 (the protocol's legacy shape), with `cost` when reported. From a prompt
    response's `usage` (once per turn, before `turn_ended`): the turn's real counts, with
    `total_tokens` (and the optional breakdowns) present. Absent fields were not reported."""

    event: Literal["usage"] = "usage"
    session: str
    input_tokens: int
    output_tokens: int
    total_tokens: int | None = None
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None
    cost: Cost | None = None


class BudgetLimit(BaseModel):
    """A budget's limits; null: no limit of that kind."""

    max_cost: float | None
    max_tokens: int | None


class BudgetUsed(BaseModel):
    """What a session used against its budget: summed cost and summed total tokens."""

    cost: float
    tokens: int


class BudgetExceeded(_Event):
    """A session's usage went over its budget (once per crossing; core/usage.py)."""

    event: Literal["budget_exceeded"] = "budget_exceeded"
    session: str
    action: Literal["warn", "refuse_new_turns", "cancel_running"]
    limit: BudgetLimit
    used: BudgetUsed

    def encode(self) -> str:
        # An absent limit is present as null.
        return self.model_dump_json()


class ContextWindowEvent(_Event):
    event: Literal["context_window"] = "context_window"
    session: str
    used_tokens: int
    context_window: int


class Models(_Event):
    event: Literal["models"] = "models"
    session: str
    available: list[ModelChoice]
    current: str

    def encode(self) -> str:
        # ModelChoice.description is present as null (original-behaviour §1.6).
        return self.model_dump_json()


class Modes(_Event):
    event: Literal["modes"] = "modes"
    session: str
    available: list[ModeChoice]
    current: str

    def encode(self) -> str:
        # ModeChoice.description is present as null, like models'.
        return self.model_dump_json()


class ConfigOptions(_Event):
    event: Literal["config_options"] = "config_options"
    session: str
    options: list[ConfigOption]

    def encode(self) -> str:
        # Choice descriptions and categories are present as null (original-behaviour §1.6).
        return self.model_dump_json()


class ExecutionPolicyChanged(_Event):
    event: Literal["execution_policy_changed"] = "execution_policy_changed"
    session: str
    policy: ExecutionPolicy
    request_id: str | None = None


class TurnEnded(_Event):
    event: Literal["turn_ended"] = "turn_ended"
    session: str
    stop_reason: StopReason
    turn: int | None = None
    # The working tree as the turn left it: a 40-hex git tree id (issue 14); absent when the
    # session's folder is not a git checkout or the checkpoint could not be taken.
    checkpoint: str | None = None


class QueueItem(BaseModel):
    """A prompt waiting in a session's follow-up queue; `position` counts from 0 (the next)."""

    id: str
    doc: Doc
    request_id: str | None
    position: int


class QueueChanged(_Event):
    """The session's follow-up queue now holds `items` (in order)."""

    event: Literal["queue_changed"] = "queue_changed"
    session: str
    items: list[QueueItem]

    def encode(self) -> str:
        return self.model_dump_json()  # an item's request_id is present as null


class QueuePaused(_Event):
    """The queue stopped starting items until a client resumes it."""

    event: Literal["queue_paused"] = "queue_paused"
    session: str
    reason: Literal["cancelled", "failed", "permission", "interrupted"]


class SessionRewound(_Event):
    """The session's working tree was restored to `checkpoint` (the state after `to_turn`;
    null when it ends no turn); `pre_rewind_checkpoint` holds what was replaced (issue 14)."""

    event: Literal["session_rewound"] = "session_rewound"
    _always_present: ClassVar[frozenset[str]] = frozenset({"to_turn", "request_id"})
    session: str
    to_turn: int | None
    checkpoint: str
    pre_rewind_checkpoint: str
    request_id: str | None = None


class ErrorEvent(_Event):
    event: Literal["error"] = "error"
    _always_present: ClassVar[frozenset[str]] = frozenset({"session"})
    session: str | None
    message: str
    terminal: bool
    request_id: str | None = None
    # Additive: the problem code when the error has one, and what a person needs to act on
    # an agent failure (its authMethods, the tail of its stderr).
    code: str | None = None
    auth_methods: list[AuthMethodInfo] | None = None
    stderr_tail: str | None = None


class WebhookDisabled(_Event):
    """A webhook was disabled after repeated failed deliveries (issue 15); `PATCH
    /v1/webhooks/{id}` with `{"enabled": true}` re-enables it. Not tied to a session."""

    event: Literal["webhook_disabled"] = "webhook_disabled"
    _always_present: ClassVar[frozenset[str]] = frozenset({"session", "last_status"})
    session: None = None
    webhook: str
    url: str
    failures: int
    last_status: int | None


Event = Annotated[
    SessionCreated
    | SessionDeleted
    | SessionTitleChanged
    | SessionActivityChanged
    | TurnStarted
    | AgentText
    | AgentThought
    | ToolCall
    | PlanEvent
    | PermissionRequest
    | PermissionResolved
    | Usage
    | BudgetExceeded
    | ContextWindowEvent
    | Models
    | Modes
    | ConfigOptions
    | ExecutionPolicyChanged
    | TurnEnded
    | SessionRewound
    | QueueChanged
    | QueuePaused
    | ErrorEvent
    | WebhookDisabled,
    Field(discriminator="event"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
