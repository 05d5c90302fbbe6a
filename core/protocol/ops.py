"""Ops (client -> core) and the prompt documents they carry: one model per op, tagged by `op`,
and their union `Op`, spelled once here (the wire ops and routes of api/ and the engine's
switch derive from it or are checked against it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    field_validator,
    model_validator,
)

from c2.core.protocol.values import (
    ExecutionPolicy,
    PermissionMode,
    ProviderSpec,
    RequestId,
    SandboxPolicy,
    SessionId,
    WorktreeBase,
)


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


# -- Ops (client -> core) --


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
    at_turn: int | None = Field(default=None, ge=0, le=2**31, strict=True)  # true is no turn
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
    to_turn: int | None = Field(default=None, ge=0, le=2**31, strict=True)  # true is no turn
    to_checkpoint: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    force: bool = Field(default=False, strict=True)
    request_id: RequestId | None = None

    @model_validator(mode="after")
    def _one_target(self) -> RewindOp:
        one_rewind_target(self.to_turn, self.to_checkpoint)
        return self


def one_rewind_target(to_turn: int | None, to_checkpoint: str | None) -> None:
    """A rewind names exactly one target: a missing or ambiguous one is invalid input (422),
    not a checkpoint that does not exist."""
    if (to_turn is None) == (to_checkpoint is None):
        raise ValueError("name exactly one of to_turn and to_checkpoint")


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
# The op union's members, for what is derived from it (the wire ops and routes of api/).
OP_TYPES: tuple[type[_Op], ...] = get_args(get_args(Op)[0])


def op_tag(op: type[BaseModel]) -> str:
    """The `op` tag of an op model (`PromptOp` → "prompt")."""
    return str(op.model_fields["op"].default)
