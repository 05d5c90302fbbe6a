"""A member that dies (issue 18, part 5): kill -9 of A → B marks A's in-flight sessions
interrupted within the lease, nothing committed is lost; B adopts A's plain sessions on
their next prompt, refuses A's worktree sessions with owner_unavailable; A's agents are
gone once A restarts."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cluster.conftest import LEASE_SECONDS, Pair
from tests.e2e.harness import Client, EventReader
from tests.e2e.test_turns import alive, wait_gone
from tests.gitrepos import make_repo

pytestmark = pytest.mark.postgres


def _id(home: Path) -> str:
    return (home / "instance-id").read_text(encoding="utf-8").strip()


def _interrupted(event: dict[str, Any]) -> bool:
    state = event.get("activity", {}).get("state", {})
    return bool(
        event["event"] == "session_activity_changed"
        and state.get("kind") == "failed"
        and state.get("reason") == "interrupted"
    )


async def _seen(stream: EventReader, name: str, session: str) -> None:
    """Until `stream` has shown `name` for `session` (read before now or next)."""
    with anyio.fail_after(20):
        while not any(e["event"] == name and e.get("session") == session for e in stream.events):
            await stream.frame()


async def test_kill9_of_a_member_hands_its_sessions_to_the_survivor(
    pair: Pair, tmp_path: Path
) -> None:
    a, b = Client(pair.a), Client(pair.b)
    repo = make_repo(tmp_path / "repo")
    try:
        running = (await a.new_session(tmp_path))["id"]
        waiting = (await a.new_session(tmp_path))["id"]
        worktree = (await a.new_session(repo.cwd, use_worktree=True))["id"]
        child = (await a.new_session(tmp_path, provider={"custom": "scripted_child"}))["id"]
        async with EventReader(b) as stream:
            await stream.frame()
            assert (await b.prompt(running, "/hang")).status_code == 202
            assert (await b.prompt(waiting, "/permission execute Deploy")).status_code == 202
            await _seen(stream, "turn_started", running)
            await _seen(stream, "permission_request", waiting)
            grandchildren = [
                e["pid"] for e in pair.a.agent_log_lines() if e.get("event") == "child"
            ]
            assert grandchildren and child
            pair.a.stop(signal.SIGKILL)
            # Within the lease (plus a takeover tick and delivery): both interrupted on B.
            with anyio.fail_after(LEASE_SECONDS * 6):
                while {running, waiting} - {e["session"] for e in stream.events if _interrupted(e)}:
                    await stream.frame(timeout=LEASE_SECONDS * 6)
        # Nothing committed was lost: the prompts A took are in the transcript.
        page = (await b.http.get(f"/v1/sessions/{running}/transcript")).json()
        assert [e["role"] for e in page["entries"]][:1] == ["user"]
        # A plain session is adopted by B on its next prompt; its turn runs on B.
        assert (await b.prompt(waiting, "/text hello again")).status_code == 202
        assert (await b.snapshot(waiting))["owner"] == _id(pair.b.home)
        async with EventReader(b, session=waiting) as stream:
            await stream.frame()
            await stream.until_event("turn_ended", session=waiting)
        assert [m for m in pair.b.agent_log_lines() if m.get("method") == "session/prompt"]
        # A worktree session stays readable but cannot run anywhere else.
        refused = await b.prompt(worktree, "/text hi")
        assert refused.status_code == 409, refused.text
        assert refused.json()["code"] == "owner_unavailable"
        assert _id(pair.a.home) in refused.json()["detail"]
        assert refused.json()["owner"] == _id(pair.a.home)
        assert (await b.snapshot(worktree))["owner"] == _id(pair.a.home)
        # A restarts under its id: the processes its old agents left are ended.
        assert all(alive(pid) for pid in grandchildren)
        pair.a.start()
        await wait_gone(*grandchildren, timeout=15)
    finally:
        await a.aclose()
        await b.aclose()
