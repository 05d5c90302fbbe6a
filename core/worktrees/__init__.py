"""Worktree baselines and session checkouts (GitPython), plus their async entry points.

The sync functions (`baselines`, `checkouts`) do the git work; the engine awaits the `*_async`
wrappers here, which run them in a worker thread under one asyncio.Lock per repository,
because GitPython has no worktree API and concurrent `git worktree add` on one repository
races (docs/architecture.md §Seams). The wrappers import those modules on that thread, at the
first worktree operation: GitPython costs ~40 ms of CPU and ~3 MB, which a server's start (and
its event loop) should not pay for sessions that may never use a worktree.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from c2.core.errors import BaselineChangedError, WorktreeError, WorktreeUnavailableError
from c2.core.protocol.values import WorktreeBase, WorktreeBaseline
from c2.core.worktrees.records import BaselineOption, CreatedWorktree, DiscardResult

__all__ = [
    "BaselineChangedError",
    "BaselineOption",
    "CreatedWorktree",
    "DiscardResult",
    "WorktreeError",
    "WorktreeUnavailableError",
    "create_worktree_async",
    "create_worktree_at_async",
    "discard_worktree_async",
    "preview_baselines_async",
    "resolve_baseline_async",
    "validate_worktree_async",
]

T = TypeVar("T")
_log = logging.getLogger(__name__)

# asyncio locks belong to one event loop, so the registry is per loop (tests run many loops).
_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def _repository_lock(key: Path) -> asyncio.Lock:
    locks = _LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(str(key), asyncio.Lock())


def _lock_key_of(cwd: str) -> Path:
    from c2.core.worktrees.repository import common_dir_of, resolve_dir

    common = common_dir_of(cwd)
    return common if common is not None else resolve_dir(cwd)


async def _lock_key(cwd: str) -> Path:
    return await asyncio.to_thread(_lock_key_of, cwd)


async def _exclusive(
    key: Path, call: Callable[[], T], undo: Callable[[T], object] | None = None
) -> T:
    """Run `call` in a worker thread while holding the repository's lock."""
    async with _repository_lock(key):
        work = asyncio.ensure_future(asyncio.to_thread(call))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            # A git command cannot be interrupted: keep the repository locked until the thread
            # ends, then undo what it made, since the cancelled caller will never record it.
            await asyncio.wait({work})
            if undo is not None and not work.cancelled() and work.exception() is None:
                try:
                    await asyncio.to_thread(undo, work.result())
                except WorktreeError:
                    _log.warning(
                        "cleanup after a cancelled worktree operation failed", exc_info=True
                    )
            raise


# The worker thread's side of each wrapper: it imports the git module where it runs.


def _preview(cwd: str) -> list[BaselineOption]:
    from c2.core.worktrees.baselines import preview_baselines

    return preview_baselines(cwd)


def _resolve(cwd: str, base: WorktreeBase) -> WorktreeBaseline:
    from c2.core.worktrees.baselines import resolve_baseline

    return resolve_baseline(cwd, base)


def _create(
    source_cwd: str, session_id: str, base: WorktreeBase, expected_sha: str | None, root: Path
) -> CreatedWorktree:
    from c2.core.worktrees.checkouts import create_worktree

    return create_worktree(source_cwd, session_id, base, expected_sha, root)


def _create_at(
    source_cwd: str, session_id: str, baseline: WorktreeBaseline, root: Path
) -> CreatedWorktree:
    from c2.core.worktrees.checkouts import create_worktree_at

    return create_worktree_at(source_cwd, session_id, baseline, root)


def _validate(created: CreatedWorktree | Mapping[str, Any]) -> None:
    from c2.core.worktrees.checkouts import validate_worktree

    validate_worktree(created)


def _discard(created: CreatedWorktree | Mapping[str, Any]) -> DiscardResult:
    from c2.core.worktrees.checkouts import discard_worktree

    return discard_worktree(created)


async def preview_baselines_async(cwd: str) -> list[BaselineOption]:
    """preview_baselines in a worker thread (reads refs only, so no lock)."""
    return await asyncio.to_thread(_preview, cwd)


async def resolve_baseline_async(cwd: str, base: WorktreeBase) -> WorktreeBaseline:
    """resolve_baseline in a worker thread (reads refs only, so no lock)."""
    return await asyncio.to_thread(_resolve, cwd, base)


async def create_worktree_async(
    source_cwd: str, session_id: str, base: WorktreeBase, expected_sha: str | None, root: Path
) -> CreatedWorktree:
    """create_worktree in a worker thread, serialised per repository."""
    call = partial(_create, source_cwd, session_id, base, expected_sha, root)
    return await _exclusive(await _lock_key(source_cwd), call, undo=_discard)


async def create_worktree_at_async(
    source_cwd: str, session_id: str, baseline: WorktreeBaseline, root: Path
) -> CreatedWorktree:
    """create_worktree_at in a worker thread, serialised per repository."""
    call = partial(_create_at, source_cwd, session_id, baseline, root)
    return await _exclusive(await _lock_key(source_cwd), call, undo=_discard)


async def validate_worktree_async(created: CreatedWorktree | Mapping[str, Any]) -> None:
    """validate_worktree in a worker thread."""
    await asyncio.to_thread(_validate, created)


async def discard_worktree_async(created: CreatedWorktree | Mapping[str, Any]) -> DiscardResult:
    """discard_worktree in a worker thread, serialised per repository."""
    identity = created.identity if isinstance(created, CreatedWorktree) else created
    key = identity.get("common_dir")
    lock_key = Path(str(key)) if key else Path(str(identity.get("worktree_path", "")))
    return await _exclusive(lock_key, partial(_discard, created))
