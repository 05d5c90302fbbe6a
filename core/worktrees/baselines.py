"""Worktree baseline resolution: `current` (local HEAD) and `origin_default` (docs/protocol.md).

Reads local refs only. It never fetches, never guesses main/master and never falls back to
another baseline: an unusable choice is reported with its reason (docs/protocol.md §9.3).
"""

from __future__ import annotations

import git
from git.exc import GitCommandError

from c2.core.errors import WorktreeError
from c2.core.protocol.values import WorktreeBase, WorktreeBaseline
from c2.core.worktrees.records import BaselineOption
from c2.core.worktrees.repository import NotACheckoutError, git_message, open_checkout, ref_exists

ORIGIN_HEAD = "refs/remotes/origin/HEAD"
ORIGIN_PREFIX = "refs/remotes/origin/"

_LABEL = {WorktreeBase.CURRENT: "current", WorktreeBase.ORIGIN_DEFAULT: "origin default"}


def preview_baselines(cwd: str) -> list[BaselineOption]:
    """Both picker entries for `cwd`, `current` then `origin_default`, resolved as-is."""
    options: list[BaselineOption] = []
    for kind in (WorktreeBase.CURRENT, WorktreeBase.ORIGIN_DEFAULT):
        try:
            options.append(BaselineOption(kind, resolve_baseline(cwd, kind), None))
        except WorktreeError as exc:
            options.append(BaselineOption(kind, None, exc.message))
    return options


def resolve_baseline(cwd: str, base: WorktreeBase) -> WorktreeBaseline:
    """Resolve `base` for the checkout holding `cwd`; raise WorktreeError with the reason."""
    try:
        with open_checkout(cwd) as (repo, _):
            return resolve_in_repo(repo, base)
    except NotACheckoutError as exc:
        raise WorktreeError(f"{_LABEL[base]} baseline is unavailable: {exc}") from None


def resolve_in_repo(repo: git.Repo, base: WorktreeBase) -> WorktreeBaseline:
    """Resolve `base` in an open checkout; raise WorktreeError with the reason."""
    if base is WorktreeBase.CURRENT:
        return _resolve_current(repo)
    return _resolve_origin_default(repo)


def _resolve_current(repo: git.Repo) -> WorktreeBaseline:
    try:
        sha = repo.git.rev_parse("--verify", "--quiet", "HEAD^{commit}")
    except GitCommandError:
        raise WorktreeError(
            f"current baseline is unavailable: HEAD of {repo.working_tree_dir} has no commit yet"
        ) from None
    try:
        ref = repo.git.symbolic_ref("--quiet", "--short", "HEAD")
    except GitCommandError as exc:
        if exc.status != 1:  # 1 = detached HEAD; anything else is a broken HEAD
            raise WorktreeError(f"current baseline is invalid: {git_message(exc)}") from None
        ref = "HEAD"
    return WorktreeBaseline(
        kind=WorktreeBase.CURRENT, ref=ref, sha=sha, display=f"{ref} @ {sha[:8]}"
    )


def _resolve_origin_default(repo: git.Repo) -> WorktreeBaseline:
    # Only the local symbolic ref counts; `git remote set-head` is the user's job
    # (docs/protocol.md: Ops, new_session).
    try:
        target = repo.git.symbolic_ref("--quiet", ORIGIN_HEAD)
    except GitCommandError as exc:
        if exc.status != 1:
            raise WorktreeError(
                f"origin default baseline is invalid: couldn't read {ORIGIN_HEAD}: "
                f"{git_message(exc)}"
            ) from None
        if ref_exists(repo, ORIGIN_HEAD):
            raise WorktreeError(
                f"origin default baseline is invalid: {ORIGIN_HEAD} is not a symbolic ref"
            ) from None
        raise WorktreeError(
            f"origin default baseline is unavailable: {ORIGIN_HEAD} is not set "
            "(set it with `git remote set-head origin <branch>`)"
        ) from None
    branch = target.removeprefix(ORIGIN_PREFIX)
    if not target.startswith(ORIGIN_PREFIX) or branch in ("", "HEAD"):
        raise WorktreeError(
            f"origin default baseline is invalid: {ORIGIN_HEAD} points to {target}, "
            f"not to a branch under {ORIGIN_PREFIX}"
        )
    try:
        sha = repo.git.rev_parse("--verify", "--quiet", f"{target}^{{commit}}")
    except GitCommandError:
        raise WorktreeError(
            f"origin default baseline is invalid: {ORIGIN_HEAD} points to {target}, "
            "which does not resolve to a commit"
        ) from None
    return WorktreeBaseline(
        kind=WorktreeBase.ORIGIN_DEFAULT,
        ref=target,
        sha=sha,
        display=f"origin/{branch} @ {sha[:8]}",
    )
