"""Events (core -> client): one model per event kind, tagged by `event`, and their union `Event`.

`encode()` is an event's wire JSON: optional fields are omitted when absent, except where the
protocol says they are present as null (`error.session`). Over 300 lines for a reason: one short
class per event kind of the protocol (docs/protocol.md: Events), read side by side with it;
split further, the union would only be scattered.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from c2.core.protocol.ops import Doc
from c2.core.protocol.state import (
    AnsweredBy,
    AuthMethodInfo,
    ConfigOption,
    ForkedFrom,
    ModeChoice,
    ModelChoice,
    SessionActivity,
    ToolContent,
    ToolLocation,
)
from c2.core.protocol.values import ExecutionPolicy, StopReason, WorktreeBaseline


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
        """Wire JSON; absent optional fields are present as null here."""
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
        """Wire JSON; absent optional fields are present as null here."""
        # ModelChoice.description is present as null (docs/protocol.md §1.6).
        return self.model_dump_json()


class Modes(_Event):
    event: Literal["modes"] = "modes"
    session: str
    available: list[ModeChoice]
    current: str

    def encode(self) -> str:
        """Wire JSON; absent optional fields are present as null here."""
        # ModeChoice.description is present as null, like models'.
        return self.model_dump_json()


class ConfigOptions(_Event):
    event: Literal["config_options"] = "config_options"
    session: str
    options: list[ConfigOption]

    def encode(self) -> str:
        """Wire JSON; absent optional fields are present as null here."""
        # Choice descriptions and categories are present as null (docs/protocol.md §1.6).
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
        """Wire JSON; absent optional fields are present as null here."""
        return self.model_dump_json()  # an item's request_id is present as null


class QueuePaused(_Event):
    """The queue stopped starting items until a client resumes it."""

    event: Literal["queue_paused"] = "queue_paused"
    session: str
    reason: Literal["cancelled", "failed", "permission", "interrupted"]


class QueueResumed(_Event):
    """A client resumed the paused queue: it starts items again (tabs that showed it paused
    learn it here; resuming a queue that was not paused emits nothing)."""

    event: Literal["queue_resumed"] = "queue_resumed"
    session: str


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
    # The `rewind` transcript row written with it (protocol: transcript-backed events).
    transcript_seq: int | None = None


class WorktreeDiscardedEvent(_Event):
    """The session's worktree was removed for good (`DELETE …/worktree`): every tab hides
    what needed it; the snapshot's `worktree_discarded` says the same after a reload."""

    event: Literal["worktree_discarded"] = "worktree_discarded"
    _always_present: ClassVar[frozenset[str]] = frozenset({"deleted_branch"})
    session: str
    worktree_path: str | None
    removed_checkout: bool
    deleted_branch: str | None


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
    | WorktreeDiscardedEvent
    | QueueChanged
    | QueuePaused
    | QueueResumed
    | ErrorEvent
    | WebhookDisabled,
    Field(discriminator="event"),
]
