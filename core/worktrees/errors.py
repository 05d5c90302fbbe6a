"""Errors of worktree baselines and session checkouts (protocol.txt new_session, API.md §4).

The engine maps a running turn to its own 409; everything here is a 422 `worktree_error`.
"""

from __future__ import annotations

from core.errors import DomainError


class WorktreeError(DomainError):
    """A baseline could not be resolved, or a session checkout could not be made or used."""

    code = "worktree_error"
    status = 422
    title = "Worktree operation failed"


class BaselineChangedError(WorktreeError):
    """The previewed worktree_base_sha no longer matches the freshly resolved local ref."""


class WorktreeUnavailableError(WorktreeError):
    """A session's checkout is gone, replaced, or no longer a worktree on its branch."""
