"""The whole server on PostgreSQL: a real `c2 serve` with C2_DATABASE_URL runs a turn with a
parked permission and survives a restart (skipped without C2_TEST_DATABASE_URL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.pg import PG_URL, pg_schema_url
from tests.e2e.harness import C2Process, Client, EventReader

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="C2_TEST_DATABASE_URL is not set"),
]


@pytest.fixture
def pg_database_url() -> Iterator[str]:
    """A URL whose search_path is a schema of this test's own."""
    with pg_schema_url("c2_srv") as url:
        yield url


async def test_server_on_postgres_runs_turns_and_recovers(
    pg_database_url: str, tmp_path: Path
) -> None:
    """Turn, permission parking, transcript and restart recovery all work on PostgreSQL."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    server = C2Process(tmp_path / "home", env={"C2_DATABASE_URL": pg_database_url})
    server.start()
    try:
        client = Client(server)
        sid = (await client.new_session(workdir))["id"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            await client.prompt(sid, "/text hello\n/permission execute Deploy")
            req = await stream.until_event("permission_request")
            assert (await client.answer(sid, req["request_id"], "allow")).status_code == 200
            await stream.until_event("turn_ended")
            await client.prompt(sid, "/hang")
            await stream.until_event("turn_started")
        await client.aclose()
        server.stop()
        server.start()
        client = Client(server)
        snap = await client.snapshot(sid)
        assert snap["activity"]["state"]["reason"] == "interrupted"
        page = (await client.http.get(f"/v1/sessions/{sid}/transcript")).json()
        texts = [e["part"]["text"] for e in page["entries"] if e["part"]["kind"] == "text"]
        assert texts[:2] == ["hello", "allow"]
        assert page["snapshot_through"] == page["entries"][-1]["last_seq"]
        await client.aclose()
    finally:
        server.stop()
