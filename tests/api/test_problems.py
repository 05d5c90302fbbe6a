"""Problem+json mapping (docs/api.md §1, §4): validation, routing, domain, framed and 500 errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from c2.api.settings import Settings
from c2.core.bus import EventBus
from c2.core.engine import Engine
from c2.core.errors import StoreWriteError
from c2.core.store.database import Store
from tests.api.conftest import AppClient, run_app

PROBLEM = "application/problem+json"


def _problem(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == PROBLEM
    body: dict[str, Any] = resp.json()
    assert body["status"] == status and body["code"] == code
    assert body["type"] == f"urn:c2:problem:{code}"
    assert isinstance(body["title"], str) and isinstance(body["detail"], str)
    return body


async def test_problems_validation_is_422(app_client: AppClient, tmp_path: Path):
    """Invalid enums, missing fields and malformed JSON are 422 validation problems."""
    http = app_client.http
    bad_provider = {"provider": "nope", "cwd": str(tmp_path), "use_worktree": False}
    body = _problem(await http.post("/v1/sessions", json=bad_provider), 422, "validation_error")
    assert body["errors"] and all({"loc", "msg", "type"} == e.keys() for e in body["errors"])
    _problem(await http.post("/v1/sessions", json={"cwd": "."}), 422, "validation_error")
    _problem(
        await http.put("/v1/sessions/s/execution-policy", json={"mode": "sometimes"}),
        422,
        "validation_error",
    )
    _problem(
        await http.post(
            "/v1/ops", content=b"{not json", headers={"content-type": "application/json"}
        ),
        422,
        "validation_error",
    )
    _problem(await http.post("/v1/ops", json={"op": "launch_rockets"}), 422, "validation_error")
    # Bodies that cannot even be decoded are malformed input too, not a 400 of their own.
    for unreadable in (
        b'{"doc":[{"type":"text","text":"caf\xe9"}]}',  # Latin-1, not UTF-8
        b"[" * 20_000 + b"]" * 20_000,  # nested past any parser's depth
    ):
        resp = await http.post(
            "/v1/sessions/s/prompt",
            content=unreadable,
            headers={"content-type": "application/json"},
        )
        _problem(resp, 422, "validation_error")
    long_id = {"doc": [], "request_id": "x" * 129}
    _problem(await http.post("/v1/sessions/s/prompt", json=long_id), 422, "validation_error")
    cancel_bad_id = {"op": "cancel", "session": "s", "request_id": ""}
    refused = await http.post("/v1/ops", json=cancel_bad_id)
    _problem(refused, 422, "validation_error")
    assert "request_id" not in refused.json() and "request-id" not in refused.headers
    # A valid request_id in a refused body is echoed, as on every other answer to an op.
    for resp in (
        await http.post("/v1/sessions/s/prompt", json={"doc": "oops", "request_id": "val-1"}),
        await http.post("/v1/ops", json={"op": "prompt", "session": "s", "request_id": "val-1"}),
        await http.put(
            "/v1/sessions/s/execution-policy", json={"mode": "sometimes", "request_id": "val-1"}
        ),
    ):
        assert _problem(resp, 422, "validation_error")["request_id"] == "val-1"
        assert resp.headers["request-id"] == "val-1"


async def test_problems_routing_errors(app_client: AppClient):
    """Unknown routes are 404 and wrong methods 405, both as problems."""
    _problem(await app_client.http.get("/v1/nothing-here"), 404, "not_found")
    _problem(await app_client.http.patch("/v1/sessions"), 405, "method_not_allowed")


async def test_problems_domain_errors_name_the_session(app_client: AppClient):
    """A domain error maps to its status and code, with the session when known."""
    body = _problem(await app_client.http.get("/v1/sessions/missing"), 404, "no_such_session")
    assert body["session"] == "missing"
    resp = await app_client.http.post("/v1/ops", json={"op": "cancel", "session": "missing"})
    assert _problem(resp, 404, "no_such_session")["session"] == "missing"


async def test_problems_transcript_errors_are_framed(app_client: AppClient, tmp_path: Path):
    """Transcript failures carry the `transcript_error` frame shape on top of the problem."""
    created = await app_client.http.post(
        "/v1/sessions",
        json={"provider": {"custom": "echo"}, "cwd": str(tmp_path), "use_worktree": False},
    )
    session = created.json()["id"]
    empty = await app_client.http.get(f"/v1/sessions/{session}/transcript")
    assert empty.status_code == 200
    assert empty.json()["entries"] == [] and empty.json()["next_before"] is None
    bad = await app_client.http.get(
        f"/v1/sessions/{session}/transcript", params={"before": 7, "request_id": "page-1"}
    )
    body = _problem(bad, 400, "transcript_error")
    assert body["kind"] == "transcript_error"
    assert body["session"] == session and body["request_id"] == "page-1"
    assert body["message"]
    unknown = await app_client.http.get("/v1/sessions/nope/transcript")
    body = _problem(unknown, 404, "no_such_session")
    assert body["kind"] == "transcript_error" and body["session"] == "nope"
    assert body["request_id"] is None


async def test_problems_sessions_storage_failure_is_503(app_client: AppClient):
    """A failing session read is 503 `sessions_error`, never an empty list."""
    store = app_client.services.store
    await store.write(lambda uow: uow.conn.execute(text("DROP TABLE sessions")))
    resp = await app_client.http.get("/v1/sessions")
    body = _problem(resp, 503, "store_unavailable")
    assert body["kind"] == "sessions_error" and body["message"]


class _BrokenEngine(Engine):
    def list_providers(self) -> list[dict[str, Any]]:
        raise RuntimeError("secret internals")


def _broken(store: Store, bus: EventBus, settings: Settings) -> Engine:
    del bus
    return _BrokenEngine(store, settings.home)


@pytest.fixture
async def broken_client(tmp_path: Path) -> AsyncIterator[AppClient]:
    async for client in run_app(tmp_path / "home", engine_factory=_broken):
        yield client


async def test_problems_unexpected_error_is_500_without_trace(broken_client: AppClient):
    """An unexpected exception is a logged 500 problem that leaks nothing."""
    resp = await broken_client.http.get("/v1/providers")
    _problem(resp, 500, "internal_error")
    assert "secret" not in resp.text and "Traceback" not in resp.text


async def test_problems_shutdown_refuses_ops_and_readiness(app_client: AppClient):
    """While draining, /readyz is 503 and ops are 503 shutting_down with Retry-After."""
    assert (await app_client.http.get("/readyz")).status_code == 200
    await app_client.services.drain()
    _problem(await app_client.http.get("/readyz"), 503, "not_ready")
    resp = await app_client.http.post("/v1/ops", json={"op": "cancel", "session": "s"})
    _problem(resp, 503, "shutting_down")
    assert resp.headers["retry-after"] == "1"


async def test_a_write_the_database_cannot_take_is_503_not_500(
    app_client: AppClient, monkeypatch: pytest.MonkeyPatch
):
    """A write the store gave up on (database unreachable, disk full: StoreWriteError after its
    retry window) answers 503 store_unavailable wherever it happens, pairing included (it was
    a 500 with a traceback there)."""
    store = app_client.services.store

    async def gives_up(*_args: Any, **_kwargs: Any) -> Any:
        raise StoreWriteError("could not commit: connection refused; gave up retrying")

    monkeypatch.setattr(store, "write", gives_up)
    body = {"token": "t" * 43, "device_name": "phone"}
    resp = await app_client.http.post("/v1/pair", json=body)
    assert _problem(resp, 503, "store_unavailable")["detail"].startswith(
        "the database could not take the write"
    )
