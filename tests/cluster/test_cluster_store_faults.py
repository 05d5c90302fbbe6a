"""Database faults on the cluster paths (issue 18): a member whose connections to PostgreSQL
fail (tests/cluster/dbproxy.py cuts them; the other member's stay up) answers 503
`store_unavailable` to whatever needs the database, relayed or not, never a 500, and stays
up; its heartbeat, its log listener and its writer recover by themselves when the database
is back, within the lease (it simply carries on) or past it (a peer took it over; it joins
again and serves its sessions)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.cluster.conftest import LEASE_SECONDS, member
from tests.cluster.dbproxy import CuttableProxy, proxied
from tests.cluster.test_cluster_lease import _id
from tests.e2e.harness import SCRIPTED, C2Process, Client, EventReader, poll_until
from tests.e2e.test_store_faults import wait_ready_status

pytestmark = pytest.mark.postgres
# A lease the outage stays well inside: the member is never taken over meanwhile.
LONG_LEASE = "120"


@contextmanager
def two_members(
    url: str, tmp_path: Path, lease: str
) -> Iterator[tuple[C2Process, C2Process, CuttableProxy]]:
    """A (its database behind a proxy the test cuts; writes give up after 1 s) and B."""
    with proxied(url) as (through, proxy):
        a = member(
            tmp_path / "a", through, C2_CLUSTER_LEASE_SECONDS=lease, C2_STORE_RETRY_SECONDS="1"
        )
        b = member(tmp_path / "b", url, C2_CLUSTER_LEASE_SECONDS=lease)
        try:
            a.start()
            b.bearer = a.bearer
            b.start()
            yield a, b, proxy
        finally:
            proxy.restore()  # so A can leave cleanly
            b.stop()
            a.stop()


def _listed(server: C2Process, bearer: str) -> list[str]:
    resp = httpx.get(
        f"{server.base_url}/v1/instances", headers={"Authorization": f"Bearer {bearer}"}
    )
    assert resp.status_code == 200, resp.text
    return [i["id"] for i in resp.json()["instances"]]


def _store_unavailable(resp: httpx.Response) -> None:
    assert resp.status_code == 503, (resp.request.url, resp.text)
    assert resp.json()["code"] == "store_unavailable", resp.text


async def test_a_member_without_its_database_answers_503_and_carries_on(
    cluster_url: str, tmp_path: Path
) -> None:
    with two_members(cluster_url, tmp_path, LONG_LEASE) as (a, b, proxy):
        ca, cb = Client(a), Client(b)
        try:
            on_a = (await ca.new_session(tmp_path))["id"]
            proxy.cut()
            await wait_ready_status(a, 503)
            # Relayed by B to A, whose owner check cannot read the session: A's 503, verbatim.
            _store_unavailable(await cb.prompt(on_a, "/text lost", request_id="p-out"))
            # On A itself: a read, an op on its session, a new session whose request_id must
            # be claimed in the database, the instance list.
            body = {"provider": SCRIPTED, "cwd": str(tmp_path), "use_worktree": False}
            for resp in (
                await ca.http.get(f"/v1/sessions/{on_a}"),
                await ca.prompt(on_a, "/text lost", request_id="p-out"),
                await ca.http.post("/v1/sessions", json={**body, "request_id": "c-out"}),
                await ca.http.get("/v1/instances"),
            ):
                _store_unavailable(resp)
            assert a.proc is not None and a.proc.poll() is None
            proxy.restore()
            await wait_ready_status(a, 200)
            # Everything works again, across members: A's listener is back (B's commits
            # reach A's stream), and its writer and relays (A's turn seen on B's stream).
            on_b = (await cb.new_session(tmp_path))["id"]
            async with EventReader(ca) as seen_on_a, EventReader(cb) as seen_on_b:
                await seen_on_a.frame()
                await seen_on_b.frame()
                for sid, request_id in ((on_a, "p-out"), (on_b, "p-b")):
                    accepted = await cb.prompt(sid, "/text back", request_id=request_id)
                    assert accepted.status_code == 202, accepted.text
                    assert "Idempotent-Replayed" not in accepted.headers  # nothing was kept
                for stream in (seen_on_a, seen_on_b):
                    for sid in (on_a, on_b):
                        await stream.until_event("turn_ended", session=sid)
            made = await ca.http.post("/v1/sessions", json={**body, "request_id": "c-out"})
            assert made.status_code == 201, made.text
            assert _listed(b, b.bearer) == [_id(a.home), _id(b.home)]
        finally:
            await ca.aclose()
            await cb.aclose()


async def test_a_member_whose_database_was_away_past_its_lease_joins_again(
    cluster_url: str, tmp_path: Path
) -> None:
    with two_members(cluster_url, tmp_path, str(LEASE_SECONDS)) as (a, b, proxy):
        ca, cb = Client(a), Client(b)
        try:
            on_a = (await ca.new_session(tmp_path))["id"]
            proxy.cut()
            # B takes A over once A's lease has run out by the database's clock.
            await poll_until(lambda: _id(a.home) not in _listed(b, b.bearer), LEASE_SECONDS * 10)
            _store_unavailable(await ca.http.get("/v1/instances"))
            assert a.proc is not None and a.proc.poll() is None
            proxy.restore()
            # A's heartbeat finds its lease gone and joins again; it serves its session.
            await poll_until(lambda: _id(a.home) in _listed(b, b.bearer), LEASE_SECONDS * 10)
            await wait_ready_status(a, 200)
            async with EventReader(cb, session=on_a) as stream:
                await stream.frame()
                accepted = await cb.prompt(on_a, "/text after the outage")
                assert accepted.status_code == 202, accepted.text
                await stream.until_event("turn_ended", session=on_a)
            assert (await cb.snapshot(on_a))["owner"] == _id(a.home)
            prompts = [m for m in a.agent_log_lines() if m.get("method") == "session/prompt"]
            assert len(prompts) == 1
        finally:
            await ca.aclose()
            await cb.aclose()
