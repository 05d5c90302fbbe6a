"""Cluster membership (issue 18, part 2): registration, leases judged by the database, the
instance list, and the mutual exclusion of plain and cluster servers."""

from __future__ import annotations

import signal
from datetime import datetime
from pathlib import Path

import httpx

from tests.cluster.conftest import LEASE_SECONDS, Pair, member
from tests.e2e.harness import C2Process, Client, poll_until
from tests.e2e.test_store_faults import serve_once


def _instances(server_url: str, bearer: str) -> list[dict[str, str]]:
    resp = httpx.get(
        f"{server_url}/v1/instances", headers={"Authorization": f"Bearer {bearer}"}, timeout=10
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["kind"] == "instances"
    return list(body["instances"])


def test_members_register_with_leases_and_see_each_other(pair: Pair) -> None:
    for server in (pair.a, pair.b):
        listed = _instances(server.base_url, pair.a.bearer)
        assert [i["url"] for i in listed] == [pair.a.base_url, pair.b.base_url]
        ids = [i["id"] for i in listed]
        assert ids[0] == (pair.a.home / "instance-id").read_text().strip()
        assert ids[1] == (pair.b.home / "instance-id").read_text().strip()
        for item in listed:
            heartbeat = datetime.fromisoformat(item["heartbeat_at"])
            expires = datetime.fromisoformat(item["lease_expires_at"])
            assert 0 < (expires - heartbeat).total_seconds() <= LEASE_SECONDS + 0.01


async def test_a_session_created_through_either_member_is_listed_by_both(
    pair: Pair, tmp_path: Path
) -> None:
    a, b = Client(pair.a), Client(pair.b)
    try:
        made = [await a.new_session(tmp_path), await b.new_session(tmp_path)]
        for client in (a, b):
            listed = (await client.http.get("/v1/sessions")).json()["sessions"]
            assert {s["id"] for s in listed} >= {s["id"] for s in made}
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_member_that_stops_or_dies_leaves_the_list(pair: Pair) -> None:
    bearer = pair.a.bearer
    pair.b.stop()  # a clean stop deregisters at once
    assert [i["url"] for i in _instances(pair.a.base_url, bearer)] == [pair.a.base_url]
    pair.b.start()
    assert len(_instances(pair.a.base_url, bearer)) == 2
    pair.b.stop(signal.SIGKILL)  # no goodbye: the lease runs out by the database's clock
    await poll_until(
        lambda: [i["url"] for i in _instances(pair.a.base_url, bearer)] == [pair.a.base_url],
        timeout=LEASE_SECONDS * 5,
    )


def test_plain_and_cluster_servers_refuse_each_others_database(
    tmp_path: Path, cluster_url: str
) -> None:
    plain_env = {"C2_DATABASE_URL": cluster_url}
    first = member(tmp_path / "m", cluster_url)
    first.start()
    try:
        refused = serve_once(tmp_path / "plain", plain_env)
        assert refused.returncode == 1
        assert "c2 cluster members use this PostgreSQL database" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    finally:
        first.stop()

    plain = C2Process(tmp_path / "plain2", env=plain_env)
    plain.start()
    try:
        refused = serve_once(tmp_path / "m2", plain_env, "--cluster")
        assert refused.returncode == 1
        assert "without --cluster owns this PostgreSQL database" in refused.stderr
    finally:
        plain.stop()


def test_cluster_refuses_sqlite_in_one_line(tmp_path: Path) -> None:
    refused = serve_once(tmp_path / "home", {"C2_DATABASE_URL": "", "C2_CLUSTER": "1"})
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "c2: --cluster needs PostgreSQL: set C2_DATABASE_URL to a postgresql+psycopg:// URL"
    )


def _member_env(url: str, **extra: str) -> dict[str, str]:
    return {
        "C2_DATABASE_URL": url,
        "C2_CLUSTER": "1",
        "C2_CLUSTER_LEASE_SECONDS": str(LEASE_SECONDS),
        **extra,
    }


def test_a_member_with_another_key_is_refused_in_one_line(tmp_path: Path, cluster_url: str) -> None:
    """Its relayed requests would all answer 401 while it looked healthy: it does not join
    while members with another key run; once none runs, the key may change (a rotation)."""
    first = member(tmp_path / "a", cluster_url)
    first.start()
    try:
        refused = serve_once(tmp_path / "b", _member_env(cluster_url, C2_CLUSTER_SECRET="other"))
        assert refused.returncode == 1, refused.stderr
        assert "C2_CLUSTER_SECRET differs from the key the running members use" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    finally:
        first.stop()
    rotated = member(tmp_path / "b", cluster_url, C2_CLUSTER_SECRET="other")
    rotated.start()  # no member runs: it starts with the new key
    rotated.stop()


def test_a_copied_home_is_refused_while_its_original_runs(tmp_path: Path, cluster_url: str) -> None:
    """A home copied from a live member carries its instance id: the copy would run that
    member's sessions and end its agents. Refused, naming the file to delete; the member's
    own restart after a crash (its lease still live, no longer renewed) is not."""
    original = member(tmp_path / "a", cluster_url)
    original.start()
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "instance-id").write_text((tmp_path / "a" / "instance-id").read_text())
    try:
        refused = serve_once(copy, _member_env(cluster_url))
        assert refused.returncode == 1, refused.stderr
        assert "another running c2 member has this home's instance id" in refused.stderr
        assert str(copy / "instance-id") in refused.stderr
    finally:
        original.stop(signal.SIGKILL)
    original.start()  # its lease is still live, but nobody renews it
    original.stop()
