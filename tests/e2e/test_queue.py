"""The durable follow-up queue through a real server and agent (issue 14 part 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from tests.e2e.harness import C2Process, Client, EventReader


def doc(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


async def enqueue(
    client: Client, sid: str, text: str, request_id: str | None = None, status: int = 201
) -> dict[str, Any]:
    body: dict[str, Any] = {"doc": doc(text)}
    if request_id is not None:
        body["request_id"] = request_id
    resp = await client.http.post(f"/v1/sessions/{sid}/queue", json=body)
    assert resp.status_code == status, resp.text
    data: dict[str, Any] = resp.json()
    if status == 201:  # the created item, where PATCH / DELETE reach it
        assert resp.headers["Location"] == f"/v1/sessions/{sid}/queue/{data['id']}"
    return data


async def queue_of(client: Client, sid: str) -> dict[str, Any]:
    resp = await client.http.get(f"/v1/sessions/{sid}/queue")
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    return data


async def idle_and_empty(client: Client, sid: str) -> None:
    with anyio.fail_after(30):
        while True:
            snap = await client.snapshot(sid)
            if (
                snap["activity"]["state"]["kind"] == "idle"
                and not (await queue_of(client, sid))["items"]
            ):
                return
            await anyio.sleep(0.05)


async def test_queued_prompts_run_in_order_with_no_client(client: Client, workdir: Path) -> None:
    """Three prompts queued while the first runs start one after the other, each its own turn
    with its request_id, with no stream open."""
    sid = (await client.new_session(workdir))["id"]
    first = await enqueue(client, sid, "/sleep 300\n/text one", "q-1")
    assert first["position"] == 0 and first["request_id"] == "q-1"  # started at once
    second = await enqueue(client, sid, "/text two", "q-2")
    third = await enqueue(client, sid, "/text three", "q-3")
    assert (second["position"], third["position"]) == (0, 1)
    busy = await client.prompt(sid, "/text not now")
    assert busy.status_code == 409  # the prompt op keeps the protocol's rule
    await idle_and_empty(client, sid)
    async with EventReader(client, session=sid, after=0) as replay:
        await replay.frame()
        for _ in range(3):
            await replay.until_event("turn_ended")
    started = [e for e in replay.events if e["event"] == "turn_started"]
    assert [e["request_id"] for e in started] == ["q-1", "q-2", "q-3"]
    assert [e["turn"] for e in started] == [1, 2, 3]
    ended = [e["stop_reason"] for e in replay.events if e["event"] == "turn_ended"]
    assert ended == ["end_turn"] * 3
    assert (await queue_of(client, sid)) == {
        "session": sid,
        "paused": False,
        "pause_reason": None,
        "items": [],
    }


async def test_cancel_pauses_edit_remove_resume(client: Client, workdir: Path) -> None:
    """A cancelled turn pauses the queue; items can be edited and removed; resume starts the
    next; two clients see the same queue events."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as one, EventReader(client, session=sid) as two:
        await one.frame()
        await two.frame()
        await enqueue(client, sid, "/hang", "h-1")
        await one.until_event("turn_started", request_id="h-1")
        after = await enqueue(client, sid, "/text after", "a-1")
        extra = await enqueue(client, sid, "/text extra")
        await client.http.post(f"/v1/sessions/{sid}/cancel")
        paused = await one.until_event("queue_paused")
        assert paused == {"event": "queue_paused", "session": sid, "reason": "cancelled"}
        view = await queue_of(client, sid)
        assert view["paused"] is True and view["pause_reason"] == "cancelled"
        assert [i["id"] for i in view["items"]] == [after["id"], extra["id"]]
        resp = await client.http.patch(
            f"/v1/sessions/{sid}/queue/{after['id']}", json={"doc": doc("/text edited")}
        )
        assert resp.status_code == 200, resp.text
        assert resp.json() == {**after, "doc": doc("/text edited")}
        resp = await client.http.delete(f"/v1/sessions/{sid}/queue/{extra['id']}")
        assert resp.status_code == 200 and [i["id"] for i in resp.json()["items"]] == [after["id"]]
        gone = await client.http.delete(f"/v1/sessions/{sid}/queue/{extra['id']}")
        assert gone.status_code == 404 and gone.json()["code"] == "no_such_queue_item"
        resumed = await client.http.post(f"/v1/sessions/{sid}/queue/resume", json={})
        assert resumed.status_code == 200, resumed.text
        assert await one.until_event("queue_resumed") == {"event": "queue_resumed", "session": sid}
        started = await one.until_event("turn_started", request_id="a-1")
        assert started["turn"] == 2
        await one.until_event("turn_ended")
        await two.until_event("turn_started", request_id="a-1")
        await two.until_event("turn_ended")
    texts = [e["text"] for e in one.events if e["event"] == "agent_text"]
    assert "edited" in "".join(texts)

    def queue_events(stream: EventReader) -> list[dict[str, Any]]:
        return [e for e in stream.events if e["event"].startswith("queue_")]

    assert queue_events(one) == queue_events(two) and len(queue_events(one)) >= 6


async def test_a_parked_permission_pauses_the_queue(client: Client, workdir: Path) -> None:
    """A permission parked in a queued turn pauses the queue; answering it does not resume."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await enqueue(client, sid, "/permission execute Run it", "p-1")
        request = await stream.until_event("permission_request")
        await enqueue(client, sid, "/text next", "n-1")
        paused = await stream.until_event("queue_paused")
        assert paused["reason"] == "permission"
        await client.answer(sid, request["request_id"], "allow")
        ended = await stream.until_event("turn_ended")
        assert ended["stop_reason"] == "end_turn"
        # The session is free for a client's own prompt: the queue did not start `n-1`.
        assert (await client.prompt(sid, "/text mine", request_id="m-1")).status_code == 202
        await stream.until_event("turn_ended")
    started = [e["request_id"] for e in stream.events if e["event"] == "turn_started"]
    assert started == ["p-1", "m-1"]
    view = await queue_of(client, sid)
    assert view["paused"] is True and [i["request_id"] for i in view["items"]] == ["n-1"]


async def test_restart_keeps_the_queue_paused(fresh_c2: C2Process, workdir: Path) -> None:
    """The queue survives a restart, paused `interrupted` until a client resumes it."""
    client = Client(fresh_c2)
    try:
        sid = (await client.new_session(workdir))["id"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            await enqueue(client, sid, "/hang", "h-1")
            await stream.until_event("turn_started")
            await enqueue(client, sid, "/text later", "l-1")
        fresh_c2.stop()
        fresh_c2.start()
        view = await queue_of(client, sid)
        assert view["paused"] is True and view["pause_reason"] == "interrupted"
        assert [i["request_id"] for i in view["items"]] == ["l-1"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            resp = await client.http.post(f"/v1/sessions/{sid}/queue/resume")
            assert resp.status_code == 200, resp.text
            started = await stream.until_event("turn_started")
            assert started["request_id"] == "l-1"
            await stream.until_event("turn_ended")
    finally:
        await client.aclose()
