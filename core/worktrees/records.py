"""What the git side of worktrees hands back: plain records, no GitPython.

The engine holds and passes these at any time; the modules that make them (baselines,
checkouts) load GitPython, which c2 imports only with the first worktree operation, on its
worker thread (~40 ms of CPU and ~3 MB that a server without worktrees never needs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from c2.core.protocol.values import WorktreeBase, WorktreeBaseline


@dataclass(frozen=True)
class BaselineOption:
    """One picker entry: the locally resolved baseline, or why it cannot be used."""

    kind: WorktreeBase
    resolved: WorktreeBaseline | None
    unavailable_reason: str | None

    def wire(self) -> dict[str, Any]:
        """JSON shape of GET /v1/worktree-baselines entries (docs/api.md §4)."""
        return {
            "kind": self.kind.value,
            "resolved": None if self.resolved is None else self.resolved.model_dump(mode="json"),
            "unavailable_reason": self.unavailable_reason,
        }


@dataclass(frozen=True)
class CreatedWorktree:
    """A new session checkout; `identity` is the JSON-safe record revalidation needs."""

    project_path: str
    worktree_path: str
    cwd: str
    branch: str
    baseline: WorktreeBaseline
    identity: dict[str, Any]


@dataclass(frozen=True)
class DiscardResult:
    """What discard_worktree removed."""

    removed_checkout: bool
    deleted_branch: str | None
