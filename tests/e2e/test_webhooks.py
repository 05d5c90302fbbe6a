"""Webhooks through a real server, the scripted agent and a local receiver, on SQLite and on
PostgreSQL (the latter skipped without C2_TEST_DATABASE_URL): validation, signing, content
opt-in, retries with the same delivery id, auto-disable and re-enable, and deliveries that
survive a killed server (issue 15, part 3)."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.contract.pg import STORES, running_server
from tests.e2e.harness import C2Process, Client, EventReader
from tests.notify.receivers import Received, Receiver

SECRET = "whsec-test-0123456789"
# Retry delays of 1, 2, 4 … s shortened a hundredfold: ten failures take about 5 s.
FAST = {"C2_WEBHOOK_BACKOFF_SCALE": "0.01"}


@pytest.fixture(params=STORES, scope="module")
def shared_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[C2Process]:
    """One server per store for the module's tests; each starts with no webhook (`client`)."""
    home = tmp_path_factory.mktemp("c2hooks") / "home"
    with running_server(request.param, home, "c2_hooks", env=FAST) as c2:
        yield c2


@pytest.fixture(params=STORES)
def own_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[C2Process]:
    """A server of this test's own (it is killed and restarted)."""
    with running_server(request.param, tmp_path / "home", "c2_hooks", env=FAST) as c2:
        yield c2


@pytest.fixture
async def client(shared_server: C2Process) -> AsyncIterator[Client]:
    """A client of the shared server on which no webhook exists (an earlier test's webhooks
    and their pending deliveries are deleted), so a test counts only its own deliveries."""
    c = Client(shared_server)
    listed = await c.http.get("/v1/webhooks")
    assert listed.status_code == 200, listed.text
    for hook in listed.json()["webhooks"]:
        gone = await c.http.delete(f"/v1/webhooks/{hook['id']}")
        assert gone.status_code == 204, gone.text
    yield c
    await c.aclose()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


async def _hook(client: Client, url: str, events: list[str], **extra: Any) -> dict[str, Any]:
    resp = await client.http.post(
        "/v1/webhooks", json={"url": url, "events": events, "secret": SECRET, **extra}
    )
    assert resp.status_code == 201, resp.text
    created: dict[str, Any] = resp.json()
    return created


def _verify(req: Received, secret: str = SECRET) -> dict[str, Any]:
    """What a receiver does: check the signature over timestamp "." body, then parse."""
    stamp = req.headers["C2-Webhook-Timestamp"]
    expected = hmac.new(secret.encode(), stamp.encode() + b"." + req.body, hashlib.sha256)
    assert hmac.compare_digest(req.headers["C2-Webhook-Signature"], f"v1={expected.hexdigest()}")
    assert abs(int(stamp) - time.time()) < 300
    body: dict[str, Any] = json.loads(req.body)
    assert body["delivery_id"] == req.headers["C2-Webhook-Id"]
    return body


async def _settled_log(client: Client, hook_id: str, count: int) -> list[dict[str, Any]]:
    """The webhook's delivery log once `count` deliveries were recorded as delivered (the
    receiver sees a request before c2 records its answer)."""
    with anyio.fail_after(15):
        while True:
            resp = await client.http.get(f"/v1/webhooks/{hook_id}/deliveries")
            assert resp.status_code == 200, resp.text
            entries: list[dict[str, Any]] = resp.json()["deliveries"]
            if sum(e["state"] == "delivered" for e in entries) >= count:
                return entries
            await anyio.sleep(0.05)


def _ok(req: Received, path: str) -> bool:
    return req.path == path and req.status == 200


async def test_webhook_routes_validate_and_never_echo_the_secret(
    client: Client, receiver: Receiver
):
    created = await _hook(client, receiver.url, ["permission_request", "turn_ended"])
    assert set(created) >= {"id", "url", "events", "include_content", "created_at"}
    assert "secret" not in created and SECRET not in json.dumps(created)
    assert created["events"] == ["permission_request", "turn_ended"]
    assert created["include_content"] is False and created["enabled"] is True
    for body, code in (
        ({"url": receiver.url, "events": ["agent_text"], "secret": "s"}, "unknown_event"),
        ({"url": receiver.url, "events": ["nope"], "secret": "s"}, "unknown_event"),
        ({"url": "ftp://example.com/x", "events": ["error"], "secret": "s"}, "invalid_webhook_url"),
        ({"url": "http:///nohost", "events": ["error"], "secret": "s"}, "invalid_webhook_url"),
        ({"url": receiver.url, "events": [], "secret": "s"}, "validation_error"),
        ({"url": receiver.url, "events": ["error"]}, "validation_error"),
    ):
        resp = await client.http.post("/v1/webhooks", json=body)
        assert resp.status_code == 422, (body, resp.text)
        assert resp.json()["code"] == code, resp.text
    listed = (await client.http.get("/v1/webhooks")).json()
    assert [h["id"] for h in listed["webhooks"]] == [created["id"]]
    assert SECRET not in json.dumps(listed)
    got = await client.http.get(f"/v1/webhooks/{created['id']}")
    assert got.status_code == 200 and got.json() == created
    # Unknown request fields are ignored (docs/api.md §1), here as everywhere.
    patched = await client.http.patch(
        f"/v1/webhooks/{created['id']}", json={"events": ["error", "error"], "colour": "red"}
    )
    assert patched.status_code == 200 and patched.json()["events"] == ["error"]
    bad = await client.http.patch(f"/v1/webhooks/{created['id']}", json={"events": ["x"]})
    assert bad.status_code == 422 and bad.json()["code"] == "unknown_event"
    assert (await client.http.delete(f"/v1/webhooks/{created['id']}")).status_code == 204
    gone = await client.http.get(f"/v1/webhooks/{created['id']}")
    assert gone.status_code == 404 and gone.json()["code"] == "no_such_webhook"
    assert (await client.http.get(f"/v1/webhooks/{created['id']}/deliveries")).status_code == 404


async def test_create_is_idempotent_per_request_id(client: Client, receiver: Receiver):
    body = {"url": receiver.url, "events": ["error"], "secret": SECRET, "request_id": "r-1"}
    first = await client.http.post("/v1/webhooks", json=body)
    again = await client.http.post("/v1/webhooks", json=body)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    other = await client.http.post("/v1/webhooks", json={**body, "events": ["turn_ended"]})
    assert other.status_code == 409 and other.json()["code"] == "request_id_reused"
    assert len((await client.http.get("/v1/webhooks")).json()["webhooks"]) == 1


async def _permission_turn(client: Client, sid: str, text: str) -> dict[str, Any]:
    """A turn that parks an execute permission, is answered, and says `text`."""
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        resp = await client.prompt(sid, f"/permission execute Run the tests\n/text {text}")
        assert resp.status_code == 202, resp.text
        req = await stream.until_event("permission_request")
        answer = await client.answer(sid, req["request_id"], req["options"][0][0])
        assert answer.status_code < 300, answer.text
        await stream.until_event("turn_ended")
    return req


async def test_deliveries_are_signed_and_carry_no_content_unless_opted_in(
    client: Client, receiver: Receiver, tmp_path: Path
):
    events = ["permission_request", "turn_ended"]
    plain = await _hook(client, receiver.url + "?plain", events)
    full = await _hook(client, receiver.url + "?full", events, include_content=True)
    sid = (await client.new_session(tmp_path))["id"]
    secret_words = "the-transcript-says-xyzzy"
    req = await _permission_turn(client, sid, secret_words)

    reqs = await receiver.wait_for(lambda rs: len(rs) >= 4)
    by_hook: dict[str, list[dict[str, Any]]] = {}
    for r in reqs:
        assert r.headers["Content-Type"] == "application/json"
        body = _verify(r)
        by_hook.setdefault(body["webhook_id"], []).append(body)
    # Deliveries run concurrently and may arrive in any order: event_seq orders them.
    plain_bodies, full_bodies = (
        sorted(by_hook[h["id"]], key=lambda b: b["event_seq"]) for h in (plain, full)
    )
    assert [b["event"] for b in plain_bodies] == events == [b["event"] for b in full_bodies]

    asked = plain_bodies[0]
    assert asked["session"] == sid and asked["session_title"]
    assert asked["data"]["request_id"] == req["request_id"]
    assert asked["data"]["title"] == "Run the tests"
    assert asked["data"]["tool_kind"] == "execute"
    assert "options" not in asked["data"]
    ended = plain_bodies[1]
    assert "content" not in ended and ended["data"]["stop_reason"] == "end_turn"
    for body in plain_bodies:
        assert secret_words not in json.dumps(body)

    assert full_bodies[0]["data"]["options"] == req["options"]
    assert secret_words in full_bodies[1]["content"]["text"]
    assert full_bodies[1]["content"]["truncated"] is False

    log = await _settled_log(client, plain["id"], 2)
    assert len(log) == 2
    for entry in log:
        assert entry["attempts"] == 1 and entry["last_status"] == 200
        assert entry["delivered_at"] and entry["state"] == "delivered"
    ids = {e["delivery_id"] for e in log}
    assert ids == {b["delivery_id"] for b in plain_bodies}


async def test_failed_deliveries_are_retried_with_the_same_id(
    client: Client, receiver: Receiver, tmp_path: Path
):
    hook = await _hook(client, receiver.url, ["session_created"])
    receiver.fail_first = 3
    await client.new_session(tmp_path)
    reqs = await receiver.wait_for(lambda rs: any(r.status == 200 for r in rs))
    assert [r.status for r in reqs] == [500, 500, 500, 200]
    assert len({r.headers["C2-Webhook-Id"] for r in reqs}) == 1
    assert len({r.body for r in reqs}) == 1  # the same body, freshly signed each time
    for r in reqs:
        _verify(r)

    [entry] = await _settled_log(client, hook["id"], 1)
    assert entry["attempts"] == 4 and entry["last_status"] == 200 and entry["delivered_at"]
    assert entry["delivery_id"] == reqs[0].headers["C2-Webhook-Id"]


async def test_ten_failures_disable_the_webhook_until_re_enabled(
    client: Client, receiver: Receiver, tmp_path: Path
):
    # The URL's path and query are often the secret: the event (every device sees it) and
    # the log show its origin only.
    hook = await _hook(client, receiver.url + "?key=s3cret", ["session_created"])
    watcher = await _hook(client, receiver.url + "?watcher", ["webhook_disabled"])
    receiver.failing = True
    async with EventReader(client) as stream:
        await stream.frame()
        await client.new_session(tmp_path)
        disabled = await stream.until_event("webhook_disabled", timeout=60)
    assert disabled == {
        "event": "webhook_disabled",
        "session": None,
        "webhook": hook["id"],
        "url": receiver.url.removesuffix("/hook") + "/…",
        "failures": 10,
        "last_status": 503,
    }
    assert "s3cret" not in client.server.log_path.read_text(encoding="utf-8", errors="replace")
    state = (await client.http.get(f"/v1/webhooks/{hook['id']}")).json()
    assert state["enabled"] is False and state["failures"] == 10
    attempts = [r for r in receiver.snapshot() if r.path == "/hook?key=s3cret"]
    assert len(attempts) == 10

    # Disabled: no new deliveries are queued for it, nothing more is attempted.
    await client.new_session(tmp_path)
    log = (await client.http.get(f"/v1/webhooks/{hook['id']}/deliveries")).json()
    assert len(log["deliveries"]) == 1 and log["deliveries"][0]["attempts"] == 10

    receiver.failing = False
    # The watcher (subscribed to webhook_disabled) was told, once the receiver answered again.
    reqs = await receiver.wait_for(lambda rs: any(r.path == "/hook?watcher" for r in rs))
    told = _verify(next(r for r in reqs if r.path == "/hook?watcher"))
    assert told["event"] == "webhook_disabled" and told["data"]["webhook"] == hook["id"]
    assert told["webhook_id"] == watcher["id"]

    resp = await client.http.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": True})
    assert resp.status_code == 200 and resp.json()["enabled"] is True
    assert resp.json()["failures"] == 0
    # The pending delivery goes out again, under its id.
    reqs = await receiver.wait_for(
        lambda rs: any(r.path == "/hook?key=s3cret" and r.status == 200 for r in rs)
    )
    ok = next(r for r in reqs if r.path == "/hook?key=s3cret" and r.status == 200)
    assert ok.headers["C2-Webhook-Id"] == attempts[0].headers["C2-Webhook-Id"]


async def test_pending_deliveries_survive_a_killed_server(
    own_server: C2Process, receiver: Receiver, tmp_path: Path
):
    server = own_server
    client = Client(server)
    try:
        hook = await _hook(client, receiver.url, ["session_created"])
        receiver.failing = True
        created = await client.new_session(tmp_path)
        await receiver.wait_for(lambda rs: len(rs) >= 1)
    finally:
        await client.aclose()
    server.stop(signal.SIGKILL)  # no shutdown: whatever is pending is only in the database
    receiver.failing = False
    before = len(receiver.snapshot())
    server.start()
    reqs = await receiver.wait_for(lambda rs: any(r.status == 200 for r in rs[before:]))
    delivered = _verify(next(r for r in reqs[before:] if r.status == 200))
    assert delivered["event"] == "session_created"
    assert delivered["session"] == created["id"] and delivered["webhook_id"] == hook["id"]
    assert delivered["delivery_id"] == reqs[0].headers["C2-Webhook-Id"]
