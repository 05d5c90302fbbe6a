"""Ownership and relaying (issue 18, part 4): a client of B drives a session owned by A; the
owner's answer comes back verbatim; relayed requests are authenticated with the cluster key."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.cluster.conftest import Pair
from tests.e2e.harness import Client, EventReader

pytestmark = [pytest.mark.postgres, pytest.mark.long_lease]


def _instance_id(home: Path) -> str:
    return (home / "instance-id").read_text(encoding="utf-8").strip()


async def test_a_client_of_b_drives_a_session_owned_by_a(pair: Pair, tmp_path: Path) -> None:
    a, b = Client(pair.a), Client(pair.b)
    try:
        created = await a.new_session(tmp_path)
        sid = created["id"]
        assert created["owner"] == _instance_id(pair.a.home)
        assert (await b.snapshot(sid))["owner"] == created["owner"]
        async with EventReader(b, session=sid) as stream:
            await stream.frame()
            # Prompt through B: A's agent runs it; B's stream shows it.
            accepted = await b.prompt(sid, "/permission execute Run tests", request_id="p-1")
            assert accepted.status_code == 202, accepted.text
            assert accepted.headers["Request-Id"] == "p-1"
            request = await stream.until_event("permission_request")
            answered = await b.answer(sid, request["request_id"], request["options"][0][0])
            assert answered.status_code == 200 and answered.json() == {"applied": True}
            await stream.until_event("turn_ended")
            # A refusal is relayed verbatim: status, problem body, content type.
            again = await b.answer(sid, request["request_id"], None)
            assert again.status_code == 409
            assert again.headers["content-type"].startswith("application/problem+json")
            assert again.json()["code"] == "permission_not_pending"
            # Cancel through B while A's agent runs a long turn.
            assert (await b.prompt(sid, "/hang")).status_code == 202
            await stream.until_event("turn_started")
            cancelled = await b.http.post(f"/v1/sessions/{sid}/cancel", json={})
            assert cancelled.status_code == 202 and cancelled.json()["cancelled"] is True
            ended = await stream.until_event("turn_ended")
            assert ended["stop_reason"] == "cancelled"
        # The agent ran on A only.
        prompts = [m for m in pair.a.agent_log_lines() if m.get("method") == "session/prompt"]
        assert len(prompts) == 2
        assert not [m for m in pair.b.agent_log_lines() if m.get("method") == "session/prompt"]
        # Through /v1/ops too, and deletion.
        op = await b.http.post("/v1/ops", json={"op": "cancel", "session": sid})
        assert op.status_code == 202 and op.json()["cancelled"] is False
        assert (await b.http.delete(f"/v1/sessions/{sid}")).status_code == 204
        assert (await a.http.get(f"/v1/sessions/{sid}")).status_code == 404
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_relayed_request_with_a_wrong_cluster_key_is_refused(pair: Pair) -> None:
    async with httpx.AsyncClient(base_url=pair.a.base_url) as http:
        resp = await http.get(
            "/v1/sessions",
            headers={
                "Authorization": f"Bearer {pair.a.bearer}",
                "C2-Cluster-Key": "guessed",
                "C2-Forwarded-By": "someone",
            },
        )
    assert resp.status_code == 401
    assert resp.json()["code"] == "unauthorized"
