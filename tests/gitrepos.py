"""Real git repositories for tests: a checkout with a bare `origin` remote and origin/HEAD.

Built with the git CLI under an isolated config (fixed identity, no global or system config),
so commits work on a fresh machine. Shared by the worktree tests and the API tests.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` with the isolated test identity; return stripped stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | GIT_ENV
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout.strip()


@dataclass
class RepoFixture:
    """A checkout at `root` (branch `branch`), optionally with a bare `origin`.

    `origin_sha` is the local refs/remotes/origin/<branch>; `head_sha` is one local commit
    ahead of it when there is an origin, so the two baselines differ.
    """

    root: Path
    cwd: Path  # root / subdir, or root when subdir is None
    subdir: str | None
    branch: str
    head_sha: str
    origin: Path | None
    origin_sha: str | None

    def git(self, *args: str) -> str:
        """Run git in the checkout root."""
        return git(self.root, *args)

    def commit(self, message: str, files: dict[str, str]) -> str:
        """Write `files` (relative paths), commit them on HEAD and return the new sha."""
        for name, text in files.items():
            target = self.root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        self.git("add", "--", *files)
        self.git("commit", "--quiet", "-m", message)
        self.head_sha = self.git("rev-parse", "HEAD")
        return self.head_sha

    def advance_origin(self, message: str = "upstream change") -> str:
        """Add a commit to origin's branch without fetching, leaving the local ref stale."""
        assert self.origin is not None and self.origin_sha is not None
        parent = git(self.origin, "rev-parse", f"refs/heads/{self.branch}")
        sha = git(self.origin, "commit-tree", f"{parent}^{{tree}}", "-p", parent, "-m", message)
        git(self.origin, "update-ref", f"refs/heads/{self.branch}", sha)
        return sha

    def fetch_origin(self) -> str:
        """Fetch from the local bare origin (the user's action) and return the new origin sha."""
        self.git("fetch", "--quiet", "origin")
        self.origin_sha = self.git("rev-parse", f"refs/remotes/origin/{self.branch}")
        return self.origin_sha

    def worktrees(self) -> list[Path]:
        """Registered worktree paths, main checkout first."""
        listing = self.git("worktree", "list", "--porcelain").splitlines()
        return [Path(line.split(" ", 1)[1]) for line in listing if line.startswith("worktree ")]

    def branches(self) -> list[str]:
        """Local branch names."""
        return self.git("for-each-ref", "--format=%(refname:short)", "refs/heads").splitlines()


def make_repo(
    tmp_path: Path,
    *,
    with_origin: bool = True,
    origin_head: bool = True,
    detached: bool = False,
    subdir: str | None = "pkg",
    name: str = "proj",
    branch: str = "main",
) -> RepoFixture:
    """Build `tmp_path/name` with history, a bare `tmp_path/origin.git` and origin/HEAD."""
    root = tmp_path / name
    root.mkdir(parents=True)
    git(root, "init", "--quiet", "--initial-branch", branch)
    repo = RepoFixture(root, root, subdir, branch, "", None, None)
    files = {"README.md": "hello\n"}
    if subdir is not None:
        files[f"{subdir}/module.py"] = "VALUE = 1\n"
        repo.cwd = root / subdir
    repo.commit("initial", files)
    if with_origin:
        origin = tmp_path / "origin.git"
        git(tmp_path, "init", "--quiet", "--bare", "--initial-branch", branch, str(origin))
        repo.git("remote", "add", "origin", str(origin))
        repo.git("push", "--quiet", "origin", f"{branch}:{branch}")
        repo.origin = origin
        repo.origin_sha = repo.git("rev-parse", f"refs/remotes/origin/{branch}")
        if origin_head:
            repo.git("remote", "set-head", "origin", branch)  # local only with a branch given
        repo.commit("local work", {"LOCAL.md": "not pushed\n"})
    if detached:
        repo.git("checkout", "--quiet", "--detach")
    return repo
