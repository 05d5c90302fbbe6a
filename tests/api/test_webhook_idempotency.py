"""`POST /v1/webhooks` with a `request_id` answers as an op does (docs/api.md §1, README
"Decisions where the contract is silent"): every answer echoes the id, 2xx and 4xx outcomes
are kept and replayed, another body under a used id is 409 `request_id_reused`."""

from __future__ import annotations

from typing import Any

from c2.api.errors import header_text
from tests.api.conftest import AppClient

URL = "http://127.0.0.1:9/hook"


def _hook(request_id: str | None = None, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"url": URL, "events": ["error"], "secret": "s3cret", **changes}
    if request_id is not None:
        body["request_id"] = request_id
    return body


async def _hooks(app_client: AppClient) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = (await app_client.http.get("/v1/webhooks")).json()["webhooks"]
    return listed


async def test_refusals_echo_the_request_id(app_client: AppClient):
    """A 422 (bad URL, unknown event) and a 409 (reused id) carry Request-Id and request_id."""
    for request_id, body in [
        ("bad-url", _hook("bad-url", url="ftp://example.com/x")),
        ("bad-event", _hook("bad-event", events=["no_such_event"])),
    ]:
        resp = await app_client.http.post("/v1/webhooks", json=body)
        assert resp.status_code == 422, resp.text
        assert resp.headers["content-type"] == "application/problem+json"
        assert resp.headers["request-id"] == request_id
        assert resp.json()["request_id"] == request_id
    created = await app_client.http.post("/v1/webhooks", json=_hook("taken"))
    assert created.status_code == 201 and created.headers["request-id"] == "taken"
    reused = await app_client.http.post("/v1/webhooks", json=_hook("taken", secret="other"))
    assert reused.status_code == 409 and reused.json()["code"] == "request_id_reused"
    assert reused.headers["request-id"] == "taken"
    assert reused.json()["request_id"] == "taken"
    assert "idempotent-replayed" not in reused.headers
    plain = await app_client.http.post("/v1/webhooks", json=_hook(url="ftp://example.com/x"))
    assert plain.status_code == 422 and "request-id" not in plain.headers
    assert "request_id" not in plain.json()


async def test_a_refusal_is_kept_and_replayed(app_client: AppClient):
    """After a 422 for request_id X, the same body replays it (Idempotent-Replayed) and a valid
    body under X is 409: no webhook is created under a key that was refused."""
    bad = _hook("x-1", url="ftp://example.com/x")
    first = await app_client.http.post("/v1/webhooks", json=bad)
    again = await app_client.http.post("/v1/webhooks", json=bad)
    assert first.status_code == again.status_code == 422
    assert first.json()["code"] == "invalid_webhook_url"
    assert first.content == again.content  # the first answer's bytes
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["request-id"] == "x-1"
    assert again.headers["content-type"] == "application/problem+json"
    valid = await app_client.http.post("/v1/webhooks", json=_hook("x-1"))
    assert valid.status_code == 409 and valid.json()["code"] == "request_id_reused"
    assert await _hooks(app_client) == []


async def test_a_creation_is_replayed_byte_for_byte(app_client: AppClient):
    """The same body under the same id answers the first 201 again, with its Location."""
    first = await app_client.http.post("/v1/webhooks", json=_hook("c-1"))
    again = await app_client.http.post("/v1/webhooks", json=_hook("c-1"))
    assert first.status_code == again.status_code == 201
    assert first.content == again.content
    assert first.headers["location"] == again.headers["location"]
    assert first.headers["location"] == f"/v1/webhooks/{first.json()['id']}"
    assert again.headers["idempotent-replayed"] == "true"
    assert [h["id"] for h in await _hooks(app_client)] == [first.json()["id"]]


async def test_request_ids_are_checked_and_encoded_as_for_ops(app_client: AppClient):
    """An id with whitespace at an end is a 422 (the answer could not carry it); any other is
    echoed percent-encoded where it is not printable ASCII."""
    edged = await app_client.http.post("/v1/webhooks", json=_hook(" edged"))
    assert edged.status_code == 422 and edged.json()["code"] == "validation_error"
    request_id = "réf-日本"
    created = await app_client.http.post("/v1/webhooks", json=_hook(request_id))
    assert created.status_code == 201, created.text
    assert created.headers["request-id"] == header_text(request_id) != request_id
