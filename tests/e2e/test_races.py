"""Ops from several clients at once on one session: the outcome is one a client could have
had from some order of the same ops, and nothing happens to a session after its deletion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from tests.e2e.harness import Client, EventReader
from tests.e2e.test_queue import doc, idle_and_empty

ROUNDS = 8  # the delete lands 0 to 17.5 ms after the prompt


async def test_nothing_starts_on_a_session_being_deleted(client: Client, workdir: Path) -> None:
    """A delete racing a prompt, a queue append and a fork: whichever wins, after
    `session_deleted` the stream carries no turn, no activity and no permission for it (a
    refused prompt's correlated error is all), and its agent does not come back."""
    late: list[str] = []
    deleted: list[str] = []

    async def after(delay: float, method: str, url: str, body: dict[str, Any]) -> None:
        await anyio.sleep(delay)
        await client.http.request(method, url, json=body if method == "POST" else None)

    async with EventReader(client) as stream:
        await stream.frame()
        for round_ in range(ROUNDS):
            sid = (await client.new_session(workdir))["id"]
            warm = await client.prompt(sid, "/text warm", request_id=f"warm-{round_}")
            assert warm.status_code == 202, warm.text
            await stream.until_event("turn_ended", session=sid)
            base = f"/v1/sessions/{sid}"
            async with anyio.create_task_group() as tg:  # the delete swept across the others
                tg.start_soon(after, 0.0, "POST", f"{base}/prompt", {"doc": doc("/permission x")})
                tg.start_soon(after, 0.002, "POST", f"{base}/fork", {})
                tg.start_soon(after, 0.005, "POST", f"{base}/queue", {"doc": doc("/sleep 3000")})
                tg.start_soon(after, round_ * 0.0025, "DELETE", base, {})
            await stream.until_event("session_deleted", session=sid)
            assert (await client.http.get(base)).status_code == 404
            deleted.append(sid)
        await anyio.sleep(1.0)  # what a zombie turn would emit has arrived by then
        marker = (await client.new_session(workdir))["id"]  # read the stream up to here
        await stream.until_event("session_created", session=marker)
    for round_, sid in enumerate(deleted):
        names = stream.names(sid)
        if any(name != "error" for name in names[names.index("session_deleted") + 1 :]):
            late.append(f"round {round_}: " + ", ".join(map(told, stream.events_of(sid))))
    assert not late, "\n".join(late)


def told(event: dict[str, Any]) -> str:
    """An event's name and what it says in a word (stop reason, message or state)."""
    state = event.get("activity", {}).get("state", {}).get("kind")
    return f"{event['event']}:{event.get('stop_reason') or event.get('message') or state or ''}"


async def test_appends_at_once_run_in_order_without_pausing(client: Client, workdir: Path) -> None:
    """Four clients append to an idle queue at once: every item runs as its own turn, each
    once, in the order the queue holds them; nothing is refused and the queue never pauses."""
    sid = (await client.new_session(workdir))["id"]
    ids = [f"race-{n}" for n in range(4)]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()

        async def append(rid: str) -> None:
            body = {"doc": doc(f"/text {rid}"), "request_id": rid}
            resp = await client.http.post(f"/v1/sessions/{sid}/queue", json=body)
            assert resp.status_code == 201, resp.text

        async with anyio.create_task_group() as tg:
            for rid in ids:
                tg.start_soon(append, rid)
        for _ in ids:
            await stream.until_event("turn_ended")
        await idle_and_empty(client, sid)
    started = [e["request_id"] for e in stream.events if e["event"] == "turn_started"]
    assert sorted(started) == ids  # each once
    names = {e["event"] for e in stream.events}
    assert "queue_paused" not in names and "error" not in names
    ended = [e for e in stream.events if e["event"] == "turn_ended"]
    assert [e["stop_reason"] for e in ended] == ["end_turn"] * 4
    # They ran in the order the queue held them: every queue_changed frame lists its items
    # in the order they then started.
    for event in stream.events:
        if event["event"] == "queue_changed":
            order = [started.index(item["request_id"]) for item in event["items"]]
            assert order == sorted(order), (event["items"], started)
