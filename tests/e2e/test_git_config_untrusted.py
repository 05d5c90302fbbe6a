"""A project's own git config never makes c2's git commands run a program (docs/security.md).

The repository names a filesystem monitor and a post-checkout hook that each leave a mark;
creating a worktree session, a turn's checkpoints, diffs (from a read-only device too) and a
rewind run c2's git, and none of them may run either program.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import Client
from tests.e2e.test_checkpoints import get_json, rewind, turn, worktree_session
from tests.gitrepos import make_repo


def planted(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """An executable that records each run in a marks file; (program, marks)."""
    marks = tmp_path / f"{name}.marks"
    program = tmp_path / f"{name}.sh"
    program.write_text(f"#!/bin/sh\necho ran >> {marks}\n")
    program.chmod(0o755)
    return program, marks


async def test_a_projects_git_config_runs_nothing_in_c2s_git(
    client: Client, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path, with_origin=False)
    monitor, monitor_marks = planted(tmp_path, "fsmonitor")
    hook, hook_marks = planted(tmp_path, "hook")
    repo.git("config", "core.fsmonitor", str(monitor))
    hooks = repo.root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "post-checkout").symlink_to(hook)
    repo.git("status")  # the plant works: git itself runs the monitor
    assert monitor_marks.exists()
    monitor_marks.unlink()

    sid = (await worktree_session(client, repo))["id"]
    await turn(client, sid, "/write a.txt one")
    await get_json(client, f"/v1/sessions/{sid}/diff")
    await get_json(client, f"/v1/sessions/{sid}/turns/1/diff")
    await rewind(client, sid, to_turn=0)
    plain = (await client.new_session(repo.root))["id"]  # the project folder itself
    await turn(client, plain, "/write b.txt two")
    await get_json(client, f"/v1/sessions/{plain}/diff")
    assert not monitor_marks.exists() and not hook_marks.exists()
