"""What the server answers is declared where a generated client looks for it: optional bodies
a client can leave out, every problem status an operation can answer (the Host checks, the
body limit), `Location` on every 201 and `Idempotent-Replayed` on every reply a retry may
replay, the refusals included."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from c2.api.app import create_app
from c2.api.openapi import document
from tests.api.conftest import AppClient, run_app
from tests.conftest import make_settings
from tests.notify.pushservice import Browser

ECHO = {"custom": "echo"}
OPTIONAL_BODIES = {
    ("post", "/v1/sessions/{session_id}/cancel"),
    ("post", "/v1/sessions/{session_id}/queue/resume"),
    ("delete", "/v1/sessions/{session_id}/queue/{item}"),
}


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return document(create_app(make_settings(tmp_path_factory.mktemp("doc"))))


def _operations(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m, p): op for p, item in doc["paths"].items() for m, op in item.items()}


def _codes(doc: dict[str, Any], response: dict[str, Any]) -> list[str]:
    ref = response["content"]["application/problem+json"]["schema"]["$ref"]
    enum: list[str] = doc["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"]["code"][
        "enum"
    ]
    return enum


def _declared(doc: dict[str, Any], resp: httpx.Response) -> dict[str, Any]:
    """The response the document declares for `resp`'s operation and status (asserted)."""
    method, path = resp.request.method.lower(), resp.request.url.path
    matches = [  # a literal segment wins over a parameter (…/queue/resume, …/queue/{item})
        (template.count("{"), item[method]["responses"])
        for template, item in doc["paths"].items()
        if method in item
        and re.match("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template)) + "$", path)
    ]
    assert matches, f"no operation for {method} {path}"
    responses = min(matches, key=lambda match: match[0])[1]
    status = str(resp.status_code)
    assert status in responses, f"{method} {path} answered {status}, not declared"
    declared: dict[str, Any] = responses[status]
    if resp.headers.get("content-type") == "application/problem+json":
        assert resp.json()["code"] in _codes(doc, declared)
    for header in ("Location", "Idempotent-Replayed", "Request-Id"):
        if header in resp.headers:
            assert header in declared.get("headers", {}), (method, path, status, header)
    return declared


# -- 1. optional bodies -----------------------------------------------------------------------


def test_optional_bodies_are_the_model_without_a_null_branch(doc: dict[str, Any]):
    """cancel, resume_queue and remove_queued take an optional CorrelatedBody: no `null`
    member (openapi-python-client would send its UNSET default as that JSON value)."""
    optional = {
        key: op["requestBody"]
        for key, op in _operations(doc).items()
        if "requestBody" in op and not op["requestBody"].get("required", False)
    }
    assert set(optional) == OPTIONAL_BODIES
    for body in optional.values():
        schema = body["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/CorrelatedBody"}


async def test_optional_bodies_may_be_absent_empty_or_sent(app_client: AppClient, tmp_path):
    """The server takes each of the three without a body, with an empty JSON one (what a
    generated client sends), and with the object."""
    body = {"provider": ECHO, "cwd": str(tmp_path), "use_worktree": False}
    sid = (await app_client.http.post("/v1/sessions", json=body)).json()["id"]
    calls = [
        ("POST", f"/v1/sessions/{sid}/cancel", 202),
        ("POST", f"/v1/sessions/{sid}/queue/resume", 200),
        ("DELETE", f"/v1/sessions/{sid}/queue/none", 404),
    ]
    empty_json = {"Content-Type": "application/json"}
    for method, path, status in calls:
        for i, kwargs in enumerate(
            ({}, {"headers": empty_json}, {"json": {"request_id": f"{method}{path}"}})
        ):
            resp = await app_client.http.request(method, path, **kwargs)  # type: ignore[arg-type]
            assert resp.status_code == status, (method, path, i, resp.text)


# -- 4. every problem status declared ---------------------------------------------------------


def test_host_checks_and_the_body_limit_are_declared(doc: dict[str, Any]):
    """400 invalid_host and 421 host_not_allowed on every operation; 413 payload_too_large
    on every operation taking a body (and only there)."""
    for (method, path), op in _operations(doc).items():
        responses = op["responses"]
        assert "invalid_host" in _codes(doc, responses["400"]), (method, path)
        assert _codes(doc, responses["421"]) == ["host_not_allowed"], (method, path)
        if "requestBody" in op:
            assert _codes(doc, responses["413"]) == ["payload_too_large"], (method, path)
        else:
            assert "413" not in responses, (method, path)


async def test_host_and_size_refusals_are_declared_answers(doc: dict[str, Any], tmp_path: Path):
    """A foreign Host (421), a malformed one (400) and a body over the limit (413) answer
    statuses and codes the operation declares."""
    async for client in run_app(tmp_path / "home", max_body_bytes=2048):
        http = client.http
        foreign = await http.get("/v1/sessions", headers={"Host": "evil.example"})
        assert foreign.status_code == 421 and foreign.json()["code"] == "host_not_allowed"
        _declared(doc, foreign)
        malformed = await http.get("/healthz", headers={"Host": "bad host"})
        assert malformed.status_code == 400 and malformed.json()["code"] == "invalid_host"
        _declared(doc, malformed)
        big = {"provider": ECHO, "cwd": str(tmp_path), "use_worktree": False, "x": "y" * 4096}
        for path in ("/v1/sessions", "/v1/pair", "/v1/webhooks"):
            large = await http.post(path, json=big)
            assert large.status_code == 413 and large.json()["code"] == "payload_too_large"
            _declared(doc, large)


# -- 2. Location on every 201 -----------------------------------------------------------------


async def test_push_subscription_201_says_where_it_lives(doc: dict[str, Any], tmp_path: Path):
    """POST /v1/push-subscriptions answers Location: the subscription's URL, which DELETE
    takes; so does the same endpoint subscribed again."""
    async for client in run_app(tmp_path / "home", push_private_endpoints=True):
        browser = Browser.new("http://127.0.0.1:9/push/a").to_json()
        created = await client.http.post("/v1/push-subscriptions", json=browser)
        assert created.status_code == 201, created.text
        assert created.headers["location"] == f"/v1/push-subscriptions/{created.json()['id']}"
        assert "Location" in _declared(doc, created)["headers"]
        again = await client.http.post("/v1/push-subscriptions", json=browser)
        assert again.headers["location"] == created.headers["location"]
        gone = await client.http.delete(created.headers["location"])
        assert gone.status_code == 204


# -- 5. Idempotent-Replayed on replayable refusals --------------------------------------------


def test_replayed_refusals_declare_the_header(doc: dict[str, Any]):
    """A correlated operation's 4xx whose codes its own work answers (kept, replayed) declare
    Idempotent-Replayed; the request's checks and a reused request_id (never kept) do not."""
    ops = _operations(doc)

    def headers(key: tuple[str, str], status: str) -> set[str]:
        return set(ops[key]["responses"][status].get("headers", {}))

    prompt = ("post", "/v1/sessions/{session_id}/prompt")
    cancel = ("post", "/v1/sessions/{session_id}/cancel")
    webhook = ("post", "/v1/webhooks")
    submit = ("post", "/v1/ops")
    for key, status in [(prompt, "409"), (prompt, "404"), (cancel, "404"), (webhook, "422")]:
        assert "Idempotent-Replayed" in headers(key, status), (key, status)
    assert {"404", "409", "422"} <= {
        s for s in ops[submit]["responses"] if "Idempotent-Replayed" in headers(submit, s)
    }
    for key, status in [(prompt, "401"), (prompt, "415"), (prompt, "413"), (webhook, "409")]:
        assert "Idempotent-Replayed" not in headers(key, status), (key, status)
    answer = ("post", "/v1/sessions/{session_id}/permissions/{input_id}")
    assert "Idempotent-Replayed" not in headers(answer, "404")  # its request_id names the ask


async def test_a_replayed_refusal_answers_a_declared_header(
    doc: dict[str, Any], app_client: AppClient
):
    """A retried cancel of a missing session replays its 404 with Idempotent-Replayed, and
    the document declares the header on that response."""
    body = {"request_id": "cancel-missing"}
    first = await app_client.http.post("/v1/sessions/nope/cancel", json=body)
    again = await app_client.http.post("/v1/sessions/nope/cancel", json=body)
    assert first.status_code == again.status_code == 404
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert "Idempotent-Replayed" in _declared(doc, again)["headers"]
