"""Forking a session at a turn through a real server, agents and git (issue 14 part 2)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import REPO, SCRIPTED, C2Process, Client, EventReader
from tests.e2e.test_checkpoints import files_of, get_json, turn, worktree_session
from tests.gitrepos import make_repo

FORKING = {"custom": "forking"}


@pytest.fixture(scope="module")
def forking_c2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[C2Process]:
    """A server that also offers an agent advertising `session/fork` (state kept on disk, so
    a new agent process can fork a session another one started)."""
    server = C2Process(tmp_path_factory.mktemp("c2home"))
    state = server.home / "fork-state"
    with (server.home / "providers.toml").open("a", encoding="utf-8") as toml:
        toml.write(
            f"""
[providers.forking]
command = "{sys.executable}"
args = ["-m", "tests.agents.scripted_agent"]
env = {{ PYTHONPATH = "{REPO}", SCRIPTED_AGENT_LOG = "{server.agent_log}", \
SCRIPTED_AGENT_FORK = "1", DEMO_AGENT_STATE_DIR = "{state}" }}
"""
        )
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def client(forking_c2: C2Process) -> AsyncIterator[Client]:
    c = Client(forking_c2)
    yield c
    await c.aclose()


async def fork(client: Client, sid: str, status: int = 201, **body: Any) -> dict[str, Any]:
    resp = await client.http.post(f"/v1/sessions/{sid}/fork", json=body)
    assert resp.status_code == status, resp.text
    data: dict[str, Any] = resp.json()
    if status == 201:
        assert resp.headers["Location"] == f"/v1/sessions/{data['id']}"
    return data


async def entries(client: Client, sid: str) -> list[dict[str, Any]]:
    page = await get_json(client, f"/v1/sessions/{sid}/transcript")
    found: list[dict[str, Any]] = page["entries"]
    return found


async def test_worktree_fork_at_an_earlier_turn_is_primed(client: Client, tmp_path: Path) -> None:
    """A fork at turn 1 of 2: own worktree and branch with the parent's files after turn 1,
    the parent's turn 1 as its transcript, a primed first turn; the parent is unchanged."""
    repo = make_repo(tmp_path, with_origin=False)
    parent = await worktree_session(client, repo)
    pid, parent_tree = parent["id"], Path(parent["worktree_path"])
    await turn(client, pid, "/write a.txt one\n/text first answer")
    after_one = await entries(client, pid)
    await turn(client, pid, "/write a.txt two\n/write b.txt b")
    before = (await entries(client, pid), files_of(parent_tree), await client.snapshot(pid))

    async with EventReader(client) as stream:
        await stream.frame()
        child = await fork(client, pid, at_turn=1, request_id="fork-1")
        created = await stream.until_event("session_created", session=child["id"])
    cid, child_tree = child["id"], Path(child["worktree_path"])
    assert created["request_id"] == "fork-1"
    assert child["title"] == f"{before[2]['title']} (fork)"
    assert child["forked_from"] == {"session": pid, "turn": 1}
    assert child_tree != parent_tree and child["cwd"] == str(child_tree / "pkg")
    assert f"c2/{cid}" in repo.branches()
    assert (child_tree / "pkg" / "a.txt").read_text() == "one"
    assert not (child_tree / "pkg" / "b.txt").exists()
    assert [(e["role"], e["part"]) for e in await entries(client, cid)] == [
        (e["role"], e["part"]) for e in after_one
    ]
    # The child has the parent's checkpoints up to turn 1: its turn 1 diff is the parent's.
    child_one = await get_json(client, f"/v1/sessions/{cid}/turns/1/diff")
    parent_one = await get_json(client, f"/v1/sessions/{pid}/turns/1/diff")
    assert child_one["files"] == parent_one["files"]

    started, _ = await turn(client, cid, "/write c.txt child")
    assert started["turn"] == 2 and started["primed_from"] == {"session": pid, "turn": 1}
    prompts = [
        line["text"]
        for line in client.server.agent_log_lines()
        if line.get("method") == "session/prompt" and "/write c.txt child" in line["text"]
    ]
    assert len(prompts) == 1 and "**Referenced chat**" in prompts[0]
    assert "first answer" in prompts[0]
    second, _ = await turn(client, cid, "/text again")
    assert "primed_from" not in second
    # The transcript keeps the mark with the primed turn's prompt, so a reload still shows it.
    prompts_kept = [e["part"] for e in await entries(client, cid) if e["part"]["kind"] == "prompt"]
    assert [p.get("primed_from") for p in prompts_kept[-2:]] == [{"session": pid, "turn": 1}, None]
    # The parent is untouched: transcript, files, activity.
    after = (await entries(client, pid), files_of(parent_tree), await client.snapshot(pid))
    assert after[0] == before[0] and after[1] == before[1]
    assert after[2]["activity"] == before[2]["activity"]
    assert not (parent_tree / "pkg" / "c.txt").exists()


async def test_fork_at_the_last_turn_uses_acp_session_fork(client: Client, tmp_path: Path) -> None:
    """An agent advertising session/fork continues the parent's own ACP session in the
    child's cwd; no primer."""
    repo = make_repo(tmp_path, with_origin=False)
    body = {"provider": FORKING, "cwd": str(repo.cwd), "use_worktree": True}
    resp = await client.http.post("/v1/sessions", json=body)
    assert resp.status_code == 201, resp.text
    parent = resp.json()
    await turn(client, parent["id"], "/write a.txt one\n/text remembered")
    parent_acp = [
        line["sessionId"]
        for line in client.server.agent_log_lines()
        if line.get("method") == "session/prompt" and "remembered" in line.get("text", "")
    ][-1]
    child = await fork(client, parent["id"])  # the last finished turn, a worktree as the parent
    assert child["forked_from"] == {"session": parent["id"], "turn": 1}
    assert child["worktree_path"] and child["worktree_path"] != parent["worktree_path"]
    forks = [line for line in client.server.agent_log_lines() if line.get("event") == "fork"]
    assert forks[-1]["from"] == parent_acp and forks[-1]["cwd"] == child["cwd"]
    assert forks[-1]["history"] == 2  # the parent's prompt and answer
    started, _ = await turn(client, child["id"], "/text go on")
    assert "primed_from" not in started and started["turn"] == 2
    prompt = [
        line["text"]
        for line in client.server.agent_log_lines()
        if line.get("method") == "session/prompt" and "go on" in line.get("text", "")
    ]
    assert prompt == ["/text go on"]


async def test_fork_while_the_parent_runs_and_refusals(
    client: Client, tmp_path: Path, workdir: Path
) -> None:
    """Forking at a finished turn while a later one runs is allowed and leaves the parent's
    turn running; a turn that has not finished is 404; a plain folder forks in place."""
    sid = (await client.new_session(workdir, provider=SCRIPTED))["id"]
    await turn(client, sid, "/text one")
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/hang")).status_code == 202
        await stream.until_event("turn_started")
        missing = await fork(client, sid, 404, at_turn=2)
        assert missing["code"] == "no_such_turn"
        child = await fork(client, sid)
        assert child["forked_from"] == {"session": sid, "turn": 1}
        assert child["cwd"] == str(workdir.resolve()) and child["worktree_path"] is None
        snap = await client.snapshot(sid)
        assert snap["activity"]["state"]["kind"] == "running"
        await client.http.post(f"/v1/sessions/{sid}/cancel")
        await stream.until_event("turn_ended")
    zero = await fork(client, sid, at_turn=0)
    assert zero["forked_from"] == {"session": sid, "turn": 0}
    assert await entries(client, zero["id"]) == []


async def test_a_forks_copied_turns_are_searchable(client: Client, workdir: Path) -> None:
    """The parent's turns copied into a fork are indexed with the child's transcript: the
    copied prompt and answer are found by a search in the child, the turn after the cut not."""
    answer, later = (f"w{uuid.uuid4().hex[:10]}" for _ in range(2))
    sid = (await client.new_session(workdir, provider=SCRIPTED))["id"]
    await turn(client, sid, f"/text the answer {answer}")
    await turn(client, sid, f"/text the later {later}")
    cid = (await fork(client, sid, at_turn=1))["id"]

    async def hits(word: str) -> list[dict[str, Any]]:
        resp = await client.http.get("/v1/search", params={"q": word, "session": cid})
        assert resp.status_code == 200, resp.text
        found: list[dict[str, Any]] = resp.json()["hits"]
        return found

    copied = {e["seq"]: e["part"] for e in await entries(client, cid)}
    answered = {h["kind"]: h for h in await hits(answer)}
    assert {"prompt", "text"} <= set(answered)
    assert {h["session"] for h in answered.values()} == {cid}
    assert answer in copied[answered["text"]["transcript_seq"]]["text"]
    assert await hits(later) == []


async def test_a_discarded_worktree_cannot_seed_a_later_turn(
    client: Client, tmp_path: Path
) -> None:
    """With its worktree discarded, a session's files after turn 1 are gone: a worktree fork
    there is 409 no_checkpoints (it would silently hold the baseline); at turn 0 the baseline
    is the right state, and a fork without a worktree needs no files."""
    repo = make_repo(tmp_path, with_origin=False)
    sid = (await worktree_session(client, repo))["id"]
    await turn(client, sid, "/write work.txt x")
    assert (await client.http.delete(f"/v1/sessions/{sid}/worktree")).status_code == 200
    refused = await fork(client, sid, 409, use_worktree=True)
    assert refused["code"] == "no_checkpoints" and "turn 1" in refused["detail"]
    assert [p.name for p in repo.worktrees()] == [repo.root.name]  # nothing left behind
    zero = await fork(client, sid, at_turn=0, use_worktree=True)
    assert not (Path(zero["worktree_path"]) / "work.txt").exists()
    plain = await fork(client, sid, use_worktree=False)
    assert plain["worktree_path"] is None
