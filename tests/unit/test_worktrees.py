"""Worktree baselines and session checkouts against real repositories made in tmp dirs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest

from c2.core.protocol.values import WorktreeBase, WorktreeBaseline
from c2.core.worktrees import (
    BaselineChangedError,
    CreatedWorktree,
    WorktreeError,
    WorktreeUnavailableError,
    create_worktree_async,
    discard_worktree_async,
    gitenv,
    preview_baselines_async,
    validate_worktree_async,
)
from c2.core.worktrees.baselines import preview_baselines, resolve_baseline
from c2.core.worktrees.checkouts import create_worktree, discard_worktree, validate_worktree
from tests.gitrepos import RepoFixture, make_repo

CURRENT = WorktreeBase.CURRENT
ORIGIN = WorktreeBase.ORIGIN_DEFAULT
SESSION = "0123abcd-4567-89ef-0123-456789abcdef"


@pytest.fixture
def repo(tmp_path: Path) -> RepoFixture:
    return make_repo(tmp_path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "c2-home" / "worktrees"


def assert_nothing_created(repo: RepoFixture, root: Path) -> None:
    assert repo.worktrees() == [repo.root]
    assert repo.branches() == [repo.branch]
    assert not root.exists() or list(root.iterdir()) == []


# --- baselines -------------------------------------------------------------------------------


def test_preview_baselines_resolves_current_and_origin_default(repo: RepoFixture) -> None:
    """Both entries resolve from a subdirectory: local HEAD, and origin/HEAD's target."""
    current, origin = preview_baselines(str(repo.cwd))
    assert current.resolved == WorktreeBaseline(
        kind=CURRENT, ref="main", sha=repo.head_sha, display=f"main @ {repo.head_sha[:8]}"
    )
    assert origin.resolved == WorktreeBaseline(
        kind=ORIGIN,
        ref="refs/remotes/origin/main",
        sha=repo.origin_sha or "",
        display=f"origin/main @ {(repo.origin_sha or '')[:8]}",
    )
    assert repo.head_sha != repo.origin_sha
    assert origin.wire() == {
        "kind": "origin_default",
        "resolved": {
            "kind": "origin_default",
            "ref": "refs/remotes/origin/main",
            "sha": repo.origin_sha,
            "display": f"origin/main @ {(repo.origin_sha or '')[:8]}",
        },
        "unavailable_reason": None,
    }


def test_resolve_baseline_current_detached_head_is_ref_head(tmp_path: Path) -> None:
    """A detached checkout resolves `current` to ref "HEAD" at the checked-out commit."""
    repo = make_repo(tmp_path, detached=True)
    baseline = resolve_baseline(str(repo.root), CURRENT)
    assert (baseline.ref, baseline.sha) == ("HEAD", repo.head_sha)
    assert baseline.display == f"HEAD @ {repo.head_sha[:8]}"


def test_resolve_baseline_origin_default_uses_stale_local_ref(repo: RepoFixture) -> None:
    """A stale but valid origin/HEAD is used as is: no fetch picks up the newer commit."""
    upstream = repo.advance_origin()
    baseline = resolve_baseline(str(repo.root), ORIGIN)
    assert baseline.sha == repo.origin_sha != upstream
    assert repo.git("rev-parse", "refs/remotes/origin/main") == repo.origin_sha


@pytest.mark.parametrize("with_origin", [True, False])
def test_resolve_baseline_origin_default_missing_ref_is_unavailable(
    tmp_path: Path, with_origin: bool
) -> None:
    """Without refs/remotes/origin/HEAD the choice is unavailable; main is not guessed."""
    repo = make_repo(tmp_path, with_origin=with_origin, origin_head=False)
    current, origin = preview_baselines(str(repo.root))
    assert current.resolved is not None
    assert origin.resolved is None
    assert origin.unavailable_reason is not None
    assert origin.unavailable_reason.startswith(
        "origin default baseline is unavailable: refs/remotes/origin/HEAD is not set"
    )
    with pytest.raises(WorktreeError, match="refs/remotes/origin/HEAD is not set"):
        resolve_baseline(str(repo.root), ORIGIN)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("refs/remotes/origin/gone", "does not resolve to a commit"),
        ("refs/heads/main", "not to a branch under refs/remotes/origin/"),
    ],
)
def test_resolve_baseline_origin_default_invalid_ref_is_rejected(
    repo: RepoFixture, root: Path, target: str, why: str
) -> None:
    """A dangling or foreign origin/HEAD is invalid, with no fallback and no worktree."""
    repo.git("symbolic-ref", "refs/remotes/origin/HEAD", target)
    _, origin = preview_baselines(str(repo.root))
    assert origin.resolved is None
    assert origin.unavailable_reason is not None
    assert origin.unavailable_reason.startswith("origin default baseline is invalid: ")
    assert why in origin.unavailable_reason
    with pytest.raises(WorktreeError, match=why):
        create_worktree(str(repo.root), SESSION, ORIGIN, None, root)
    assert_nothing_created(repo, root)


def test_resolve_baseline_origin_default_plain_ref_is_invalid(repo: RepoFixture) -> None:
    """A non-symbolic refs/remotes/origin/HEAD is reported invalid, not followed."""
    repo.git("symbolic-ref", "--delete", "refs/remotes/origin/HEAD")
    repo.git("update-ref", "--no-deref", "refs/remotes/origin/HEAD", repo.head_sha)
    with pytest.raises(WorktreeError, match="HEAD is not a symbolic ref"):
        resolve_baseline(str(repo.root), ORIGIN)


def test_preview_baselines_outside_a_repository_reports_both_unavailable(
    tmp_path: Path,
) -> None:
    """A plain directory gets a clear unavailable reason for both kinds."""
    plain = tmp_path / "plain"
    plain.mkdir()
    options = asyncio.run(preview_baselines_async(str(plain)))
    assert [o.kind for o in options] == [CURRENT, ORIGIN]
    assert [o.resolved for o in options] == [None, None]
    assert [o.unavailable_reason for o in options] == [
        f"current baseline is unavailable: {plain} is not inside a git repository",
        f"origin default baseline is unavailable: {plain} is not inside a git repository",
    ]


# --- creation --------------------------------------------------------------------------------


def test_create_worktree_checks_out_current_on_a_new_branch(repo: RepoFixture, root: Path) -> None:
    """The checkout is outside the repo, on c2/<id> at HEAD, with cwd the same subdir."""
    created = create_worktree(str(repo.cwd), SESSION, CURRENT, repo.head_sha, root)
    path = Path(created.worktree_path)
    assert path == root.resolve() / "proj-0123abcd"
    assert not path.is_relative_to(repo.root)
    assert created.project_path == str(repo.cwd)
    assert created.cwd == str(path / "pkg")
    assert (path / "pkg" / "module.py").is_file()
    assert created.branch == "c2/0123abcd-4567-89ef-0123-456789abcdef"
    assert created.baseline == resolve_baseline(str(repo.root), CURRENT)
    assert repo.git("-C", str(path), "rev-parse", "HEAD") == repo.head_sha
    assert repo.git("-C", str(path), "symbolic-ref", "--short", "HEAD") == created.branch
    assert repo.worktrees() == [repo.root, path]


def test_a_branch_named_c2_is_named_as_the_obstacle(repo: RepoFixture, root: Path) -> None:
    """git stores branches as paths: a branch `c2` blocks every `c2/<id>`. The refusal says
    so and what to do; nothing is left behind."""
    repo.git("branch", "c2")
    with pytest.raises(WorktreeError, match=r"branch named 'c2'.*git branch -m c2"):
        create_worktree(str(repo.cwd), SESSION, CURRENT, repo.head_sha, root)
    assert repo.worktrees() == [repo.root]
    assert sorted(repo.branches()) == sorted([repo.branch, "c2"])


def test_a_long_project_name_still_gets_a_worktree(tmp_path: Path, root: Path) -> None:
    """A folder name near the file-name limit (255 bytes) is cut for the worktree's folder,
    which adds the session id to it."""
    long = make_repo(tmp_path, name="p" * 250)
    created = create_worktree(str(long.cwd), SESSION, CURRENT, long.head_sha, root)
    folder = Path(created.worktree_path).name
    assert folder == "p" * 200 + "-0123abcd" and len(folder) <= 255


def test_create_worktree_origin_default_uses_exact_local_ref_commit(
    repo: RepoFixture, root: Path
) -> None:
    """origin_default checks out the local origin/HEAD commit, not upstream or local HEAD."""
    repo.advance_origin()
    created = create_worktree(str(repo.root), "s-1", ORIGIN, None, root)
    assert created.baseline.sha == repo.origin_sha
    assert created.baseline.ref == "refs/remotes/origin/main"
    assert created.cwd == created.worktree_path
    assert not (Path(created.worktree_path) / "LOCAL.md").exists()
    assert repo.git("rev-parse", created.branch) == repo.origin_sha


def test_create_worktree_pin_mismatch_creates_nothing(repo: RepoFixture, root: Path) -> None:
    """A moved ref after preview is rejected before any directory, branch or registration."""
    previewed = preview_baselines(str(repo.root))[1].resolved
    assert previewed is not None
    repo.advance_origin()
    assert repo.fetch_origin() != previewed.sha
    with pytest.raises(BaselineChangedError) as caught:
        create_worktree(str(repo.root), SESSION, ORIGIN, previewed.sha, root)
    assert "baseline changed after preview" in caught.value.message
    assert "refresh the baseline picker" in caught.value.message
    assert caught.value.code == "worktree_error"
    assert_nothing_created(repo, root)


def test_create_worktree_accepts_a_matching_pin_prefix(repo: RepoFixture, root: Path) -> None:
    """A pin matches by full sha or by a prefix of at least seven hex digits."""
    created = create_worktree(str(repo.root), "a", CURRENT, repo.head_sha[:7].upper(), root)
    assert created.baseline.sha == repo.head_sha
    with pytest.raises(WorktreeError, match="at least 7 hex digits"):
        create_worktree(str(repo.root), "b", CURRENT, repo.head_sha[:6], root)


def test_create_worktree_missing_subdir_at_baseline_fails_clean(
    repo: RepoFixture, root: Path
) -> None:
    """A session subdir absent from the baseline commit fails without creating anything."""
    repo.commit("new package", {"newpkg/x.py": "X = 1\n"})
    with pytest.raises(WorktreeError, match="directory newpkg does not exist at baseline origin/"):
        create_worktree(str(repo.root / "newpkg"), SESSION, ORIGIN, None, root)
    assert_nothing_created(repo, root)


@pytest.fixture
def hooks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """c2's git runs no hook of the project's (core/worktrees/gitenv.py); these tests fail or
    slow a checkout with one, so they let hooks run."""
    monkeypatch.setattr(gitenv, "NEUTRAL_SETTINGS", {})


@pytest.mark.usefixtures("hooks_run")
def test_create_worktree_failed_checkout_is_rolled_back(repo: RepoFixture, root: Path) -> None:
    """A failure after `git worktree add` ran removes the directory, branch and registration."""
    hook = repo.root / ".git" / "hooks" / "post-checkout"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho hook refused >&2\nexit 3\n", encoding="utf-8")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(WorktreeError) as caught:
        create_worktree(str(repo.root), SESSION, CURRENT, None, root)
    assert caught.value.message == (
        "couldn't create worktree: `git worktree add` failed: hook refused"
    )
    assert_nothing_created(repo, root)


@pytest.mark.usefixtures("hooks_run")
def test_create_worktree_async_cancelled_mid_checkout_leaves_nothing(
    repo: RepoFixture, root: Path, tmp_path: Path
) -> None:
    """Cancelling the caller while git runs waits for it, then removes what it made."""
    started = tmp_path / "hook-started"
    os.mkfifo(started)
    hook = repo.root / ".git" / "hooks" / "post-checkout"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\necho started > '{started}'\nsleep 2\n", encoding="utf-8")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)

    async def main() -> None:
        task = asyncio.create_task(
            create_worktree_async(str(repo.cwd), SESSION, CURRENT, None, root)
        )
        async with asyncio.timeout(10):  # git is now inside `worktree add`, running the hook
            assert await asyncio.to_thread(started.read_text) == "started\n"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=30)

    asyncio.run(main())
    assert_nothing_created(repo, root)


def test_create_worktree_inside_the_repository_is_refused(repo: RepoFixture) -> None:
    """The worktree root must lie outside the source repository."""
    with pytest.raises(WorktreeError, match="is inside the repository"):
        create_worktree(str(repo.root), SESSION, CURRENT, None, repo.root / "wt")
    assert repo.branches() == ["main"]


def test_create_worktree_async_serialises_one_repository(repo: RepoFixture, root: Path) -> None:
    """Concurrent creations on one repository all succeed with their own checkout."""

    async def main() -> list[CreatedWorktree]:
        return await asyncio.gather(
            *(create_worktree_async(str(repo.cwd), f"s{i}", CURRENT, None, root) for i in range(4))
        )

    created = asyncio.run(main())
    assert len({c.worktree_path for c in created}) == 4
    assert len(repo.worktrees()) == 5
    assert sorted(repo.branches()) == ["c2/s0", "c2/s1", "c2/s2", "c2/s3", "main"]


# --- validation and discard ------------------------------------------------------------------


def test_validate_worktree_accepts_an_intact_checkout(repo: RepoFixture, root: Path) -> None:
    """A fresh checkout validates, also from its identity after a JSON round trip."""
    created = create_worktree(str(repo.cwd), SESSION, CURRENT, None, root)
    validate_worktree(created)
    asyncio.run(validate_worktree_async(json.loads(json.dumps(created.identity))))


def test_validate_worktree_detects_a_removed_directory(repo: RepoFixture, root: Path) -> None:
    """A deleted checkout directory makes the session worktree unavailable."""
    created = create_worktree(str(repo.root), SESSION, CURRENT, None, root)
    shutil.rmtree(created.worktree_path)
    with pytest.raises(WorktreeUnavailableError) as caught:
        validate_worktree(created.identity)
    assert caught.value.message == (
        f"session worktree is unavailable: {created.worktree_path} (the directory is missing)"
    )


def test_validate_worktree_detects_a_replaced_directory(repo: RepoFixture, root: Path) -> None:
    """A different directory at the same path (even a copy) is a changed path identity."""
    created = create_worktree(str(repo.root), SESSION, CURRENT, None, root)
    path = Path(created.worktree_path)
    aside = path.with_name("aside")
    os.rename(path, aside)
    shutil.copytree(aside, path, symlinks=True)
    with pytest.raises(WorktreeUnavailableError, match="path identity changed"):
        validate_worktree(created.identity)


def test_validate_worktree_detects_a_switched_branch(repo: RepoFixture, root: Path) -> None:
    """A checkout moved off its session branch is refused, naming both branches."""
    created = create_worktree(str(repo.root), SESSION, CURRENT, None, root)
    repo.git("-C", created.worktree_path, "checkout", "--quiet", "--detach")
    with pytest.raises(WorktreeUnavailableError, match="a detached HEAD checked out, not"):
        validate_worktree(created.identity)


def test_validate_worktree_refuses_a_git_link_replaced_by_a_fifo(
    repo: RepoFixture, root: Path
) -> None:
    """An agent that turns the checkout's `.git` into a FIFO gets a refusal, not a hang."""
    created = create_worktree(str(repo.root), SESSION, CURRENT, None, root)
    link = Path(created.worktree_path) / ".git"
    link.unlink()
    os.mkfifo(link)
    outcome: list[BaseException | None] = []

    def validate() -> None:
        try:
            validate_worktree(created.identity)
            outcome.append(None)
        except WorktreeUnavailableError as exc:
            outcome.append(exc)

    # A daemon thread: without the guard the read would wait forever for a writer.
    worker = threading.Thread(target=validate, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], WorktreeUnavailableError)
    assert "not a worktree link" in str(outcome[0])


def test_discard_worktree_removes_checkout_and_branch(repo: RepoFixture, root: Path) -> None:
    """Discard removes directory, registration and branch; a repeat is a harmless no-op."""
    created = create_worktree(str(repo.cwd), SESSION, CURRENT, None, root)
    (Path(created.cwd) / "scratch.txt").write_text("uncommitted\n", encoding="utf-8")
    result = asyncio.run(discard_worktree_async(created))
    assert (result.removed_checkout, result.deleted_branch) == (True, created.branch)
    assert_nothing_created(repo, root)
    again = discard_worktree(created.identity)
    assert (again.removed_checkout, again.deleted_branch) == (False, None)
    with pytest.raises(WorktreeUnavailableError, match="the directory is missing"):
        validate_worktree(created)


def test_discard_worktree_missing_directory_still_deletes_branch(
    repo: RepoFixture, root: Path
) -> None:
    """With the directory already gone, discard prunes the registration and deletes the branch."""
    created = create_worktree(str(repo.root), SESSION, CURRENT, None, root)
    shutil.rmtree(created.worktree_path)
    result = discard_worktree(created)
    assert (result.removed_checkout, result.deleted_branch) == (False, created.branch)
    assert_nothing_created(repo, root)
