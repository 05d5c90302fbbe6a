"""Idempotent retry across members (issue 18, part 6): a duplicate op sent to A and to B at
once runs once; both get the first outcome."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cluster.conftest import Pair
from tests.e2e.harness import SCRIPTED, Client, EventReader

# About duplicates, not lapses: a member slowed 2 s by a loaded machine was judged gone
# mid-create, its peer took the claim over and ran the op, and the slow member's create then
# ended 503, as designed for a lapse.
pytestmark = [pytest.mark.postgres, pytest.mark.long_lease]


async def test_a_duplicate_create_sent_to_both_members_runs_once(
    pair: Pair, tmp_path: Path
) -> None:
    a, b = Client(pair.a), Client(pair.b)
    body = {"provider": SCRIPTED, "cwd": str(tmp_path), "use_worktree": False, "request_id": "c-1"}
    try:
        first, second = await asyncio.gather(
            a.http.post("/v1/sessions", json=body), b.http.post("/v1/sessions", json=body)
        )
        assert first.status_code == second.status_code == 201, (first.text, second.text)
        assert first.json()["id"] == second.json()["id"]
        replayed = [r.headers.get("Idempotent-Replayed") for r in (first, second)]
        assert sorted(replayed, key=str) == sorted([None, "true"], key=str)
        sessions = (await a.http.get("/v1/sessions")).json()["sessions"]
        assert len(sessions) == 1
        # The same request_id with another body is refused on either member.
        other = await b.http.post("/v1/sessions", json={**body, "cwd": str(tmp_path.parent)})
        assert other.status_code == 409 and other.json()["code"] == "request_id_reused"
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_duplicate_prompt_sent_to_both_members_runs_once(
    pair: Pair, tmp_path: Path
) -> None:
    a, b = Client(pair.a), Client(pair.b)
    try:
        sid = (await b.new_session(tmp_path))["id"]  # owned by B
        async with EventReader(a, session=sid) as stream:
            await stream.frame()
            first, second = await asyncio.gather(
                a.prompt(sid, "/text once", request_id="p-1"),
                b.prompt(sid, "/text once", request_id="p-1"),
            )
            assert first.status_code == second.status_code == 202, (first.text, second.text)
            assert first.json()["turn_id"] == second.json()["turn_id"]
            await stream.until_event("turn_ended")
        prompts = [m for m in pair.b.agent_log_lines() if m.get("method") == "session/prompt"]
        assert len(prompts) == 1
        assert stream.names().count("turn_started") == 1
    finally:
        await a.aclose()
        await b.aclose()
