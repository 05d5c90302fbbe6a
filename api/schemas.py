"""HTTP request and response bodies that are not protocol models (API.md §2–§4).

Op bodies of resource endpoints carry the op's fields minus what the path names; they are
turned into the protocol's Op models by the routes. Unknown fields are ignored (API.md §1).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from core.protocol import (
    BUILTIN_PROVIDERS,
    PROVIDER_ALIASES,
    AnswerPermissionOp,
    CancelOp,
    Doc,
    EditQueuedOp,
    ForkOp,
    NewSessionOp,
    PermissionMode,
    PromptOp,
    QueuePromptOp,
    RemoveQueuedOp,
    RequestId,
    ResumeQueueOp,
    RewindOp,
    SandboxPolicy,
    SessionSnapshot,
    SetConfigOptionOp,
    SetExecutionPolicyOp,
    SetModelOp,
    SetModeOp,
    SetPermissionModeOp,
    SetSandboxOp,
    SkillBlock,
    TextBlock,
    Timestamp,
)

# What one prompt document may carry in total (text blocks plus skill parameters), whatever
# the body limit allows: bounds the stored prompt, the compiled prompt and the agent's input.
MAX_PROMPT_CHARS = 1_000_000


def _bounded_doc(doc: Doc) -> Doc:
    total = 0
    for block in doc:
        if isinstance(block, TextBlock):
            total += len(block.text)
        elif isinstance(block, SkillBlock):
            total += sum(len(k) + len(v) for k, v in block.params.items())
    if total > MAX_PROMPT_CHARS:
        raise ValueError(f"the document holds {total} characters; at most {MAX_PROMPT_CHARS}")
    return doc


# A prompt document: 1 to 256 blocks and MAX_PROMPT_CHARS characters in all.
BoundedDoc = Annotated[Doc, Field(min_length=1, max_length=256), AfterValidator(_bounded_doc)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


# -- auth ------------------------------------------------------------------------------------


class PairRequest(_Body):
    token: str = Field(min_length=1, max_length=512)
    device_name: str | None = Field(default=None, max_length=128)


class PairResponse(BaseModel):
    device_id: str
    bearer: str


class TicketResponse(BaseModel):
    ticket: str
    expires_in: int


class DeviceOut(BaseModel):
    id: str
    name: str
    created_at: Timestamp
    last_seen: Timestamp | None
    scopes: list[str]  # read, approve, operate, admin (canonical order)


# -- bare ops (POST /v1/ops) -----------------------------------------------------------------
# The protocol models default their `op` tag; on the wire of /v1/ops the tag is what selects
# the op, so these subclasses make it required (an honest schema) and stay protocol Ops.


class NewSessionBody(NewSessionOp):
    """`POST /v1/sessions`: the protocol op, its sha rule spelled out in the schema."""

    worktree_base_sha: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{4,64}$")

    @field_validator("provider", mode="before")
    @classmethod
    def _teach_custom_providers(cls, value: object) -> object:
        # Without this, an unknown name fails every member of the union at once (noise).
        known = (*BUILTIN_PROVIDERS, *PROVIDER_ALIASES)
        if isinstance(value, str) and value not in known:
            raise ValueError(
                f"unknown built-in provider {value!r}; a custom or demo provider is named as"
                f' {{"custom": "{value}"}} (built-ins: {", ".join(BUILTIN_PROVIDERS)})'
            )
        return value


class NewSessionWireOp(NewSessionBody):
    op: Literal["new_session"]


class PromptWireOp(PromptOp):
    op: Literal["prompt"]
    doc: BoundedDoc


class CancelWireOp(CancelOp):
    op: Literal["cancel"]


class AnswerPermissionWireOp(AnswerPermissionOp):
    op: Literal["answer_permission"]


class SetExecutionPolicyWireOp(SetExecutionPolicyOp):
    op: Literal["set_execution_policy"]


class SetPermissionModeWireOp(SetPermissionModeOp):
    op: Literal["set_permission_mode"]


class SetSandboxWireOp(SetSandboxOp):
    op: Literal["set_sandbox"]


class SetModelWireOp(SetModelOp):
    op: Literal["set_model"]


class SetModeWireOp(SetModeOp):
    op: Literal["set_mode"]


class SetConfigOptionWireOp(SetConfigOptionOp):
    op: Literal["set_config_option"]


class RewindWireOp(RewindOp):
    op: Literal["rewind"]


class ForkWireOp(ForkOp):
    op: Literal["fork"]


class QueuePromptWireOp(QueuePromptOp):
    op: Literal["queue_prompt"]
    doc: BoundedDoc


class EditQueuedWireOp(EditQueuedOp):
    op: Literal["edit_queued"]
    doc: BoundedDoc


class RemoveQueuedWireOp(RemoveQueuedOp):
    op: Literal["remove_queued"]


class ResumeQueueWireOp(ResumeQueueOp):
    op: Literal["resume_queue"]


WireOp = Annotated[
    NewSessionWireOp
    | PromptWireOp
    | CancelWireOp
    | AnswerPermissionWireOp
    | SetExecutionPolicyWireOp
    | SetPermissionModeWireOp
    | SetSandboxWireOp
    | SetModelWireOp
    | SetModeWireOp
    | SetConfigOptionWireOp
    | RewindWireOp
    | ForkWireOp
    | QueuePromptWireOp
    | EditQueuedWireOp
    | RemoveQueuedWireOp
    | ResumeQueueWireOp,
    Field(discriminator="op"),
]


# -- op bodies of resource endpoints ---------------------------------------------------------


class CorrelatedBody(_Body):
    request_id: RequestId | None = None


class RewindBody(_Body):
    """`POST /v1/sessions/{id}/rewind`: exactly one of `to_turn` (0: the baseline) and
    `to_checkpoint`; `force` replaces changes made outside any turn (they stay restorable)."""

    to_turn: int | None = Field(default=None, ge=0, le=2**31)
    to_checkpoint: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    force: bool = Field(default=False, strict=True)
    request_id: RequestId | None = None


class QueueBody(_Body):
    """`POST /v1/sessions/{id}/queue` and `PATCH …/queue/{item}`: the prompt document (its
    `request_id` is the queued turn's, echoed on its `turn_started`)."""

    doc: BoundedDoc
    request_id: RequestId | None = None


class ForkBody(_Body):
    """`POST /v1/sessions/{id}/fork`: the turn to fork at (omitted: the last finished one; 0:
    the baseline) and whether the child gets its own worktree (omitted: as the parent)."""

    at_turn: int | None = Field(default=None, ge=0, le=2**31)
    use_worktree: bool | None = Field(default=None, strict=True)
    request_id: RequestId | None = None


class PromptBody(CorrelatedBody):
    doc: BoundedDoc


class AnswerBody(_Body):
    option_id: str | None = Field(max_length=256)


class PolicyBody(CorrelatedBody):
    mode: PermissionMode
    sandbox: SandboxPolicy


class PermissionModeBody(CorrelatedBody):
    mode: PermissionMode


class SandboxBody(CorrelatedBody):
    sandbox: SandboxPolicy


class ModelBody(CorrelatedBody):
    model: str = Field(min_length=1, max_length=256)


class ModeBody(CorrelatedBody):
    mode_id: str = Field(min_length=1, max_length=256)


class ConfigValueBody(CorrelatedBody):
    value: str = Field(max_length=4096)


class PreviewBody(_Body):
    doc: BoundedDoc


# -- reads -----------------------------------------------------------------------------------


class SessionList(BaseModel):
    """One page of active sessions, newest first; `next_cursor` reads the next (older) page,
    null when there is none."""

    kind: Literal["sessions"] = "sessions"
    sessions: list[SessionSnapshot]
    next_cursor: str | None


class Health(BaseModel):
    status: str
