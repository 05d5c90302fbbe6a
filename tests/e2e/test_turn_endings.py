"""How a turn ends after a cancel, through a real server and the scripted agent (issue 10)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import C2Process, Client, EventReader


async def test_cancel_then_end_turn_reads_cancelled(client: Client, workdir: Path) -> None:
    """An agent answering end_turn to a forwarded cancel (as OpenCode does) ends cancelled."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/text working\n/hang end_turn")).status_code == 202
        await stream.until_event("agent_text")
        resp = await client.http.post(f"/v1/sessions/{sid}/cancel")
        assert resp.json()["cancelled"] is True
        ended = await stream.until_event("turn_ended")
    assert ended["stop_reason"] == "cancelled"


async def test_end_turn_without_cancel_reads_end_turn(client: Client, workdir: Path) -> None:
    """Without a cancel, the agent's end_turn stands."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/text done\n/stop end_turn")).status_code == 202
        ended = await stream.until_event("turn_ended")
    assert ended["stop_reason"] == "end_turn"


async def test_cancel_while_the_agent_starts_ends_cancelled(
    fresh_c2: C2Process, workdir: Path
) -> None:
    """A cancel that arrives while the agent is being revived (no ACP session yet to tell)
    still ends the turn cancelled instead of leaving it running."""
    client = Client(fresh_c2)
    try:
        sid = (await client.new_session(workdir))["id"]
    finally:
        await client.aclose()
    fresh_c2.stop()
    fresh_c2.start()  # the session is back without an agent: the next prompt revives it
    client = Client(fresh_c2)
    try:
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            assert (await client.prompt(sid, "/hang")).status_code == 202
            resp = await client.http.post(f"/v1/sessions/{sid}/cancel")
            assert resp.json()["cancelled"] is True
            ended = await stream.until_event("turn_ended", timeout=30)
        assert ended["stop_reason"] == "cancelled"
    finally:
        await client.aclose()
