"""Locating the git checkout that holds a directory, and reading git state (GitPython).

Read-only helpers shared by baselines and checkouts; they never fetch and never write.
Failures become plain sentences so callers can put them in client-facing messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import git
from git.exc import GitCommandError, InvalidGitRepositoryError, NoSuchPathError

from c2.core.worktrees.gitenv import neutral_git_env


class NotACheckoutError(Exception):
    """The directory is not inside a usable git working tree; str() is the reason."""


@dataclass(frozen=True)
class SourceCheckout:
    """The selected directory and the working tree around it."""

    cwd: Path  # absolute, symlinks resolved
    root: Path  # root of the working tree holding cwd (a linked worktree's own root)
    subdir: Path  # cwd relative to root; Path(".") at the root
    common_dir: Path  # git dir shared by every worktree of the repository


def resolve_dir(cwd: str | os.PathLike[str]) -> Path:
    """Absolute, symlink-resolved form of `cwd` (relative paths join the process cwd)."""
    return Path(os.path.abspath(cwd)).resolve()


def trusted_repo(path: str | os.PathLike[str], *, search_parents: bool = False) -> git.Repo:
    """A GitPython repository whose commands run no program the project's config names."""
    repo = git.Repo(path, search_parent_directories=search_parents)
    repo.git.update_environment(**neutral_git_env())
    return repo


@contextmanager
def open_checkout(cwd: str | os.PathLike[str]) -> Iterator[tuple[git.Repo, SourceCheckout]]:
    """Open the working tree holding `cwd`; raise NotACheckoutError with the reason if none."""
    path = resolve_dir(cwd)
    if not path.is_dir():
        raise NotACheckoutError(f"{path} is not a directory")
    try:
        repo = trusted_repo(path, search_parents=True)
    except (InvalidGitRepositoryError, NoSuchPathError):
        raise NotACheckoutError(f"{path} is not inside a git repository") from None
    with repo:
        if repo.bare or repo.working_tree_dir is None:
            raise NotACheckoutError(f"{path} is inside a bare git repository, not a checkout")
        root = resolve_dir(repo.working_tree_dir)
        try:
            subdir = path.relative_to(root)
        except ValueError:
            raise NotACheckoutError(f"{path} is not inside the working tree {root}") from None
        if subdir.parts[:1] == (".git",):
            raise NotACheckoutError(f"{path} is inside the git directory of {root}")
        yield repo, SourceCheckout(path, root, subdir, resolve_dir(repo.common_dir))


def common_dir_of(cwd: str | os.PathLike[str]) -> Path | None:
    """Shared git dir of the repository holding `cwd`, or None when there is none."""
    try:
        with open_checkout(cwd) as (_, checkout):
            return checkout.common_dir
    except NotACheckoutError:
        return None


def git_message(exc: GitCommandError) -> str:
    """The useful part of a git failure: its stderr lines, else the command and status."""
    stderr = str(exc.stderr or "")
    quoted = re.fullmatch(r"\s*stderr: '(.*)'\s*", stderr, flags=re.DOTALL)
    text = quoted.group(1) if quoted else stderr
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # git prints progress ("Preparing worktree ...") before the real error; keep the errors.
    errors = [line for line in lines if line.startswith(("fatal:", "error:"))]
    if errors or lines:
        return "; ".join(errors or lines)
    command = exc.command if isinstance(exc.command, str) else " ".join(map(str, exc.command))
    return f"`{command}` exited with status {exc.status}"


def ref_exists(repo: git.Repo, ref: str) -> bool:
    """Whether the full ref name (e.g. `refs/heads/x`) exists and resolves to an object."""
    try:
        repo.git.show_ref("--verify", "--quiet", ref)
    except GitCommandError:
        return False
    return True
