"""Idempotent retry of ops (docs/api.md §1) through the real app and engine, over ASGITransport."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, text

from c2.core.store.tables import IdempotencyRow
from tests.api.conftest import AppClient

ECHO = {"custom": "echo"}


def _new_session(cwd: Path, request_id: str | None = "create-1", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"provider": ECHO, "cwd": str(cwd), "use_worktree": False, **extra}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def _count(events: list[dict[str, Any]], name: str, **match: Any) -> int:
    return sum(
        1 for e in events if e["event"] == name and all(e.get(k) == v for k, v in match.items())
    )


async def test_idempotency_new_session_replays_first_outcome(app_client: AppClient, tmp_path):
    """The same request_id and body returns the first 201 again and creates nothing more."""
    first = await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))
    again = await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))
    assert first.status_code == again.status_code == 201
    assert first.content == again.content  # the first answer's bytes, replayed
    assert first.headers["location"] == again.headers["location"]
    assert first.headers["location"] == f"/v1/sessions/{first.json()['id']}"
    assert first.headers["request-id"] == again.headers["request-id"] == "create-1"
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    listed = (await app_client.http.get("/v1/sessions")).json()["sessions"]
    assert [s["id"] for s in listed] == [first.json()["id"]]
    events = await app_client.logged_events()
    assert _count(events, "session_created", request_id="create-1") == 1


async def test_idempotency_different_body_is_409(app_client: AppClient, tmp_path):
    """Reusing a request_id with another body is 409 request_id_reused, nothing performed."""
    await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))
    other = tmp_path / "other"
    other.mkdir()
    resp = await app_client.http.post("/v1/sessions", json=_new_session(other))
    assert resp.status_code == 409
    assert resp.headers["content-type"] == "application/problem+json"
    assert resp.json()["code"] == "request_id_reused"
    assert resp.json()["request_id"] == "create-1"
    assert resp.headers["request-id"] == "create-1"
    assert len((await app_client.http.get("/v1/sessions")).json()["sessions"]) == 1


async def test_idempotency_shared_by_ops_and_resource_routes(app_client: AppClient, tmp_path):
    """`POST /v1/ops` and the resource route are one op: a retry through either replays."""
    first = await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))
    via_ops = await app_client.http.post(
        "/v1/ops", json={"op": "new_session", **_new_session(tmp_path), "ignored": 1}
    )
    assert via_ops.status_code == 201
    assert via_ops.content == first.content
    assert via_ops.headers["location"] == first.headers["location"]
    assert via_ops.headers["idempotent-replayed"] == "true"


async def test_idempotency_concurrent_duplicates_perform_once(app_client: AppClient, tmp_path):
    """Concurrent duplicates are serialized: one session, every reply identical."""
    replies = await asyncio.gather(
        *(app_client.http.post("/v1/sessions", json=_new_session(tmp_path)) for _ in range(6))
    )
    assert {r.status_code for r in replies} == {201}
    assert len({r.json()["id"] for r in replies}) == 1
    assert sum("idempotent-replayed" not in r.headers for r in replies) == 1
    events = await app_client.logged_events()
    assert _count(events, "session_created") == 1


async def test_idempotency_is_scoped_to_the_device(app_client: AppClient, tmp_path):
    """Another device reusing the request_id performs its own op."""
    mine = await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))
    other = await app_client.as_device("phone")
    theirs = await other.post("/v1/sessions", json=_new_session(tmp_path))
    assert theirs.status_code == 201
    assert theirs.json()["id"] != mine.json()["id"]


async def test_idempotency_replays_problem_outcomes(app_client: AppClient):
    """A 4xx outcome is the first outcome too: the retry gets the same problem, replayed."""
    body = {"doc": [{"type": "text", "text": "hi"}], "request_id": "p-404"}
    first = await app_client.http.post("/v1/sessions/nope/prompt", json=body)
    again = await app_client.http.post("/v1/sessions/nope/prompt", json=body)
    assert first.status_code == again.status_code == 404
    assert first.content == again.content
    assert first.headers["content-type"] == again.headers["content-type"]
    assert again.headers["content-type"] == "application/problem+json"
    assert first.json()["code"] == "no_such_session"
    assert first.json()["session"] == "nope"
    assert again.headers["idempotent-replayed"] == "true"


async def test_idempotency_prompt_runs_one_turn(app_client: AppClient, tmp_path):
    """A retried prompt returns the same acceptance and starts no second turn."""
    session = (await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))).json()
    body = {"doc": [{"type": "text", "text": "hello"}], "request_id": "prompt-1"}
    first = await app_client.http.post(f"/v1/sessions/{session['id']}/prompt", json=body)
    again = await app_client.http.post(f"/v1/sessions/{session['id']}/prompt", json=body)
    assert first.status_code == again.status_code == 202
    assert first.content == again.content
    assert first.json()["request_id"] == "prompt-1"
    events = await app_client.logged_events()
    assert _count(events, "turn_started", request_id="prompt-1") == 1


async def test_idempotency_cancel_uses_body_request_id(app_client: AppClient, tmp_path):
    """Ops without a protocol request_id (cancel) still replay by the body's request_id."""
    session = (await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))).json()
    url = f"/v1/sessions/{session['id']}/cancel"
    first = await app_client.http.post(url, json={"request_id": "cancel-1"})
    again = await app_client.http.post(url, json={"request_id": "cancel-1"})
    assert first.status_code == again.status_code == 202
    assert first.json() == {"session": session["id"], "cancelled": False}
    assert again.headers["idempotent-replayed"] == "true"
    bare = await app_client.http.post(url)
    assert bare.status_code == 202 and "request-id" not in bare.headers


async def test_idempotency_not_applied_to_answer_permission(app_client: AppClient, tmp_path):
    """answer_permission's request_id names the permission: answers are never replayed."""
    session = (await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))).json()
    url = f"/v1/sessions/{session['id']}/permissions/perm-1"
    replies = [await app_client.http.post(url, json={"option_id": "allow"}) for _ in range(2)]
    assert [r.status_code for r in replies] == [409, 409]
    assert all(r.json()["code"] == "permission_not_pending" for r in replies)
    assert all("idempotent-replayed" not in r.headers for r in replies)


async def test_bare_ops_answer_with_their_resource_routes_status(app_client: AppClient, tmp_path):
    """`POST /v1/ops` answers each op as its resource route does: 201 with Location for a
    new session and a queued prompt, 202 for a prompt and a cancel, 200 for a setting."""
    created = await app_client.http.post(
        "/v1/ops", json={"op": "new_session", **_new_session(tmp_path, request_id=None)}
    )
    assert created.status_code == 201
    sid = created.json()["id"]
    assert created.headers["location"] == f"/v1/sessions/{sid}"
    assert "request-id" not in created.headers
    doc = [{"type": "text", "text": "hello"}]
    prompt = await app_client.http.post(
        "/v1/ops", json={"op": "prompt", "session": sid, "doc": doc, "request_id": "bare-1"}
    )
    assert prompt.status_code == 202 and prompt.headers["request-id"] == "bare-1"
    assert prompt.json()["request_id"] == "bare-1"
    queued = await app_client.http.post(
        "/v1/ops", json={"op": "queue_prompt", "session": sid, "doc": doc}
    )
    assert queued.status_code == 201
    assert queued.headers["location"] == f"/v1/sessions/{sid}/queue/{queued.json()['id']}"
    cancel = await app_client.http.post("/v1/ops", json={"op": "cancel", "session": sid})
    assert cancel.status_code == 202 and cancel.json()["session"] == sid
    policy = {"op": "set_execution_policy", "session": sid, "mode": "yolo"}
    policy["sandbox"] = "read_only"
    resp = await app_client.http.post("/v1/ops", json=policy)
    assert resp.status_code == 200 and resp.json()["policy"]["mode"] == "yolo"


async def test_idempotency_record_unreadable_is_503_not_500(app_client: AppClient, tmp_path):
    """When the request's idempotency record cannot be read, the op does not run and the
    answer is 503 `store_unavailable` with Retry-After (retry with the same request_id)."""
    store = app_client.services.store
    # From the side, as the `finally` mends it: through the store's writer the drop could share
    # a transaction with the start-up sweep's prune of this very table, and fail along with it.
    await asyncio.to_thread(
        _on_the_side, store.url, lambda conn: conn.execute(text("DROP TABLE idempotency"))
    )
    try:
        resp = await app_client.http.post("/v1/sessions", json=_new_session(tmp_path))
        assert resp.status_code == 503, resp.text
        assert resp.json()["code"] == "store_unavailable"
        assert resp.headers["Retry-After"] == "1"
        listed = (await app_client.http.get("/v1/sessions")).json()["sessions"]
        assert listed == []
    finally:
        # Mend the store from the side, as an operator would: a write still queued behind the
        # fault is then retried to success instead of holding shutdown for the whole retry window.
        table = IdempotencyRow.__table__  # type: ignore[attr-defined]
        await asyncio.to_thread(_on_the_side, store.url, table.create)


def _on_the_side(url: str, work: Callable[[Connection], object]) -> None:
    """Run `work` in a transaction on a connection of its own, not the store's."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            work(conn)
    finally:
        engine.dispose()
