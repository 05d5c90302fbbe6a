"""HTTP request and response bodies that are not protocol models (docs/api.md §2–§4).

Op bodies of resource endpoints carry the op's fields minus what the path names; they are
turned into the protocol's Op models by the routes. Unknown fields are ignored (docs/api.md §1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_validator,
)

from c2.core.protocol.ops import (
    OP_TYPES,
    Doc,
    NewSessionOp,
    Op,
    SkillBlock,
    TextBlock,
    one_rewind_target,
    op_tag,
)
from c2.core.protocol.state import SessionSnapshot
from c2.core.protocol.values import (
    BUILTIN_PROVIDERS,
    PROVIDER_ALIASES,
    PermissionMode,
    RequestId,
    SandboxPolicy,
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

MAX_DEVICE_NAME = 128  # characters of a device's name, paired from the API or `c2 pair`


class PairRequest(_Body):
    token: str = Field(min_length=1, max_length=512)
    device_name: str | None = Field(default=None, max_length=MAX_DEVICE_NAME)


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
# Derived from the protocol's op union, member by member: the protocol models default their
# `op` tag, but on the wire of /v1/ops the tag is what selects the op, so each wire op makes it
# required (an honest schema), bounds a prompt document like the resource routes do, and stays
# a subclass of its protocol Op (the engine switches on those).


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


def _wire_op(op: type[BaseModel]) -> type[BaseModel]:
    """`PromptOp` → `PromptWireOp`: the tag required, a document bounded."""
    fields: dict[str, Any] = {"op": (Literal.__getitem__(op_tag(op)), ...)}
    if "doc" in op.model_fields:
        fields["doc"] = (BoundedDoc, ...)
    name = op.__name__.removesuffix("Op") + "WireOp"
    base = NewSessionBody if op is NewSessionOp else op
    return create_model(name, __base__=base, __module__=__name__, **fields)


if TYPE_CHECKING:
    WireOp = Op
else:
    WireOp = Annotated[
        Union[tuple(_wire_op(op) for op in OP_TYPES)],  # noqa: UP007 - built at run time
        Field(discriminator="op"),
    ]


# -- op bodies of resource endpoints ---------------------------------------------------------


class CorrelatedBody(_Body):
    request_id: RequestId | None = None


class RewindBody(_Body):
    """`POST /v1/sessions/{id}/rewind`: exactly one of `to_turn` (0: the baseline) and
    `to_checkpoint`; `force` replaces changes made outside any turn (they stay restorable)."""

    to_turn: int | None = Field(default=None, ge=0, le=2**31, strict=True)  # true is no turn
    to_checkpoint: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    force: bool = Field(default=False, strict=True)
    request_id: RequestId | None = None

    @model_validator(mode="after")
    def _one_target(self) -> RewindBody:
        one_rewind_target(self.to_turn, self.to_checkpoint)
        return self


class QueueBody(_Body):
    """`POST /v1/sessions/{id}/queue` and `PATCH …/queue/{item}`: the prompt document (its
    `request_id` is the queued turn's, echoed on its `turn_started`)."""

    doc: BoundedDoc
    request_id: RequestId | None = None


class ForkBody(_Body):
    """`POST /v1/sessions/{id}/fork`: the turn to fork at (omitted: the last finished one; 0:
    the baseline) and whether the child gets its own worktree (omitted: as the parent)."""

    at_turn: int | None = Field(default=None, ge=0, le=2**31, strict=True)  # true is no turn
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


class InstanceOut(BaseModel):
    """A live cluster member (issue 18); times are the database's clock."""

    id: str
    url: str
    started_at: Timestamp
    heartbeat_at: Timestamp
    lease_expires_at: Timestamp


class InstanceList(BaseModel):
    kind: Literal["instances"] = "instances"
    instances: list[InstanceOut]
