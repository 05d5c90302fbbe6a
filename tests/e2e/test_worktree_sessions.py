"""Worktree sessions with pinned baselines through a real server (issue: worktrees)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.e2e.harness import SCRIPTED, Client, EventReader
from tests.gitrepos import make_repo


async def create(client: Client, cwd: Path, **fields: object):
    body = {"provider": SCRIPTED, "cwd": str(cwd), "use_worktree": True, **fields}
    return await client.http.post("/v1/sessions", json=body)


async def test_baseline_picker_shows_current_and_origin_default(
    client: Client, tmp_path: Path
) -> None:
    """GET /v1/worktree-baselines resolves local HEAD and refs/remotes/origin/HEAD."""
    repo = make_repo(tmp_path)
    resp = await client.http.get("/v1/worktree-baselines", params={"cwd": str(repo.cwd)})
    assert resp.status_code == 200, resp.text
    current, origin = resp.json()
    assert repo.origin_sha is not None
    assert current["kind"] == "current" and current["unavailable_reason"] is None
    assert current["resolved"]["ref"] == "main" and current["resolved"]["sha"] == repo.head_sha
    assert origin["resolved"]["ref"] == "refs/remotes/origin/main"
    assert origin["resolved"]["display"] == f"origin/main @ {repo.origin_sha[:8]}"


async def test_worktree_session_receipt_carries_provenance(client: Client, tmp_path: Path) -> None:
    """Omitted base means current; cwd is the same subdir inside a checkout outside the repo."""
    repo = make_repo(tmp_path)
    async with EventReader(client) as stream:
        await stream.frame()
        resp = await create(client, repo.cwd, request_id="wt-1")
        assert resp.status_code == 201, resp.text
        snap = resp.json()
        created = await stream.until_event("session_created", session=snap["id"])
    worktree = Path(snap["worktree_path"])
    assert not worktree.is_relative_to(repo.root)
    assert snap["cwd"] == str(worktree / "pkg")
    assert snap["project_path"] == str(repo.cwd.resolve())
    assert snap["worktree_baseline"]["kind"] == "current"
    assert snap["worktree_baseline"]["sha"] == repo.head_sha
    assert created["worktree_baseline"] == snap["worktree_baseline"]
    assert created["worktree_path"] == snap["worktree_path"] and created["request_id"] == "wt-1"
    assert repo.git("-C", str(worktree), "rev-parse", "HEAD").strip() == repo.head_sha
    # The agent really runs there: a turn works.
    sid = snap["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "hello from the worktree")).status_code == 202
        await stream.until_event("turn_ended")


async def test_origin_default_pin_uses_the_stale_local_ref(client: Client, tmp_path: Path) -> None:
    """origin_default with a matching pin checks out the local origin ref, never fetching."""
    repo = make_repo(tmp_path)
    repo.advance_origin()  # the remote moved; our local ref is stale but valid
    assert repo.origin_sha is not None
    resp = await create(
        client, repo.cwd, worktree_base="origin_default", worktree_base_sha=repo.origin_sha
    )
    assert resp.status_code == 201, resp.text
    baseline = resp.json()["worktree_baseline"]
    assert baseline == {
        "kind": "origin_default",
        "ref": "refs/remotes/origin/main",
        "sha": repo.origin_sha,
        "display": f"origin/main @ {repo.origin_sha[:8]}",
    }


async def test_pin_mismatch_is_rejected_leaving_nothing(client: Client, tmp_path: Path) -> None:
    """A moved baseline rejects creation: correlated terminal error, no worktree, no branch."""
    repo = make_repo(tmp_path)
    before = (repo.worktrees(), repo.branches())
    async with EventReader(client) as stream:
        await stream.frame()
        resp = await create(
            client,
            repo.cwd,
            worktree_base="current",
            worktree_base_sha="0" * 40,
            request_id="pin-1",
        )
        assert resp.status_code == 422
        err = await stream.until_event("error", request_id="pin-1")
    assert "refresh the baseline picker" in resp.json()["detail"]
    assert err["terminal"] is True and err["session"] is None
    assert (repo.worktrees(), repo.branches()) == before
    listed = (await client.http.get("/v1/sessions")).json()["sessions"]
    assert all(s["project_path"] != str(repo.cwd.resolve()) for s in listed)


async def test_missing_origin_head_rejects_without_fallback(client: Client, tmp_path: Path) -> None:
    """No refs/remotes/origin/HEAD: origin_default is refused, never replaced by main/HEAD."""
    repo = make_repo(tmp_path, origin_head=False)
    resp = await create(client, repo.cwd, worktree_base="origin_default")
    assert resp.status_code == 422
    assert "origin default baseline is unavailable" in resp.json()["detail"]
    assert len(repo.worktrees()) == 1


async def test_replaced_worktree_is_refused_before_turn_started(
    client: Client, tmp_path: Path
) -> None:
    """A replaced checkout directory is refused with a terminal error and no turn_started."""
    repo = make_repo(tmp_path)
    snap = (await create(client, repo.cwd)).json()
    worktree = Path(snap["worktree_path"])
    shutil.rmtree(worktree)
    (worktree / "pkg").mkdir(parents=True)
    async with EventReader(client, session=snap["id"]) as stream:
        await stream.frame()
        resp = await client.prompt(snap["id"], "hi", request_id="p-wt")
        assert resp.status_code == 422
        err = await stream.until_event("error")
    assert err["terminal"] is True and err["request_id"] == "p-wt"
    assert "turn_started" not in stream.names()


async def test_discard_worktree_removes_checkout_and_branch(client: Client, tmp_path: Path) -> None:
    """DELETE …/worktree: refused while a turn runs; then removes both, says so on the stream
    (`worktree_discarded`); prompts are refused."""
    repo = make_repo(tmp_path)
    snap = (await create(client, repo.cwd)).json()
    sid = snap["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/hang")
        await stream.until_event("turn_started")
        busy = await client.http.delete(f"/v1/sessions/{sid}/worktree")
        assert busy.status_code == 409
        await client.http.post(f"/v1/sessions/{sid}/cancel")
        await stream.until_event("turn_ended")
        resp = await client.http.delete(f"/v1/sessions/{sid}/worktree")
        assert resp.status_code == 200, resp.text
        body = resp.json()
        # Every watching client learns it at once, with the same facts as the answer.
        event = await stream.until_event("worktree_discarded")
        assert event == {"event": "worktree_discarded", **body}
    assert body["removed_checkout"] is True and body["deleted_branch"].startswith("c2/")
    assert not Path(snap["worktree_path"]).exists()
    assert body["deleted_branch"] not in repo.branches()
    # The snapshot says so (its worktree_path stays as provenance).
    again = (await client.http.get(f"/v1/sessions/{sid}")).json()
    assert again["worktree_discarded"] is True and again["worktree_path"] == snap["worktree_path"]
    assert snap["worktree_discarded"] is False
    refused = await client.prompt(sid, "again")
    assert refused.status_code == 409
    assert "permanently discarded" in refused.json()["detail"]
