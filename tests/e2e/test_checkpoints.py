"""Per-turn checkpoints, diffs and rewind through a real server, agent and git (issue 14).

The scripted agent makes real file changes (`/write`, `/delete`, `/rename`, `/binary`,
`/bigfile`) in a worktree session's checkout or a plain git folder.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import anyio

from tests.e2e.harness import SCRIPTED, Client, EventReader
from tests.gitrepos import RepoFixture, make_repo

HEX40 = re.compile(r"^[0-9a-f]{40}$")


async def worktree_session(client: Client, repo: RepoFixture) -> dict[str, Any]:
    body = {"provider": SCRIPTED, "cwd": str(repo.cwd), "use_worktree": True}
    resp = await client.http.post("/v1/sessions", json=body)
    assert resp.status_code == 201, resp.text
    snap: dict[str, Any] = resp.json()
    return snap


async def turn(client: Client, sid: str, script: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run one turn to its end; (turn_started, turn_ended)."""
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        resp = await client.prompt(sid, script)
        assert resp.status_code == 202, resp.text
        started = await stream.until_event("turn_started")
        ended = await stream.until_event("turn_ended")
    return started, ended


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under `root` (outside .git), by relative path: the tree byte for byte."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def by_path(diff: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in diff["files"]}


def c2_refs(repo: RepoFixture, sid: str) -> list[str]:
    out = repo.git("for-each-ref", "--format=%(refname)", f"refs/c2/checkpoints/{sid}/")
    return out.splitlines()


async def get_json(client: Client, url: str, status: int = 200) -> dict[str, Any]:
    resp = await client.http.get(url)
    assert resp.status_code == status, resp.text
    data: dict[str, Any] = resp.json()
    return data


async def rewind(client: Client, sid: str, status: int = 200, **body: Any) -> dict[str, Any]:
    resp = await client.http.post(f"/v1/sessions/{sid}/rewind", json=body)
    assert resp.status_code == status, resp.text
    data: dict[str, Any] = resp.json()
    return data


async def test_turn_diffs_are_exact_and_leave_git_state_alone(
    client: Client, tmp_path: Path
) -> None:
    """add/modify/delete/rename/untracked/binary per turn; the checkout's index, the user's
    stash and branches are untouched; turn numbers and checkpoints ride on the events."""
    repo = make_repo(tmp_path, with_origin=False)
    repo.commit("ignore logs", {".gitignore": "*.log\n"})
    (repo.root / "scratch.txt").write_text("stashed work\n")
    repo.git("add", "scratch.txt")
    repo.git("stash", "push", "--quiet", "-m", "mine")
    snap = await worktree_session(client, repo)
    sid, worktree = snap["id"], Path(snap["worktree_path"])
    index = worktree / ".git"
    git_index = Path(repo.git("-C", str(worktree), "rev-parse", "--git-path", "index"))
    git_index = git_index if git_index.is_absolute() else worktree / git_index
    before = (digest(git_index), repo.git("stash", "list"), repo.branches(), digest(index))
    main_index = digest(repo.root / ".git" / "index")

    started, ended = await turn(
        client,
        sid,
        "/write a.txt one\\ntwo\\n\n/binary b.bin 300\n/write module.py VALUE = 2\\n\n"
        "/write debug.log ignored\n",
    )
    assert started["turn"] == 1 and ended["turn"] == 1
    assert HEX40.match(ended["checkpoint"])
    one = await get_json(client, f"/v1/sessions/{sid}/turns/1/diff")
    assert one["session"] == sid and one["turn"] == 1
    assert one["running"] is False and one["truncated"] is False
    files = by_path(one)
    assert set(files) == {"pkg/a.txt", "pkg/b.bin", "pkg/module.py"}  # debug.log: ignored
    assert files["pkg/a.txt"]["status"] == "added" and files["pkg/a.txt"]["old_path"] is None
    assert files["pkg/a.txt"]["diff"].endswith("@@ -0,0 +1,2 @@\n+one\n+two\n")
    assert files["pkg/b.bin"]["binary"] is True and files["pkg/b.bin"]["status"] == "added"
    assert "@@" not in files["pkg/b.bin"]["diff"]
    module = files["pkg/module.py"]
    assert module["status"] == "modified" and module["binary"] is False
    assert "-VALUE = 1\n+VALUE = 2\n" in module["diff"]
    assert not any(f["truncated"] for f in one["files"])

    started, ended = await turn(
        client, sid, "/rename a.txt c.txt\n/delete module.py\n/write new.txt fresh\\n"
    )
    assert started["turn"] == 2 and ended["turn"] == 2
    two = by_path(await get_json(client, f"/v1/sessions/{sid}/turns/2/diff"))
    assert {p: (f["status"], f["old_path"]) for p, f in two.items()} == {
        "pkg/c.txt": ("renamed", "pkg/a.txt"),
        "pkg/module.py": ("deleted", None),
        "pkg/new.txt": ("added", None),
    }
    assert "-VALUE = 2\n" in two["pkg/module.py"]["diff"]
    whole = await get_json(client, f"/v1/sessions/{sid}/diff")
    assert whole["turn"] is None and whole["running"] is False
    assert {p: f["status"] for p, f in by_path(whole).items()} == {
        "pkg/b.bin": "added",
        "pkg/c.txt": "added",
        "pkg/module.py": "deleted",
        "pkg/new.txt": "added",
    }
    # The checkpoint is stored with its turn in the transcript.
    page = await get_json(client, f"/v1/sessions/{sid}/transcript")
    kept = [e["part"] for e in page["entries"] if e["part"]["kind"] == "checkpoint"]
    assert [(p["turn"], p["checkpoint"]) for p in kept][-1] == (2, ended["checkpoint"])
    # Nothing of the user's git state moved: indexes, stash, branches.
    after = (digest(git_index), repo.git("stash", "list"), repo.branches(), digest(index))
    assert after == before and digest(repo.root / ".git" / "index") == main_index
    assert "mine" in after[1]
    assert repo.git("-C", str(worktree), "diff", "--cached", "--name-only") == ""  # unstaged
    assert "?? pkg/new.txt" in repo.git("-C", str(worktree), "status", "--porcelain")
    assert await get_json(client, f"/v1/sessions/{sid}/turns/3/diff", 404)


async def test_running_turn_diff_is_so_far(client: Client, tmp_path: Path) -> None:
    """While a turn runs its diff is `running: true`; after the cancel it is final."""
    repo = make_repo(tmp_path, with_origin=False)
    sid = (await worktree_session(client, repo))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/write live.txt so far\n/hang")).status_code == 202
        await stream.until_event("turn_started")
        url = f"/v1/sessions/{sid}/turns/1/diff"
        for _ in range(200):
            live = await get_json(client, url)
            if live["files"]:
                break
            await anyio.sleep(0.05)
        assert live["running"] is True
        assert [f["path"] for f in live["files"]] == ["pkg/live.txt"]
        running = await get_json(client, f"/v1/sessions/{sid}/diff")
        assert running["running"] is True
        busy = await rewind(client, sid, 409, to_turn=0)
        assert busy["code"] == "turn_already_running"
        await client.http.post(f"/v1/sessions/{sid}/cancel")
        ended = await stream.until_event("turn_ended")
    assert ended["stop_reason"] == "cancelled" and HEX40.match(ended["checkpoint"])
    final = await get_json(client, url)
    assert final["running"] is False and [f["path"] for f in final["files"]] == ["pkg/live.txt"]


async def test_diffs_are_size_bounded(client: Client, tmp_path: Path) -> None:
    """A file's diff is cut at 256 KiB and the answer at 1 MiB, each flagged."""
    repo = make_repo(tmp_path, with_origin=False)
    sid = (await worktree_session(client, repo))["id"]
    await turn(client, sid, "/bigfile big.txt 300\n/write small.txt ok\n")
    one = by_path(await get_json(client, f"/v1/sessions/{sid}/turns/1/diff"))
    assert one["pkg/big.txt"]["truncated"] is True
    assert 200 * 1024 < len(one["pkg/big.txt"]["diff"].encode()) <= 256 * 1024
    assert one["pkg/small.txt"]["truncated"] is False
    await turn(client, sid, "\n".join(f"/bigfile f{i}.txt 200" for i in range(6)))
    two = await get_json(client, f"/v1/sessions/{sid}/turns/2/diff")
    assert two["truncated"] is True and len(two["files"]) == 6  # every file still listed
    assert sum(len(f["diff"].encode()) for f in two["files"]) <= 1024 * 1024
    assert two["files"][-1]["truncated"] is True


async def test_rewind_restores_exactly_and_can_be_undone(client: Client, tmp_path: Path) -> None:
    """Rewind to turn 1, undo it with the pre-rewind checkpoint, rewind to the baseline: the
    tree matches byte for byte each time; ignored files stay; event, transcript, replay."""
    repo = make_repo(tmp_path, with_origin=False)
    repo.commit("ignore logs", {".gitignore": "*.log\n"})
    snap = await worktree_session(client, repo)
    sid, worktree = snap["id"], Path(snap["worktree_path"])
    baseline = files_of(worktree)
    await turn(client, sid, "/write a.txt one\\n\n/binary b.bin 64\n/write module.py V = 2\\n")
    after_one = files_of(worktree)
    _, ended = await turn(client, sid, "/rename a.txt c.txt\n/delete module.py\n/write d/n.txt x")
    after_two = files_of(worktree)
    (worktree / "pkg" / "keep.log").write_text("ignored, never touched\n")

    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        body: dict[str, Any] = {"to_turn": 1, "request_id": "rw-1"}
        done = await rewind(client, sid, **body)
        event = await stream.until_event("session_rewound")
    assert done["session"] == sid and done["to_turn"] == 1
    assert HEX40.match(done["checkpoint"]) and done["pre_rewind_checkpoint"] == ended["checkpoint"]
    seq = event.pop("transcript_seq")  # the `rewind` row written with it
    assert event == {"event": "session_rewound", **done, "request_id": "rw-1"}
    assert files_of(worktree) == after_one | {"pkg/keep.log": b"ignored, never touched\n"}
    assert not (worktree / "pkg" / "d").exists()
    replay = await client.http.post(f"/v1/sessions/{sid}/rewind", json=body)
    assert replay.json() == done and replay.headers["Idempotent-Replayed"] == "true"

    undo = await rewind(client, sid, to_checkpoint=done["pre_rewind_checkpoint"])
    assert undo["to_turn"] == 2 and undo["checkpoint"] == ended["checkpoint"]
    assert files_of(worktree) == after_two | {"pkg/keep.log": b"ignored, never touched\n"}

    await rewind(client, sid, to_turn=0)
    assert files_of(worktree) == baseline | {"pkg/keep.log": b"ignored, never touched\n"}
    page = await get_json(client, f"/v1/sessions/{sid}/transcript")
    rewinds = [e for e in page["entries"] if e["part"]["kind"] == "rewind"]
    assert [e["part"]["to_turn"] for e in rewinds] == [1, 2, 0]
    assert rewinds[0]["seq"] == seq
    # A next turn continues from the rewound tree and is numbered on.
    started, _ = await turn(client, sid, "/write z.txt z")
    assert started["turn"] == 3
    three = await get_json(client, f"/v1/sessions/{sid}/turns/3/diff")
    assert [f["path"] for f in three["files"]] == ["pkg/z.txt"]


async def test_rewind_refusals_and_force(client: Client, tmp_path: Path) -> None:
    """Outside changes: 409 with the paths, `force` replaces them and keeps them restorable;
    unknown turns and checkpoints are 404."""
    repo = make_repo(tmp_path, with_origin=False)
    snap = await worktree_session(client, repo)
    sid, worktree = snap["id"], Path(snap["worktree_path"])
    await turn(client, sid, "/write a.txt one")
    (worktree / "pkg" / "outside.txt").write_text("mine\n")
    (worktree / "README.md").write_text("edited by hand\n")
    refused = await rewind(client, sid, 409, to_turn=0, request_id="rw-x")
    assert refused["code"] == "outside_changes" and refused["request_id"] == "rw-x"
    assert refused["paths"] == ["README.md", "pkg/outside.txt"]
    assert (worktree / "pkg" / "outside.txt").exists()  # nothing changed
    forced = await rewind(client, sid, to_turn=0, force=True)
    assert not (worktree / "pkg" / "outside.txt").exists()
    assert (worktree / "README.md").read_text() == "hello\n"
    await rewind(client, sid, to_checkpoint=forced["pre_rewind_checkpoint"])
    assert (worktree / "pkg" / "outside.txt").read_text() == "mine\n"
    assert (worktree / "README.md").read_text() == "edited by hand\n"
    assert (await rewind(client, sid, 404, to_turn=7))["code"] == "no_such_turn"
    missing = await rewind(client, sid, 404, to_checkpoint="0" * 40)
    assert missing["code"] == "no_such_checkpoint"
    assert (await rewind(client, sid, 422, to_turn=-1))["code"] == "validation_error"
    for loose in (True, "0", 1.0):  # a turn number is an integer, never coerced
        assert (await rewind(client, sid, 422, to_turn=loose))["code"] == "validation_error"
        fork = await client.http.post(f"/v1/sessions/{sid}/fork", json={"at_turn": loose})
        assert fork.status_code == 422, fork.text
    # No target, or two: invalid input, through the resource route and /v1/ops alike.
    for body in ({}, {"to_turn": 1, "to_checkpoint": "0" * 40}):
        both = await client.http.post(f"/v1/sessions/{sid}/rewind", json=body)
        assert both.status_code == 422, both.text
        assert "exactly one of to_turn and to_checkpoint" in both.json()["detail"]
        op = await client.http.post("/v1/ops", json={"op": "rewind", "session": sid, **body})
        assert op.status_code == 422 and op.json()["code"] == "validation_error", op.text


async def test_plain_git_folder_needs_force_and_keeps_the_index(
    client: Client, tmp_path: Path
) -> None:
    """A session in the project folder itself: checkpoints and diffs work without touching
    the user's index or stash; rewind only with force."""
    repo = make_repo(tmp_path, with_origin=False, subdir=None)
    (repo.root / "staged.txt").write_text("staged\n")
    repo.git("add", "staged.txt")
    index = digest(repo.root / ".git" / "index")
    sid = (await client.new_session(repo.root))["id"]
    await turn(client, sid, "/write made.txt by the agent")
    files = by_path(await get_json(client, f"/v1/sessions/{sid}/turns/1/diff"))
    assert list(files) == ["made.txt"]
    assert digest(repo.root / ".git" / "index") == index
    assert repo.git("status", "--porcelain").splitlines() == ["A  staged.txt", "?? made.txt"]
    assert (await rewind(client, sid, 409, to_turn=0))["code"] == "force_required"
    # Changes outside any turn are named first (force covers both).
    (repo.root / "notes.txt").write_text("mine\n")
    outside = await rewind(client, sid, 409, to_turn=0)
    assert outside["code"] == "outside_changes" and outside["paths"] == ["notes.txt"]
    (repo.root / "notes.txt").unlink()
    await rewind(client, sid, to_turn=0, force=True)
    assert not (repo.root / "made.txt").exists() and (repo.root / "staged.txt").exists()
    assert digest(repo.root / ".git" / "index") == index


async def test_checkpoints_need_git_and_go_with_the_session(
    client: Client, tmp_path: Path, workdir: Path
) -> None:
    """A non-git folder has none (409); deleting a session or discarding its worktree removes
    its refs; a deleted session's diffs are 404."""
    plain = (await client.new_session(workdir))["id"]
    await turn(client, plain, "/text hi")
    none = await get_json(client, f"/v1/sessions/{plain}/diff", 409)
    assert none["code"] == "no_checkpoints"
    assert (await rewind(client, plain, 409, to_turn=0))["code"] == "no_checkpoints"  # no force

    repo = make_repo(tmp_path, with_origin=False)
    first = (await worktree_session(client, repo))["id"]
    second = (await worktree_session(client, repo))["id"]
    for sid in (first, second):
        await turn(client, sid, "/write a.txt a")
        assert c2_refs(repo, sid)
    assert (await client.http.delete(f"/v1/sessions/{first}")).status_code == 204
    assert c2_refs(repo, first) == [] and c2_refs(repo, second)
    await get_json(client, f"/v1/sessions/{first}/turns/1/diff", 404)
    await get_json(client, f"/v1/sessions/{first}/diff", 404)
    assert (await client.http.delete(f"/v1/sessions/{second}/worktree")).status_code == 200
    assert c2_refs(repo, second) == []
    gone = await get_json(client, f"/v1/sessions/{second}/diff", 409)
    assert gone["code"] == "no_checkpoints"
