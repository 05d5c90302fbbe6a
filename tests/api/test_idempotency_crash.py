"""The idempotent reply is kept in the op's own transaction (docs/api.md §1, issue 18).

A server that dies between an op's effect and a record written after it would make the
retry run the op a second time. Here the server "dies" at that point: nothing is recorded
after the op returns (`IdempotentOps._record`, the after-the-op path, records nothing and
notes who reached it), the app stops, a new one starts on the same home, and the retry of
the same request must replay the first reply and perform nothing again. Before the reply
was kept with the effect, every case here created, started or queued a second time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from c2.core.idempotent import IdempotentOps
from c2.core.store.database import ReadUnit
from c2.core.store.idempotency import IdempotencyRecord, OpRecord
from tests.api.conftest import AppClient, DeclaredCodes, run_app

ECHO = {"custom": "echo"}
TEXT = [{"type": "text", "text": "hello"}]


@dataclass
class Case:
    """An op sent under request_id "retry-1": `setup` prepares (returns the session id or
    None), `send` sends the op, `performed` counts its effects in the log and the store."""

    setup: Callable[[httpx.AsyncClient, Path], Awaitable[str | None]]
    send: Callable[[httpx.AsyncClient, Path, str | None], Awaitable[httpx.Response]]
    performed: Callable[[list[dict[str, Any]], httpx.AsyncClient], Awaitable[int]]


async def _no_session(_http: httpx.AsyncClient, _cwd: Path) -> str | None:
    return None


async def _session(http: httpx.AsyncClient, cwd: Path) -> str | None:
    body = {"provider": ECHO, "cwd": str(cwd), "use_worktree": False}
    created = await http.post("/v1/sessions", json=body)
    assert created.status_code == 201
    return str(created.json()["id"])


def _count(name: str, **match: Any) -> Callable[[list[dict[str, Any]], Any], Awaitable[int]]:
    async def count(events: list[dict[str, Any]], _http: Any) -> int:
        return sum(
            1 for e in events if e["event"] == name and all(e.get(k) == v for k, v in match.items())
        )

    return count


CASES = {
    "new_session": Case(
        _no_session,
        lambda http, cwd, _sid: http.post(
            "/v1/sessions",
            json={
                "provider": ECHO,
                "cwd": str(cwd),
                "use_worktree": False,
                "request_id": "retry-1",
            },
        ),
        _count("session_created", request_id="retry-1"),
    ),
    "prompt": Case(
        _session,
        lambda http, _cwd, sid: http.post(
            f"/v1/sessions/{sid}/prompt", json={"doc": TEXT, "request_id": "retry-1"}
        ),
        _count("turn_started", request_id="retry-1"),
    ),
    "execution_policy": Case(
        _session,
        lambda http, _cwd, sid: http.put(
            f"/v1/sessions/{sid}/execution-policy",
            json={"mode": "yolo", "sandbox": "read_only", "request_id": "retry-1"},
        ),
        _count("execution_policy_changed", request_id="retry-1"),
    ),
    "queue_prompt": Case(
        _session,
        lambda http, _cwd, sid: http.post(
            f"/v1/sessions/{sid}/queue", json={"doc": TEXT, "request_id": "retry-1"}
        ),
        _count("turn_started", request_id="retry-1"),  # an idle session starts it at once
    ),
    "problem": Case(  # a refusal is an outcome too: its error event is not broadcast twice
        _no_session,
        lambda http, _cwd, _sid: http.post(
            "/v1/sessions/nope/prompt", json={"doc": TEXT, "request_id": "retry-1"}
        ),
        _count("error", request_id="retry-1"),
    ),
}


@asynccontextmanager
async def _as(app: AppClient, bearer: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=app.transport,
        base_url="http://localhost",
        headers={"Authorization": bearer},
        event_hooks={"response": [DeclaredCodes(app.app)]},
    ) as http:
        yield http


def _kept(device_id: str, request_id: str, r: ReadUnit) -> IdempotencyRecord | None:
    return r.idempotency.get(device_id, request_id)


@pytest.mark.parametrize("name", list(CASES))
async def test_a_retry_after_dying_past_the_effect_replays(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    home = tmp_path / "home"
    reached: list[str] = []

    async def died(_self: IdempotentOps, scope: OpRecord, _write: object) -> None:
        reached.append(scope.request_id)  # the server is gone before this could commit

    monkeypatch.setattr(IdempotentOps, "_record", died)
    async for app in run_app(home):
        bearer = app.http.headers["Authorization"]
        session = await case.setup(app.http, tmp_path)
        first = await case.send(app.http, tmp_path, session)
        assert "idempotent-replayed" not in first.headers
    assert reached == []  # the reply was kept with the op's own writes

    async for restarted in run_app(home):
        async with _as(restarted, bearer) as http:
            again = await case.send(http, tmp_path, session)
            events = await restarted.logged_events()
            assert (again.status_code, again.json()) == (first.status_code, first.json())
            assert again.headers["idempotent-replayed"] == "true"
            assert await case.performed(events, http) == 1
            if name == "new_session":
                sessions = (await http.get("/v1/sessions")).json()["sessions"]
                assert [s["id"] for s in sessions] == [first.json()["id"]]


async def test_an_op_that_commits_nothing_is_recorded_after_it(tmp_path: Path) -> None:
    """A cancel with no turn writes nothing: its outcome is recorded after the op (running it
    again would change nothing durable) and replayed as before."""
    async for app in run_app(tmp_path / "home"):
        session = await _session(app.http, tmp_path)
        url = f"/v1/sessions/{session}/cancel"
        first = await app.http.post(url, json={"request_id": "cancel-1"})
        again = await app.http.post(url, json={"request_id": "cancel-1"})
        assert first.json() == again.json() == {"session": session, "cancelled": False}
        assert again.headers["idempotent-replayed"] == "true"
        kept = await app.services.store.read(partial(_kept, app.device_id, "cancel-1"))
        assert kept is not None and json.loads(kept.body_json) == first.json()
