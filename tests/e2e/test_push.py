"""Web Push through a real server, the scripted agent and a local fake push service that
checks the VAPID JWT and decrypts every message with the subscription's private key
(issue 15, part 3): keys in the home, subscriptions, a parked permission, its withdrawal
when answered, a finished turn, and subscriptions the push service says are gone."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.e2e.harness import C2Process, Client, EventReader, poll_until
from tests.e2e.test_scopes import pair
from tests.notify.pushservice import Browser, FakePushService, check_vapid, unb64url
from tests.notify.receivers import Received

SUBJECT = "mailto:ops@example.com"


# The fake push service listens on 127.0.0.1 over http: only allowed when asked for.
PRIVATE = {"C2_PUSH_PRIVATE_ENDPOINTS": "1"}


def _server(home: Path) -> Iterator[C2Process]:
    c2 = C2Process(home, env={"C2_VAPID_SUBJECT": SUBJECT, **PRIVATE})
    c2.start()
    yield c2
    c2.stop()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[C2Process]:
    """One server for the module's tests; each starts with no push subscription (`client`)."""
    yield from _server(tmp_path_factory.mktemp("c2push") / "home")


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[C2Process]:
    """A server of this test's own (it is restarted)."""
    yield from _server(tmp_path / "home")


@pytest.fixture
async def client(shared_server: C2Process) -> AsyncIterator[Client]:
    """A client of the shared server whose device has no push subscription (an earlier
    test's are deleted), so a test sees only its own pushes."""
    c = Client(shared_server)
    for sub in await _listed(c):
        assert (await c.http.delete(f"/v1/push-subscriptions/{sub}")).status_code == 204
    yield c
    await c.aclose()


@pytest.fixture
def pushes() -> Iterator[FakePushService]:
    with FakePushService() as service:
        yield service


async def _public_key(client: Client) -> str:
    resp = await client.http.get("/v1/push/vapid-public-key")
    assert resp.status_code == 200, resp.text
    key: str = resp.json()["public_key"]
    return key


async def _subscribe(client: Client, browser: Browser) -> dict[str, Any]:
    resp = await client.http.post("/v1/push-subscriptions", json=browser.to_json())
    assert resp.status_code == 201, resp.text
    created: dict[str, Any] = resp.json()
    return created


async def test_vapid_key_lives_in_the_home(own_server: C2Process):
    server = own_server
    client = Client(server)
    key = await _public_key(client)
    raw = unb64url(key)
    assert len(raw) == 65 and raw[0] == 4  # an uncompressed P-256 point
    path = server.home / "vapid_private.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in path.read_bytes()
    server.stop()
    server.start()
    assert await _public_key(client) == key  # kept across restarts
    await client.aclose()


async def test_subscriptions_are_checked(client: Client, pushes: FakePushService):
    good = Browser.new(pushes.endpoint("a")).to_json()
    for bad in (
        {**good, "endpoint": "ftp://example.com/x"},
        {**good, "keys": {**good["keys"], "p256dh": "AAAA"}},
        {**good, "keys": {**good["keys"], "auth": "not base64!"}},
        {"endpoint": good["endpoint"]},
    ):
        resp = await client.http.post("/v1/push-subscriptions", json=bad)
        assert resp.status_code == 422, (bad, resp.text)
    first = await _subscribe(client, Browser.new(pushes.endpoint("a")))
    again = await _subscribe(client, Browser.new(pushes.endpoint("a")))
    assert first["id"] == again["id"]  # one subscription per endpoint, keys replaced
    assert (await client.http.delete(f"/v1/push-subscriptions/{first['id']}")).status_code == 204
    gone = await client.http.delete(f"/v1/push-subscriptions/{first['id']}")
    assert gone.status_code == 404 and gone.json()["code"] == "no_such_push_subscription"


async def test_endpoints_are_public_https_unless_private_ones_are_allowed(
    tmp_path: Path, pushes: FakePushService
):
    """By default a subscription's endpoint must be https on a public address: any paired
    device, a read-only one too, names where c2 POSTs. A stored endpoint that no longer
    qualifies (here: stored while private ones were allowed) gets no push either."""
    home = tmp_path / "home"
    strict = C2Process(home, env={"C2_VAPID_SUBJECT": SUBJECT})
    strict.start()
    client = Client(strict)
    try:
        browser = Browser.new(pushes.endpoint("a")).to_json()
        for endpoint, said in (
            (pushes.endpoint("a"), "https"),
            ("https://127.0.0.1/push/a", "not a public address"),
            ("https://localhost:8443/push/a", "not a public address"),
            ("https://10.1.2.3/push/a", "not a public address"),
            ("https://[::1]/push/a", "not a public address"),
            # Global to Python, but wrapping loopback: NAT64 and 6to4.
            ("https://[64:ff9b::7f00:1]/push/a", "not a public address"),
            ("https://[2002:7f00:1::]/push/a", "not a public address"),
        ):
            resp = await client.http.post(
                "/v1/push-subscriptions", json={**browser, "endpoint": endpoint}
            )
            assert resp.status_code == 422, (endpoint, resp.text)
            assert resp.json()["code"] == "invalid_push_subscription"
            assert said in resp.json()["detail"], resp.text
        assert (await client.http.get("/v1/push-subscriptions")).json()["subscriptions"] == []
    finally:
        await client.aclose()
        strict.stop()
    lax = C2Process(home, env={"C2_VAPID_SUBJECT": SUBJECT, **PRIVATE})
    lax.start()
    client = Client(lax)
    try:
        await _subscribe(client, Browser.new(pushes.endpoint("a")))
    finally:
        await client.aclose()
        lax.stop()
    strict.start()
    client = Client(strict)
    try:
        sid = (await client.new_session(tmp_path))["id"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            assert (await client.prompt(sid, "/text hello")).status_code == 202
            await stream.until_event("turn_ended")
        await poll_until(lambda: "not sent: the endpoint must be an https URL" in strict.log_tail())
        assert pushes.requests == []
    finally:
        await client.aclose()
        strict.stop()


def _messages(reqs: list[Received], browser: Browser) -> list[dict[str, Any]]:
    path = "/push/" + browser.endpoint.rsplit("/", 1)[1]
    return [browser.decrypt(r.body) for r in reqs if r.path == path]


async def test_parked_permission_is_pushed_then_withdrawn_when_answered(
    client: Client, pushes: FakePushService, tmp_path: Path
):
    key = await _public_key(client)
    phone, laptop = Browser.new(pushes.endpoint("phone")), Browser.new(pushes.endpoint("laptop"))
    await _subscribe(client, phone)
    await _subscribe(client, laptop)
    sid = (await client.new_session(tmp_path))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        resp = await client.prompt(sid, "/permission execute Run the tests\n/text secret-words")
        assert resp.status_code == 202, resp.text
        req = await stream.until_event("permission_request")
        title = (await client.snapshot(sid))["title"]  # named after the first prompt
        reqs = await pushes.wait_for(lambda rs: len(rs) >= 2)
        input_id = req["request_id"]
        for browser in (phone, laptop):
            [asked] = _messages(reqs, browser)
            assert asked == {
                "type": "permission_request",
                "session": sid,
                "session_title": title,
                "title": "Run the tests",
                "tool_kind": "execute",
                "tag": input_id,
            }
        for r in reqs:
            assert r.headers["Content-Encoding"] == "aes128gcm"
            assert int(r.headers["TTL"]) > 0
            assert r.headers["Topic"] == input_id.replace("-", "")
            assert r.headers["Urgency"] == "high"
            check_vapid(r, key, SUBJECT, f"http://127.0.0.1:{pushes.port}")
        await client.answer(sid, input_id, req["options"][0][0])
        await stream.until_event("turn_ended")

    reqs = await pushes.wait_for(lambda rs: len(rs) >= 6)
    for browser in (phone, laptop):
        asked, withdrawn, ended = _messages(reqs, browser)
        assert withdrawn == {
            "type": "withdrawn",
            "session": sid,
            "session_title": title,
            "title": None,
            "tool_kind": None,
            "tag": input_id,
        }
        assert ended["type"] == "turn_ended" and ended["session"] == sid
        assert ended["title"] == "end_turn" and ended["tool_kind"] is None
        assert "secret-words" not in str(ended)
    topics = [r.headers["Topic"] for r in reqs if r.path == "/push/phone"]
    assert topics[0] == topics[1] != topics[2]  # the withdrawal replaces the request


async def test_a_gone_subscription_is_forgotten(
    client: Client, pushes: FakePushService, tmp_path: Path
):
    kept, dropped = Browser.new(pushes.endpoint("kept")), Browser.new(pushes.endpoint("dropped"))
    kept_sub = await _subscribe(client, kept)
    gone = await _subscribe(client, dropped)
    assert sorted(await _listed(client)) == sorted([kept_sub["id"], gone["id"]])
    pushes.gone.add("/push/dropped")
    sid = (await client.new_session(tmp_path))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/text one")
        await stream.until_event("turn_ended")
    await pushes.wait_for(lambda rs: {r.path for r in rs} == {"/push/kept", "/push/dropped"})
    # The 410 removed it: the device's list no longer holds it.
    with anyio.fail_after(10):
        while gone["id"] in await _listed(client):  # noqa: ASYNC110 - server state
            await anyio.sleep(0.05)
    assert await _listed(client) == [kept_sub["id"]]


async def _listed(client: Client) -> list[str]:
    resp = await client.http.get("/v1/push-subscriptions")
    assert resp.status_code == 200, resp.text
    return [s["id"] for s in resp.json()["subscriptions"]]


async def test_a_revoked_device_is_pushed_nothing_and_keeps_few_subscriptions(
    client: Client, shared_server: C2Process, pushes: FakePushService, tmp_path: Path
):
    """A device keeps its newest eight subscriptions (hundreds would slow every push); once
    revoked it is pushed nothing, though a push would still tell session titles and tool
    calls to a lost phone."""
    phone = pair(shared_server, "lost phone", "read,approve")
    headers = {"Authorization": f"Bearer {phone.bearer}"}
    async with httpx.AsyncClient(base_url=shared_server.base_url, headers=headers) as lost:
        for n in range(10):
            body = Browser.new(pushes.endpoint(f"lost{n}")).to_json()
            assert (await lost.post("/v1/push-subscriptions", json=body)).status_code == 201
        listed = (await lost.get("/v1/push-subscriptions")).json()["subscriptions"]
    kept = sorted(s["endpoint"].rsplit("/", 1)[1] for s in listed)
    assert kept == sorted(f"lost{n}" for n in range(2, 10))
    assert (await client.http.delete(f"/v1/devices/{phone.device_id}")).status_code == 204
    await _subscribe(client, Browser.new(pushes.endpoint("mine")))
    sid = (await client.new_session(tmp_path))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/text one")
        await stream.until_event("turn_ended")
    await pushes.wait_for(lambda rs: any(r.path == "/push/mine" for r in rs))
    await anyio.sleep(0.5)  # a push to the revoked device would have gone out with it
    assert [r.path for r in pushes.requests if r.path.startswith("/push/lost")] == []
