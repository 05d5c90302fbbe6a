"""The usage ledger and budgets through a real server and the scripted agent, on SQLite and on
PostgreSQL (the latter skipped without C2_TEST_DATABASE_URL): sums, listings and every
budget action (issue 15, part 2)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Client, EventReader


async def _turn(client: Client, sid: str, script: str) -> list[dict[str, Any]]:
    """Run one turn to its end; the session's events from turn_started to turn_ended."""
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        resp = await client.prompt(sid, script)
        assert resp.status_code == 202, resp.text
        await stream.until_event("turn_ended")
    start = max(i for i, e in enumerate(stream.events) if e["event"] == "turn_started")
    return stream.events[start:]


async def _usage(client: Client, **params: str) -> dict[str, Any]:
    resp = await client.http.get("/v1/usage", params=params)
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    assert data["kind"] == "usage"
    return data


async def _budget(client: Client, sid: str, **body: Any) -> dict[str, Any]:
    resp = await client.http.put(f"/v1/sessions/{sid}/budget", json=body)
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    return data


def _ended(events: list[dict[str, Any]]) -> str:
    return str(next(e for e in events if e["event"] == "turn_ended")["stop_reason"])


def _crossings(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "budget_exceeded"]


async def test_usage_sums_per_session_provider_and_day(store_client: Client, workdir: Path) -> None:
    """Each turn's tokens and cost (the increase of the cumulative cost) are summed per
    session, provider and UTC day; a session's listing shows its turns; since filters."""
    client = store_client
    start = datetime.now(UTC).isoformat()  # other tests' turns ended before this one started
    a = (await client.new_session(workdir))["id"]
    b = (await client.new_session(workdir))["id"]
    await _turn(client, a, "/spend 100 20 0.25 USD")
    await _turn(client, a, "/spend 30 5 0.5 USD\n/spend 20 0 -")
    await _turn(client, b, "/spend 10 1 -")

    by_session = await _usage(client, group_by="session", since=start)
    assert by_session["group_by"] == "session"
    assert len(by_session["groups"]) == 2
    groups = {g["key"]: g for g in by_session["groups"]}
    assert groups[a] == {
        "key": a,
        "input_tokens": 150,
        "output_tokens": 25,
        "total_tokens": 175,
        "cost": {"amount": pytest.approx(0.75), "currency": "USD"},
    }
    assert groups[b] == {
        "key": b,
        "input_tokens": 10,
        "output_tokens": 1,
        "total_tokens": 11,
        "cost": None,
    }

    by_provider = (await _usage(client, group_by="provider", since=start))["groups"]
    assert by_provider == [
        {
            "key": {"custom": "scripted"},
            "input_tokens": 160,
            "output_tokens": 26,
            "total_tokens": 186,
            "cost": {"amount": pytest.approx(0.75), "currency": "USD"},
        }
    ]
    by_day = (await _usage(client, group_by="day", since=start))["groups"]
    assert [g["key"] for g in by_day] == [datetime.now(UTC).strftime("%Y-%m-%d")]
    assert by_day[0]["total_tokens"] == 186

    turns = (await _usage(client, session=a))["groups"]
    assert [t["total_tokens"] for t in turns] == [120, 55]
    assert [t["cost"]["amount"] for t in turns] == [pytest.approx(0.25), pytest.approx(0.5)]
    assert turns[1]["context_window"] == {"used_tokens": 55, "context_window": 200_000}
    assert turns[0]["provider"] == {"custom": "scripted"}
    later = (await _usage(client, session=a, since=turns[1]["ended_at"]))["groups"]
    assert [t["key"] for t in later] == [turns[1]["key"]]
    future = (await _usage(client, group_by="session", since="2999-01-01T00:00:00Z"))["groups"]
    assert future == []


async def test_usage_rejects_bad_queries(store_client: Client) -> None:
    """No group_by and no session, a since without offset: 422; an unknown session: 404."""
    client = store_client
    resp = await client.http.get("/v1/usage")
    assert resp.status_code == 422 and resp.json()["code"] == "invalid_usage_query"
    resp = await client.http.get("/v1/usage", params={"group_by": "day", "since": "2026-01-01"})
    assert resp.status_code == 422 and resp.json()["code"] == "invalid_usage_query"
    resp = await client.http.get("/v1/usage", params={"group_by": "week"})
    assert resp.status_code == 422
    resp = await client.http.get("/v1/usage", params={"session": "nope"})
    assert resp.status_code == 404 and resp.json()["code"] == "no_such_session"
    body = {"max_cost": 1, "action": "warn"}
    resp = await client.http.put("/v1/devices/nope/budget", json=body)
    assert resp.status_code == 404 and resp.json()["code"] == "no_such_device"
    resp = await client.http.put("/v1/sessions/nope/budget", json=body)
    assert resp.status_code == 404
    resp = await client.http.put("/v1/sessions/nope/budget", json={"action": "explode"})
    assert resp.status_code == 422


async def test_budget_warn_emits_budget_exceeded_once(store_client: Client, workdir: Path) -> None:
    """A `warn` budget announces its crossing once (mid-turn, on cost) and refuses nothing."""
    client = store_client
    sid = (await client.new_session(workdir))["id"]
    budget = await _budget(client, sid, max_cost=0.3, action="warn")
    assert budget["used"] == {"cost": 0.0, "tokens": 0}
    first = await _turn(client, sid, "/spend 10 0 0.5 USD")
    assert _crossings(first) == [
        {
            "event": "budget_exceeded",
            "session": sid,
            "action": "warn",
            "limit": {"max_cost": 0.3, "max_tokens": None},
            "used": {"cost": pytest.approx(0.5), "tokens": 0},
        }
    ]
    assert _ended(first) == "end_turn"
    second = await _turn(client, sid, "/spend 10 0 0.1 USD")
    assert _crossings(second) == []
    assert _ended(second) == "end_turn"


async def test_budget_refuse_new_turns_refuses_prompts_with_figures(
    store_client: Client, workdir: Path
) -> None:
    """Over a `refuse_new_turns` token budget the next prompt is a 409 `budget_exceeded`
    carrying limit and used; raising the budget lets prompts in again."""
    client = store_client
    sid = (await client.new_session(workdir))["id"]
    await _budget(client, sid, max_tokens=100, action="refuse_new_turns")
    events = await _turn(client, sid, "/spend 80 30 -")
    assert _ended(events) == "end_turn"  # the turn that crossed it is not cut
    assert [c["used"] for c in _crossings(events)] == [{"cost": 0.0, "tokens": 110}]
    resp = await client.prompt(sid, "/text more")
    assert resp.status_code == 409
    problem = resp.json()
    assert problem["code"] == "budget_exceeded"
    assert problem["limit"] == {"max_cost": None, "max_tokens": 100}
    assert problem["used"] == {"cost": 0.0, "tokens": 110}
    assert problem["session"] == sid
    await _budget(client, sid, max_tokens=1000, action="refuse_new_turns")
    assert _ended(await _turn(client, sid, "/text more")) == "end_turn"


async def test_budget_cancel_running_cancels_on_cost_mid_turn(
    store_client: Client, workdir: Path
) -> None:
    """A `cancel_running` cost budget crossed mid-turn ends that turn `cancelled`, and the
    session takes no new turn while over it."""
    client = store_client
    sid = (await client.new_session(workdir))["id"]
    await _budget(client, sid, max_cost=1.0, action="cancel_running")
    events = await _turn(client, sid, "/spend 10 0 2.5 USD\n/hang")
    assert [c["action"] for c in _crossings(events)] == ["cancel_running"]
    assert _ended(events) == "cancelled"
    resp = await client.prompt(sid, "/text more")
    assert resp.status_code == 409 and resp.json()["code"] == "budget_exceeded"


async def test_budget_cancel_running_on_tokens_at_turn_end(
    store_client: Client, workdir: Path
) -> None:
    """A token budget crossed by the usage of the prompt response (the turn's end) still ends
    that turn `cancelled`."""
    client = store_client
    sid = (await client.new_session(workdir))["id"]
    await _budget(client, sid, max_tokens=50, action="cancel_running")
    events = await _turn(client, sid, "/spend 40 20 -")
    assert [c["used"]["tokens"] for c in _crossings(events)] == [60]
    assert _ended(events) == "cancelled"


async def test_device_budget_is_copied_onto_sessions_it_creates(
    store_client: Client, workdir: Path
) -> None:
    """A device's default budget applies to the sessions that device creates afterwards."""
    client = store_client
    earlier = (await client.new_session(workdir))["id"]
    devices = (await client.http.get("/v1/devices")).json()
    device = devices[0]["id"]
    body = {"max_tokens": 5, "action": "refuse_new_turns"}
    resp = await client.http.put(f"/v1/devices/{device}/budget", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"device": device, "max_cost": None, **body}
    try:
        sid = (await client.new_session(workdir))["id"]
    finally:  # the module's other tests create sessions with this device: no limits for them
        resp = await client.http.put(f"/v1/devices/{device}/budget", json={"action": "warn"})
        assert resp.status_code == 200
    await _turn(client, sid, "/spend 10 0 -")
    resp = await client.prompt(sid, "/text more")
    assert resp.status_code == 409 and resp.json()["limit"]["max_tokens"] == 5
    await _turn(client, earlier, "/spend 10 0 -")  # created before the default: no budget
    assert _ended(await _turn(client, earlier, "/text more")) == "end_turn"
