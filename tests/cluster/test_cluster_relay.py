"""A member serves a relayed request only while it owns the session (issue 18): otherwise it
answers `not_owner`, and the relaying member looks the owner up again and serves the request
itself or relays it to the new owner, once. The ownership moves are made in the database by a
stand-in member (tests/cluster/ghost.py) at the moment a relayed request reaches it, which is
the race a real adoption elsewhere opens. The same stand-in plays an owner that died within
its lease, and one that answers slowly."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx
import pytest

from tests.cluster.conftest import Pair
from tests.cluster.ghost import GHOST_ID, Ghost, cluster_key, ghost_member, set_owner
from tests.cluster.test_cluster_lease import _id
from tests.e2e.harness import C2Process, Client, EventReader, poll_until

# About relaying, not lapses: B, slowed 2 s by a loaded machine while starting a moved
# session's agent, was judged gone, A took its running turn over and no `turn_ended` came.
pytestmark = [pytest.mark.postgres, pytest.mark.long_lease]
# Longer than httpx's default 5 s read timeout, which would cut the relayed answer.
SLOW_OWNER_SECONDS = 6.0


def _prompts(server: C2Process) -> int:
    return len([m for m in server.agent_log_lines() if m.get("method") == "session/prompt"])


async def _until_idle(client: Client, sid: str) -> None:
    for _ in range(500):
        if (await client.snapshot(sid))["activity"]["state"]["kind"] == "idle":
            return
        await anyio.sleep(0.02)
    raise AssertionError(f"session {sid} still busy")


async def test_a_member_refuses_a_relayed_request_for_a_session_it_does_not_own(
    pair: Pair, tmp_path: Path
) -> None:
    """B owns the session; a request relayed to A (as by a member that looked the owner up
    before ownership moved) is refused with `not_owner` naming B, runs nothing and keeps no
    idempotency record: the same request_id then runs on B."""
    b = Client(pair.b)
    relayed = {
        "Authorization": f"Bearer {pair.a.bearer}",
        "C2-Cluster-Key": cluster_key(pair.url),
        "C2-Forwarded-By": "a-member-with-a-stale-view",
    }
    try:
        sid = (await b.new_session(tmp_path))["id"]
        prompt = {"doc": [{"type": "text", "text": "/text hi"}], "request_id": "p-1"}
        async with httpx.AsyncClient(base_url=pair.a.base_url, headers=relayed) as to_a:
            refused = [
                await to_a.post(f"/v1/sessions/{sid}/prompt", json=prompt),
                await to_a.post("/v1/ops", json={"op": "prompt", "session": sid, **prompt}),
                await to_a.delete(f"/v1/sessions/{sid}"),
            ]
        for resp in refused:
            assert resp.status_code == 409, resp.text
            assert resp.headers["C2-Not-Owner"] == _id(pair.b.home)
            problem = resp.json()
            assert problem["code"] == "not_owner"
            assert problem["owner"] == _id(pair.b.home) and problem["session"] == sid
        assert _prompts(pair.a) == 0
        async with EventReader(b, session=sid) as stream:
            await stream.frame()
            accepted = await b.prompt(sid, "/text hi", request_id="p-1")
            assert accepted.status_code == 202, accepted.text
            assert "Idempotent-Replayed" not in accepted.headers
            await stream.until_event("turn_ended")
        assert _prompts(pair.b) == 1
    finally:
        await b.aclose()


@pytest.mark.parametrize("moved_to", ["a", "b"])
async def test_a_relay_answered_not_owner_goes_where_the_session_is_now(
    pair: Pair, tmp_path: Path, moved_to: str
) -> None:
    """A client of B prompts a session B sees owned by the ghost; by the time the relayed
    request arrives the session belongs to `moved_to` (A: B relays again, to A; B itself: B
    runs it). The client sees one 202; the prompt runs once, on the new owner."""
    a = Client(pair.a)
    new_owner = pair.a if moved_to == "a" else pair.b
    other = pair.b if moved_to == "a" else pair.a
    try:
        sid = (await a.new_session(tmp_path))["id"]
        set_owner(pair.url, sid, GHOST_ID)
        # The ghost moves the session, then lets the member that is not the new owner answer
        # as the stale owner would: not_owner, naming the new one.
        ghost = Ghost(
            via=other.base_url, before=lambda: set_owner(pair.url, sid, _id(new_owner.home))
        )
        with ghost_member(pair.url, ghost):
            b = Client(pair.b)
            try:
                async with EventReader(b, session=sid) as stream:
                    await stream.frame()
                    accepted = await b.prompt(sid, "/text moved", request_id="p-moved")
                    assert accepted.status_code == 202, accepted.text
                    assert accepted.headers["Request-Id"] == "p-moved"
                    await stream.until_event("turn_ended")
            finally:
                await b.aclose()
        assert ghost.received == [("POST", f"/v1/sessions/{sid}/prompt")]
        assert _prompts(new_owner) == 1 and _prompts(other) == 0
        assert (await a.snapshot(sid))["owner"] == _id(new_owner.home)
    finally:
        await a.aclose()


async def test_an_owner_that_moves_again_is_a_503_to_retry(pair: Pair, tmp_path: Path) -> None:
    """The session still belongs to the ghost (live) after a `not_owner` answer from it: B
    looks once more, relays once more, and answers 503 `owner_unreachable` with Retry-After
    rather than relaying in circles."""
    a, b = Client(pair.a), Client(pair.b)
    try:
        sid = (await a.new_session(tmp_path))["id"]
        set_owner(pair.url, sid, GHOST_ID)
        with ghost_member(pair.url, Ghost(via=pair.a.base_url)) as ghost:
            answered = await b.prompt(sid, "/text never", request_id="p-never")
        assert answered.status_code == 503, answered.text
        assert answered.json()["code"] == "owner_unreachable"
        assert answered.headers["Retry-After"] == "1"
        assert len(ghost.received) == 2
        assert _prompts(pair.a) == 0 and _prompts(pair.b) == 0
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_dead_owner_within_its_lease_is_a_503_naming_it(
    pair: Pair, tmp_path: Path, lease_seconds: float
) -> None:
    """The owner's lease still runs but nothing listens at its URL (it died a moment ago):
    the relay fails to connect at once and the client gets 503 `owner_unreachable` naming
    the owner, with Retry-After of a lease; never a 500, and nothing runs elsewhere."""
    a, b = Client(pair.a), Client(pair.b)
    try:
        sid = (await a.new_session(tmp_path))["id"]
        set_owner(pair.url, sid, GHOST_ID)
        with ghost_member(pair.url, Ghost(), serve=False) as ghost:
            answered = await b.prompt(sid, "/text hi", request_id="p-dead")
        assert answered.status_code == 503, answered.text
        problem = answered.json()
        assert problem["code"] == "owner_unreachable"
        assert problem["owner"] == GHOST_ID
        assert GHOST_ID in problem["detail"] and ghost.url in problem["detail"]
        assert answered.headers["Retry-After"] == str(int(lease_seconds))
        assert _prompts(pair.a) == 0 and _prompts(pair.b) == 0
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_slow_owner_answer_is_relayed_whole(pair: Pair, tmp_path: Path) -> None:
    """An owner that takes longer than a short read timeout would allow (a duplicate
    waiting for the first outcome, an agent starting) still gets its answer through."""
    a, b = Client(pair.a), Client(pair.b)
    try:
        sid = (await a.new_session(tmp_path))["id"]
        set_owner(pair.url, sid, GHOST_ID)

        def slowly() -> None:
            time.sleep(SLOW_OWNER_SECONDS)
            set_owner(pair.url, sid, _id(pair.a.home))  # then A serves it as the owner

        with ghost_member(pair.url, Ghost(via=pair.a.base_url, before=slowly)):
            answered = await b.prompt(sid, "/text slow", request_id="p-slow")
        assert answered.status_code == 202, answered.text
        assert answered.headers["Request-Id"] == "p-slow"
        # The turn runs on A after the answer (turn_started) went out: its prompt follows.
        await poll_until(lambda: _prompts(pair.a) == 1)
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_relay_asks_the_owner_for_the_encoding_its_client_asked_for(
    pair: Pair, tmp_path: Path
) -> None:
    """The owner's answer is relayed byte for byte, so the relay asks the owner for exactly
    the encoding the client accepts: none when the client named none (httpx's own default
    would have the owner gzip an answer for a client that never asked)."""
    a, b = Client(pair.a), Client(pair.b)
    try:
        sid = (await a.new_session(tmp_path))["id"]
        ghost = Ghost(
            via=pair.a.base_url, before=lambda: set_owner(pair.url, sid, _id(pair.a.home))
        )
        with ghost_member(pair.url, ghost):
            for accepted in (None, "gzip"):
                set_owner(pair.url, sid, GHOST_ID)
                headers = {} if accepted is None else {"Accept-Encoding": accepted}
                if accepted is None:
                    del b.http.headers["accept-encoding"]  # httpx's default, for this request
                answered = await b.http.post(
                    f"/v1/sessions/{sid}/prompt",
                    json={"doc": [{"type": "text", "text": "/text hi"}]},
                    headers=headers,
                )
                assert answered.status_code == 202, answered.text
                await _until_idle(a, sid)  # the next prompt must not find this turn running
        assert [h.get("accept-encoding") for h in ghost.headers] == ["identity", "gzip"]
    finally:
        await a.aclose()
        await b.aclose()
