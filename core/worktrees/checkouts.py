"""Session checkouts: create a git worktree at a baseline, revalidate it, discard it.

Synchronous and blocking (git subprocesses); callers serialise per repository (see
core.worktrees). A failed creation leaves no directory, branch or worktree registration
behind, or says exactly what was kept and where (docs/protocol.md §8.2, §9.3).

Over 300 lines: creation, revalidation and discard share what identifies a session's
checkout (its branch, directory and registration); split, those rules would live twice.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from git.exc import GitCommandError, InvalidGitRepositoryError, NoSuchPathError

from c2.core.errors import BaselineChangedError, WorktreeError, WorktreeUnavailableError
from c2.core.protocol.values import WorktreeBase, WorktreeBaseline
from c2.core.safe_files import read_bounded
from c2.core.worktrees.baselines import resolve_in_repo
from c2.core.worktrees.records import CreatedWorktree, DiscardResult
from c2.core.worktrees.repository import (
    NotACheckoutError,
    SourceCheckout,
    git_message,
    open_checkout,
    ref_exists,
    resolve_dir,
    trusted_repo,
)

BRANCH_PREFIX = "c2/"
REPO_NAME_CHARS = 200  # of a worktree folder's name taken from the repository's
MIN_PIN_LENGTH = 7
MAX_LINK_BYTES = 64 * 1024  # a worktree's `.git` file holds one `gitdir:` line
_CREATE = "couldn't create worktree: "


def branch_for(session_id: str) -> str:
    """Branch of a session's checkout: `c2/` + the session id filtered to [A-Za-z0-9-]."""
    return BRANCH_PREFIX + re.sub(r"[^A-Za-z0-9-]", "", session_id)


def create_worktree(
    source_cwd: str, session_id: str, base: WorktreeBase, expected_sha: str | None, root: Path
) -> CreatedWorktree:
    """Check out a fresh worktree of `source_cwd`'s repository under `root` at `base`."""
    try:
        with open_checkout(source_cwd) as (repo, source):
            baseline = _fresh_baseline(repo, base, expected_sha)
            return _add_worktree(repo, source, session_id, baseline, resolve_dir(root))
    except NotACheckoutError as exc:
        raise WorktreeError(_CREATE + str(exc)) from None


def create_worktree_at(
    source_cwd: str, session_id: str, baseline: WorktreeBaseline, root: Path
) -> CreatedWorktree:
    """Check out a fresh worktree of `source_cwd`'s repository under `root` at an already
    resolved `baseline` (a fork starts where its parent started)."""
    try:
        with open_checkout(source_cwd) as (repo, source):
            return _add_worktree(repo, source, session_id, baseline, resolve_dir(root))
    except NotACheckoutError as exc:
        raise WorktreeError(_CREATE + str(exc)) from None


def _fresh_baseline(repo: git.Repo, base: WorktreeBase, expected: str | None) -> WorktreeBaseline:
    try:
        baseline = resolve_in_repo(repo, base)
    except WorktreeError as exc:
        raise WorktreeError(_CREATE + exc.message) from None
    if expected is None:  # older clients keep click-time resolution (docs/protocol.md)
        return baseline
    want = expected.strip().lower()
    if len(want) < MIN_PIN_LENGTH or not re.fullmatch(r"[0-9a-f]+", want):
        raise WorktreeError(
            f"{_CREATE}worktree_base_sha {expected!r} is not a commit id "
            f"of at least {MIN_PIN_LENGTH} hex digits"
        )
    if not baseline.sha.lower().startswith(want):
        raise BaselineChangedError(
            f"{_CREATE}{base.value} baseline changed after preview: the picker showed "
            f"{want[:12]}, but {baseline.ref} now resolves to {baseline.sha[:12]}; "
            "refresh the baseline picker and choose again"
        )
    return baseline


def _add_worktree(
    repo: git.Repo, source: SourceCheckout, session_id: str, baseline: WorktreeBaseline, root: Path
) -> CreatedWorktree:
    branch = branch_for(session_id)
    if branch == BRANCH_PREFIX:
        raise WorktreeError(f"{_CREATE}session id {session_id!r} has no usable branch characters")
    for inside in (source.root, source.common_dir):
        if root == inside or root.is_relative_to(inside):
            raise WorktreeError(f"{_CREATE}worktree root {root} is inside the repository {inside}")
    if ref_exists(repo, f"refs/heads/{branch}"):
        raise WorktreeError(f"{_CREATE}branch {branch} already exists in {source.common_dir}")
    folder = BRANCH_PREFIX.rstrip("/")
    if ref_exists(repo, f"refs/heads/{folder}"):  # git keeps refs as paths: c2 and c2/x clash
        raise WorktreeError(
            f"{_CREATE}the repository has a branch named {folder!r}, so git cannot make the "
            f"session branches {BRANCH_PREFIX}<id>; rename it (git branch -m {folder} <name>)"
        )
    subdir = source.subdir.as_posix()
    if subdir != "." and _object_type(repo, f"{baseline.sha}:{subdir}") != "tree":
        raise WorktreeError(
            f"{_CREATE}directory {subdir} does not exist at baseline {baseline.display}"
        )
    path = _claim_directory(root, _repo_name(source), branch.removeprefix(BRANCH_PREFIX))
    try:
        repo.git.worktree("add", "--quiet", "-b", branch, str(path), baseline.sha)
        return _describe(source, path, branch, baseline)
    except Exception as exc:  # whatever failed, nothing half-made may stay behind
        reason = str(exc)
        if isinstance(exc, GitCommandError):
            args = exc.command if isinstance(exc.command, list) else [str(exc.command)]
            reason = f"`{' '.join(map(str, args[:3]))}` failed: {git_message(exc)}"
        kept = _remove_checkout(repo, path, branch)
        if kept:
            reason += f"; cleanup failed, kept: {'; '.join(kept)}"
        raise WorktreeError(_CREATE + reason) from None


def _describe(
    source: SourceCheckout, path: Path, branch: str, baseline: WorktreeBaseline
) -> CreatedWorktree:
    with trusted_repo(path) as worktree:
        head = worktree.git.rev_parse("--verify", "HEAD^{commit}")
        on = worktree.git.symbolic_ref("--quiet", "HEAD")
        git_dir = resolve_dir(worktree.git_dir)
    if head != baseline.sha or on != f"refs/heads/{branch}":
        raise WorktreeError(f"new checkout is at {on} {head}, not {branch} {baseline.sha}")
    cwd = path / source.subdir
    if not cwd.is_dir():
        raise WorktreeError(f"directory {source.subdir.as_posix()} is missing in {path}")
    stat = path.stat()
    identity = {
        "worktree_path": str(path),
        "common_dir": str(source.common_dir),
        "git_dir": str(git_dir),
        "branch": branch,
        "device": stat.st_dev,
        "inode": stat.st_ino,
    }
    return CreatedWorktree(str(source.cwd), str(path), str(cwd), branch, baseline, identity)


def _repo_name(source: SourceCheckout) -> str:
    common = source.common_dir
    name = common.parent.name if common.name == ".git" else common.name.removesuffix(".git")
    # Cut so the folder name (with "-" and the session id) stays within NAME_MAX (255).
    return re.sub(r"[^A-Za-z0-9._-]", "-", name)[:REPO_NAME_CHARS].strip(".-") or "repo"


def _claim_directory(root: Path, name: str, session: str) -> Path:
    # mkdir without exist_ok claims the path atomically, so cleanup only ever removes our own
    # directory; `git worktree add` accepts an existing empty directory.
    for candidate in (f"{name}-{session[:8]}", f"{name}-{session}"):
        try:
            root.mkdir(parents=True, exist_ok=True)
            (root / candidate).mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise WorktreeError(f"{_CREATE}cannot create {root / candidate}: {exc}") from None
        return root / candidate
    raise WorktreeError(f"{_CREATE}{root / f'{name}-{session}'} already exists")


def _object_type(repo: git.Repo, spec: str) -> str | None:
    try:
        return str(repo.git.cat_file("-t", spec))
    except GitCommandError:
        return None


def _registered(repo: git.Repo, path: Path) -> dict[str, str] | None:
    """The `git worktree list --porcelain` entry for `path`, or None."""
    listing: str = repo.git.worktree("list", "--porcelain")
    for block in listing.split("\n\n"):
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            entry[key] = value
        if "worktree" in entry and os.path.realpath(entry["worktree"]) == str(path):
            return entry
    return None


def _remove_checkout(repo: git.Repo, path: Path, branch: str) -> list[str]:
    """Best-effort removal of our checkout and branch; returns what had to be kept."""
    kept: list[str] = []
    if _registered(repo, path) is not None:
        try:
            repo.git.worktree("remove", "--force", str(path))
        except GitCommandError:
            pass  # removed below by hand, then pruned
    if path.exists():
        try:
            shutil.rmtree(path)
        except OSError as exc:
            kept.append(f"directory {path} ({exc.strerror or exc})")
    try:
        repo.git.worktree("prune")
    except GitCommandError as exc:
        kept.append(f"`git worktree prune` failed ({git_message(exc)})")
    if _registered(repo, path) is not None:
        kept.append(f"worktree registration of {path} in {repo.common_dir}")
    if ref_exists(repo, f"refs/heads/{branch}"):
        try:
            repo.git.branch("-D", branch)
        except GitCommandError as exc:
            kept.append(f"branch {branch} in {repo.common_dir} ({git_message(exc)})")
    return kept


@dataclass(frozen=True)
class _Identity:
    path: Path
    common_dir: Path
    git_dir: Path
    branch: str
    device: int
    inode: int

    @classmethod
    def of(cls, created: CreatedWorktree | Mapping[str, Any]) -> _Identity:
        data = created.identity if isinstance(created, CreatedWorktree) else created
        try:
            return cls(
                Path(data["worktree_path"]),
                Path(data["common_dir"]),
                Path(data["git_dir"]),
                str(data["branch"]),
                int(data["device"]),
                int(data["inode"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            where = data.get("worktree_path", "?") if isinstance(data, Mapping) else "?"
            raise WorktreeUnavailableError(
                f"session worktree is unavailable: {where} (stored identity is unreadable: {exc})"
            ) from None

    def same_directory(self) -> bool:
        try:
            stat = self.path.stat()
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) == (self.device, self.inode)


def validate_worktree(created: CreatedWorktree | Mapping[str, Any]) -> None:
    """Check the session checkout is still the same directory, registered, on its branch."""
    ident = _Identity.of(created)
    problem = _validation_problem(ident)
    if problem is not None:
        raise WorktreeUnavailableError(f"session worktree is unavailable: {ident.path} ({problem})")


def _validation_problem(ident: _Identity) -> str | None:
    try:
        stat = ident.path.stat()
    except FileNotFoundError:
        return "the directory is missing"
    except OSError as exc:
        return f"the directory cannot be read: {exc.strerror or exc}"
    if not ident.path.is_dir():
        return "the path is no longer a directory"
    if (stat.st_dev, stat.st_ino) != (ident.device, ident.inode):
        return "path identity changed: the directory was replaced"
    if not ident.common_dir.is_dir():
        return f"its repository {ident.common_dir} is missing"
    link = ident.path / ".git"
    try:
        # The checkout is the agent's: its `.git` may have become a FIFO or a symlink anywhere.
        text = read_bounded(link, limit=MAX_LINK_BYTES, root=ident.path).decode("utf-8", "replace")
        gitdir = text.strip().removeprefix("gitdir:").strip()
    except OSError:
        return f"{link} is missing or not a worktree link"
    if resolve_dir(ident.path / gitdir) != ident.git_dir:
        return f"{link} points to {gitdir}, not {ident.git_dir}"
    try:
        with trusted_repo(ident.common_dir) as repo:
            entry = _registered(repo, ident.path)
    except (GitCommandError, InvalidGitRepositoryError, NoSuchPathError) as exc:
        return f"its repository {ident.common_dir} cannot be read: {exc}"
    if entry is None:
        return f"no longer a registered worktree of {ident.common_dir}"
    if "prunable" in entry:
        return f"git considers the worktree prunable: {entry['prunable'] or 'no reason given'}"
    on = entry.get("branch", "").removeprefix("refs/heads/") or "a detached HEAD"
    if on != ident.branch:
        return f"it has {on} checked out, not the session branch {ident.branch}"
    return None


def discard_worktree(created: CreatedWorktree | Mapping[str, Any]) -> DiscardResult:
    """Remove the session checkout and delete its branch; a missing directory is fine."""
    ident = _Identity.of(created)
    if not ident.branch.startswith(BRANCH_PREFIX):  # never delete a branch c2 did not name
        raise WorktreeError(f"couldn't discard worktree: {ident.branch} is not a c2 branch")
    if not ident.common_dir.is_dir():
        if ident.path.exists():
            raise WorktreeError(
                f"couldn't discard worktree: its repository {ident.common_dir} is missing; "
                f"kept {ident.path}"
            )
        return DiscardResult(removed_checkout=False, deleted_branch=None)
    if ident.path.exists() and not ident.same_directory():
        raise WorktreeError(
            f"couldn't discard worktree: {ident.path} is no longer the session's checkout "
            "(path identity changed); kept it and its branch"
        )
    existed = ident.path.exists()
    had_branch = False
    with trusted_repo(ident.common_dir) as repo:
        had_branch = ref_exists(repo, f"refs/heads/{ident.branch}")
        kept = _remove_checkout(repo, ident.path, ident.branch)
    if kept:
        raise WorktreeError(f"couldn't discard worktree: kept {'; '.join(kept)}")
    return DiscardResult(
        removed_checkout=existed, deleted_branch=ident.branch if had_branch else None
    )
