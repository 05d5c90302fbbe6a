"""A rewind changes the folder completely or not at all, and never loses what it cannot keep.

Each test changes a worktree session's files *during* a turn (while the turn waits on a
permission), as an agent's shell commands would: a nested git repository, a folder that
replaces a file and holds ignored files, a file git may not remove.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.e2e.harness import Client, EventReader
from tests.e2e.test_checkpoints import files_of, rewind, worktree_session
from tests.gitrepos import git, make_repo


async def turn_that(client: Client, sid: str, change: Callable[[], None]) -> None:
    """One turn during which `change` alters the files (the turn's own work)."""
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/permission execute Run it")).status_code == 202
        request = await stream.until_event("permission_request")
        change()
        assert (await client.answer(sid, request["request_id"], "allow")).status_code == 200
        await stream.until_event("turn_ended")


async def test_nested_repositories_are_left_alone_and_do_not_block_a_rewind(
    client: Client, tmp_path: Path
) -> None:
    """A turn that clones a repository into the checkout: rewinding it removes the turn's
    other files and leaves the clone as it is (a restore never removes nor rewinds a nested
    repository), and a later rewind sees no outside changes."""
    repo = make_repo(tmp_path, with_origin=False)
    snap = await worktree_session(client, repo)
    sid, worktree = snap["id"], Path(snap["worktree_path"])
    nested = worktree / "vendor" / "up"

    def clone() -> None:
        (worktree / "t1.txt").write_text("turn one\n")
        nested.mkdir(parents=True)
        git(nested, "init", "--quiet")
        (nested / "lib.py").write_text("X = 1\n")
        git(nested, "add", "lib.py")
        git(nested, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")

    await turn_that(client, sid, clone)
    done = await rewind(client, sid, to_turn=0)
    assert not (worktree / "t1.txt").exists()
    assert (nested / "lib.py").read_text() == "X = 1\n"  # untouched, history and all
    assert git(nested, "log", "--format=%s") == "one"
    back = await rewind(client, sid, to_checkpoint=done["pre_rewind_checkpoint"])  # no force
    assert back["to_turn"] == 1 and (worktree / "t1.txt").read_text() == "turn one\n"


async def test_a_rewind_never_deletes_ignored_files_it_cannot_keep(
    client: Client, tmp_path: Path
) -> None:
    """A tracked file became a folder holding an ignored file (a secret, say): rewinding would
    delete that file, which no checkpoint holds, so the rewind is refused naming it and
    nothing changes; once it is moved away the rewind goes through."""
    repo = make_repo(tmp_path, with_origin=False)
    repo.commit("config", {".gitignore": ".env\n", "pkg/conf": "plain\n"})
    snap = await worktree_session(client, repo)
    sid, worktree = snap["id"], Path(snap["worktree_path"])
    conf = worktree / "pkg" / "conf"

    def to_folder() -> None:
        conf.unlink()
        conf.mkdir()
        (conf / "app.yml").write_text("a: 1\n")
        (conf / ".env").write_text("TOKEN=abc\n")

    await turn_that(client, sid, to_folder)
    before = files_of(worktree)
    refused = await rewind(client, sid, 422, to_turn=0, request_id="rw-ignored")
    assert refused["code"] == "worktree_error" and refused["request_id"] == "rw-ignored"
    assert refused["paths"] == ["pkg/conf/.env"]
    assert "pkg/conf/.env" in refused["detail"] and "nothing was changed" in refused["detail"]
    assert files_of(worktree) == before
    forced = await rewind(client, sid, 422, to_turn=0, force=True)  # force cannot keep it
    assert forced["paths"] == ["pkg/conf/.env"] and files_of(worktree) == before

    (conf / ".env").rename(worktree / ".env")  # ignored there too: no outside change
    await rewind(client, sid, to_turn=0)
    assert conf.read_text() == "plain\n"
    assert (worktree / ".env").read_text() == "TOKEN=abc\n"


@pytest.mark.skipif(shutil.which("chattr") is None, reason="needs chattr")
async def test_a_rewind_that_cannot_complete_changes_nothing(
    client: Client, tmp_path: Path
) -> None:
    """A file git may not remove (immutable): the rewind fails, puts back what it had already
    changed, says so, and records nothing; once the file may go, the same rewind succeeds."""
    repo = make_repo(tmp_path, with_origin=False)
    snap = await worktree_session(client, repo)
    sid, worktree = snap["id"], Path(snap["worktree_path"])
    stuck = worktree / "pkg" / "stuck.txt"

    def write() -> None:
        (worktree / "a.txt").write_text("one\n")
        stuck.write_text("immutable\n")

    await turn_that(client, sid, write)
    if (await anyio.run_process(["chattr", "+i", str(stuck)], check=False)).returncode != 0:
        pytest.skip("chattr +i is not permitted here (needs CAP_LINUX_IMMUTABLE)")
    try:
        before = files_of(worktree)
        failed = await rewind(client, sid, 422, to_turn=0, request_id="rw-stuck")
        assert failed["code"] == "worktree_error"
        assert "pkg/stuck.txt" in failed["detail"] and "nothing was changed" in failed["detail"]
        assert files_of(worktree) == before  # a.txt is back
        page = await client.http.get(f"/v1/sessions/{sid}/transcript")
        assert not [e for e in page.json()["entries"] if e["part"]["kind"] == "rewind"]
        again = await rewind(client, sid, 422, to_turn=0)  # no outside changes: its own edits
        assert again["code"] == "worktree_error"
    finally:
        await anyio.run_process(["chattr", "-i", str(stuck)])
    await rewind(client, sid, to_turn=0)
    assert not (worktree / "a.txt").exists() and not stuck.exists()
