"""The protocol's enums and small values: permission mode and sandbox, worktree base, stop
reasons, provider ids, request and session ids, timestamps, the execution policy and a
worktree's baseline.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, TypeAlias, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)


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
# Serde spellings of the original core (a documented id with an underscore in it); accepted
# on input, never emitted (docs/api.md §3).
ProviderAlias: TypeAlias = Literal["open_code", "z_code"]
PROVIDER_ALIASES: dict[str, str] = {
    alias: alias.replace("_", "") for alias in get_args(ProviderAlias)
}
if not set(PROVIDER_ALIASES.values()) <= set(BUILTIN_PROVIDERS):
    raise TypeError("a provider alias names no documented provider")
BuiltinProvider: TypeAlias = Literal[DocumentedProvider, ProviderAlias]


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
# either end (HTTP forbids it there), so the answer to an op always arrives (docs/api.md §1).
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
