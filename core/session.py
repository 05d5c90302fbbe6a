"""The durable session record (domain model) and its snapshot projection (docs/api.md §5).

Repositories in core/store return `SessionRecord`; the engine mutates copies and writes them
back. Nothing here performs I/O.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from c2.core.mcp_servers import McpServer
from c2.core.protocol.state import (
    ConfigOption,
    ContextWindow,
    ForkedFrom,
    ModelsState,
    ModesState,
    SessionActivity,
    SessionSnapshot,
)
from c2.core.protocol.values import DEFAULT_POLICY, ExecutionPolicy, WorktreeBaseline, provider_wire

DEFAULT_TITLE = "Untitled session"


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    """RFC 3339 UTC with a `Z` suffix, millisecond precision."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class SessionRecord:
    """A session as the store keeps it; copies are changed with `evolve`."""

    id: str
    provider: str  # registry key: "codex" or "custom:NAME"
    cwd: str
    project_path: str | None = None
    title: str = DEFAULT_TITLE
    title_origin: str = "default"  # default | automatic | manual (docs/protocol.md §8.3)
    model: str | None = None
    worktree_path: str | None = None
    worktree_baseline: WorktreeBaseline | None = None
    worktree_identity: dict[str, Any] | None = None
    worktree_discarded: bool = False
    policy: ExecutionPolicy = DEFAULT_POLICY
    activity: SessionActivity = field(default_factory=SessionActivity)
    acp_session_id: str | None = None
    models: ModelsState | None = None
    config_options: list[ConfigOption] = field(default_factory=list)
    modes: ModesState | None = None
    # With secrets (env values, headers): sent to the agent and stored for revival only.
    mcp_servers: tuple[McpServer, ...] = ()
    context_window: ContextWindow | None = None
    # A fork's parent and turn (issue 14); `prime` while its agent still needs the parent's
    # turns prepended to the first prompt (no ACP session/fork was available).
    forked_from: ForkedFrom | None = None
    prime: bool = False
    archived: bool = False
    owner: str | None = None  # the cluster member serving it (issue 18); None: not clustered
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)

    def evolve(self, **changes: Any) -> SessionRecord:
        """A copy with `changes` applied and `updated_at` bumped."""
        return replace(self, updated_at=utcnow(), **changes)

    def current_model(self) -> str | None:
        """The model in use: the chosen one, else what the agent reports (its model config
        option, then its `models`); None only when the agent reports none."""
        if self.model:
            return self.model
        option = next((o for o in self.config_options if o.category == "model"), None)
        if option is not None and option.current:
            return option.current
        return self.models.current if self.models is not None and self.models.current else None

    @functools.cached_property
    def snapshot_json(self) -> str:
        """The snapshot's wire JSON, built once per record (the record is immutable)."""
        return json.dumps(self.snapshot().wire(), separators=(",", ":"), ensure_ascii=False)

    def snapshot(self) -> SessionSnapshot:
        """The snapshot clients see: the record's fields of the same name, and the few it
        computes (the provider's wire form, the model in use, what MCP servers it has)."""
        copied = {name: getattr(self, name) for name in _COPIED}
        return SessionSnapshot(
            **copied,
            provider=provider_wire(self.provider),
            model=self.current_model(),
            mcp_servers=[server.summary() for server in self.mcp_servers],
            created_at=rfc3339(self.created_at),
            updated_at=rfc3339(self.updated_at),
        )


# The snapshot fields copied from the record by name; the others are computed above.
_COPIED = tuple(
    name
    for name in SessionSnapshot.model_fields
    if name not in ("provider", "model", "mcp_servers", "created_at", "updated_at")
)
