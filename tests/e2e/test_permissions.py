"""Execution policy and permission parking through a real server (issue: permissions)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from tests.e2e.harness import C2Process, Client, EventReader


def activities(stream: EventReader, sid: str) -> list[dict[str, Any]]:
    return [
        e["activity"]
        for e in stream.events
        if e["event"] == "session_activity_changed" and e["session"] == sid
    ]


def said(stream: EventReader, sid: str) -> str:
    return "".join(
        e["text"] for e in stream.events if e["event"] == "agent_text" and e["session"] == sid
    )


async def test_policy_outcomes_through_the_real_agent(client: Client, workdir: Path) -> None:
    """One real turn per outcome of the policy table: allowed and denied asks are answered
    without a trace, an asked one parks until a client answers. Every one of the 27 cells is
    proven at the unit level (tests/unit/test_permission_decisions.py)."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        for mode, sandbox, kind, outcome in (
            ("yolo", "workspace_write", "edit", "allow"),
            ("accept_edits", "read_only", "edit", "reject"),
            ("ask", "workspace_write", "edit", "park"),
        ):
            resp = await client.http.put(
                f"/v1/sessions/{sid}/execution-policy",
                json={"mode": mode, "sandbox": sandbox, "request_id": f"{mode}-{sandbox}"},
            )
            assert resp.status_code == 200, resp.text
            changed = await stream.until_event("execution_policy_changed")
            assert changed["policy"] == {"mode": mode, "sandbox": sandbox}
            assert changed["request_id"] == f"{mode}-{sandbox}"
            before = len(stream.events)
            await client.prompt(sid, f"/permission {kind} Do {kind}")
            if outcome == "park":
                req = await stream.until_event("permission_request")
                assert req["options"] == [["allow", "Allow"], ["reject", "Reject"]]
                resp = await client.answer(sid, req["request_id"], "allow")
                assert resp.status_code == 200
            await stream.until_event("turn_ended")
            turn = stream.events[before:]
            text = "".join(e["text"] for e in turn if e["event"] == "agent_text")
            parked = any(e["event"] == "permission_request" for e in turn)
            assert parked == (outcome == "park"), (mode, sandbox, kind)
            assert text == ("allow" if outcome == "park" else outcome), (mode, sandbox, kind)


async def test_accept_edits_still_asks_for_execute(client: Client, workdir: Path) -> None:
    """accept_edits auto-allows edit/delete/move only; execute still parks."""
    sid = (
        await client.new_session(
            workdir, initial_policy={"mode": "accept_edits", "sandbox": "workspace_write"}
        )
    )["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/permission execute Run tests")
        req = await stream.until_event("permission_request")
        assert req["title"] == "Run tests"
        await client.answer(sid, req["request_id"], None)
        await stream.until_event("turn_ended")
    assert said(stream, sid) == "cancelled"


async def test_initial_policy_governs_the_first_turn(client: Client, workdir: Path) -> None:
    """ask + read_only from new_session auto-rejects an execute request on turn one."""
    sid = (
        await client.new_session(workdir, initial_policy={"mode": "ask", "sandbox": "read_only"})
    )["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/permission execute rm -rf build")
        await stream.until_event("turn_ended")
    assert "permission_request" not in stream.names()
    assert said(stream, sid) == "reject"
    assert [a["revision"] for a in activities(stream, sid)] == [1, 2]


async def test_two_pending_permissions_answered_out_of_order(client: Client, workdir: Path) -> None:
    """Two parked inputs: exact revisions running, awaiting×2, awaiting, running, idle."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/permissions 2 execute")
        first = await stream.until_event("permission_request")
        second = await stream.until_event("permission_request")
        snap = await client.snapshot(sid)
        pending = snap["activity"]["state"]["pending"]
        assert [p["input_id"] for p in pending] == [first["request_id"], second["request_id"]]
        assert pending[0]["sequence"] < pending[1]["sequence"]
        assert (await client.answer(sid, second["request_id"], "reject")).status_code == 200
        mid = await stream.until_event("session_activity_changed")
        assert mid["activity"]["state"]["kind"] == "awaiting_input"
        assert len(mid["activity"]["state"]["pending"]) == 1
        assert (await client.answer(sid, first["request_id"], "allow")).status_code == 200
        await stream.until_event("turn_ended")
    revisions = [(a["revision"], a["state"]["kind"]) for a in activities(stream, sid)]
    assert revisions == [
        (1, "running"),
        (2, "awaiting_input"),
        (3, "awaiting_input"),
        (4, "awaiting_input"),
        (5, "running"),
        (6, "idle"),
    ]
    assert said(stream, sid) == "allow\nreject\n"


async def test_invalid_answers_are_noops(client: Client, workdir: Path) -> None:
    """Wrong session, unknown id, bad option and duplicate answers: 409, no event, no revision."""
    sid = (await client.new_session(workdir))["id"]
    other = (await client.new_session(workdir))["id"]
    async with EventReader(client) as stream:
        await stream.frame()
        await client.prompt(sid, "/permission execute Deploy")
        req = await stream.until_event("permission_request", session=sid)
        input_id = req["request_id"]
        revision = (await client.snapshot(sid))["activity"]["revision"]
        count = len(stream.events)
        cases = [
            (other, input_id, "allow", "permission_not_pending"),
            (sid, "not-an-input", "allow", "permission_not_pending"),
            (sid, input_id, "maybe", "invalid_option"),
        ]
        for session, iid, option, code in cases:
            resp = await client.answer(session, iid, option)
            assert resp.status_code == 409 and resp.json()["code"] == code
        assert (await client.snapshot(sid))["activity"]["revision"] == revision
        assert (await client.answer(sid, input_id, "allow")).status_code == 200
        dup = await client.answer(sid, input_id, "reject")
        assert dup.status_code == 409 and dup.json()["code"] == "permission_not_pending"
        await stream.until_event("turn_ended", session=sid)
    errors = [e for e in stream.events[count:] if e["event"] == "error"]
    assert errors == []
    assert said(stream, sid) == "allow"
    # A session that does not exist is not a permission that stopped pending.
    unknown = await client.answer("00000000-0000-0000-0000-000000000000", input_id, "allow")
    assert unknown.status_code == 404 and unknown.json()["code"] == "no_such_session"


async def test_cancel_drains_parked_inputs_first(client: Client, workdir: Path) -> None:
    """cancel answers every parked input cancelled, returns to running, then ends the turn."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/permissions 2 execute\n/hang")
        await stream.until_event("permission_request")
        await stream.until_event("permission_request")
        resp = await client.http.post(f"/v1/sessions/{sid}/cancel")
        assert resp.json() == {"session": sid, "cancelled": True}
        ended = await stream.until_event("turn_ended")
    kinds = [(a["revision"], a["state"]["kind"]) for a in activities(stream, sid)]
    assert kinds == [
        (1, "running"),
        (2, "awaiting_input"),
        (3, "awaiting_input"),
        (4, "running"),
        (5, "idle"),
    ]
    assert ended["stop_reason"] == "cancelled"
    assert said(stream, sid) == "cancelled\ncancelled\n"


async def test_policy_change_affects_later_requests_only(client: Client, workdir: Path) -> None:
    """A parked request stays parked after yolo; the next request is auto-allowed."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/permission execute first\n/permission execute second")
        req = await stream.until_event("permission_request")
        resp = await client.http.put(f"/v1/sessions/{sid}/permission-mode", json={"mode": "yolo"})
        assert resp.status_code == 200
        legacy = await stream.until_event("execution_policy_changed")
        assert "request_id" not in legacy
        assert legacy["policy"] == {"mode": "yolo", "sandbox": "workspace_write"}
        assert (await client.snapshot(sid))["activity"]["state"]["kind"] == "awaiting_input"
        await client.answer(sid, req["request_id"], "reject")
        await stream.until_event("turn_ended")
    assert stream.names().count("permission_request") == 1
    assert said(stream, sid) == "rejectallow"


async def test_policy_of_unknown_session_is_a_correlated_error(client: Client) -> None:
    """set_execution_policy on a missing session: 404 and a non-terminal correlated error."""
    async with EventReader(client) as stream:
        await stream.frame()
        resp = await client.http.put(
            "/v1/sessions/nope/execution-policy",
            json={"mode": "yolo", "sandbox": "read_only", "request_id": "pol-x"},
        )
        assert resp.status_code == 404
        err = await stream.until_event("error")
    assert err["request_id"] == "pol-x" and err["terminal"] is False
    assert "execution_policy_changed" not in stream.names()


async def test_second_client_sees_parked_permission_in_welcome(
    client: Client, workdir: Path
) -> None:
    """A client connecting while a permission is parked sees it and can answer it."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as first:
        await first.frame()
        await client.prompt(sid, "/permission execute Ship it")
        await first.until_event("permission_request")
        second_client = Client(client.server)
        async with EventReader(second_client) as second:
            welcome = await second.frame()
            snap = next(s for s in welcome["sessions"] if s["id"] == sid)
            state = snap["activity"]["state"]
            assert state["kind"] == "awaiting_input"
            (pending,) = state["pending"]
            assert pending["title"] == "Ship it" and pending["kind"] == "permission"
            resp = await second_client.answer(sid, pending["input_id"], "allow")
            assert resp.status_code == 200
        await second_client.aclose()
        await first.until_event("turn_ended")
    assert said(first, sid) == "allow"


async def test_restart_drops_parked_permission(fresh_c2: C2Process, workdir: Path) -> None:
    """After a restart nothing is actionable: failed/interrupted, old input id is a no-op.
    Stopping, c2 answered the parked input cancelled on the record, as any end of a turn
    does (the audit row and the event that withdraws notifications), and the agent's reply to
    that answer came after the turn's end, so it is in neither the log nor the transcript."""
    client = Client(fresh_c2)
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/permission execute Deploy")
        req = await stream.until_event("permission_request")
        last = stream.ids[-1]
    await client.aclose()
    fresh_c2.stop()
    fresh_c2.start()
    client = Client(fresh_c2)
    async with EventReader(client, session=sid, after=last) as stream:
        await stream.until_event("error")
    after = [e["event"] for e in stream.events]
    assert after == ["permission_resolved", "session_activity_changed", "error"], after
    resolved = stream.events[0]
    assert resolved["request_id"] == req["request_id"]
    assert resolved["option_id"] is None and resolved["answered_by"] is None
    page = (await client.http.get(f"/v1/sessions/{sid}/transcript")).json()
    assert [e["part"]["kind"] for e in page["entries"]] == ["prompt", "permission"]
    snap = await client.snapshot(sid)
    assert snap["activity"]["state"]["kind"] == "failed"
    assert snap["activity"]["state"]["reason"] == "interrupted"
    assert "pending" not in snap["activity"]["state"]
    resp = await client.answer(sid, req["request_id"], "allow")
    assert resp.status_code == 409
    resp = await client.http.put(
        f"/v1/sessions/{sid}/execution-policy", json={"mode": "yolo", "sandbox": "read_only"}
    )
    assert resp.status_code == 200 and resp.json()["policy"]["mode"] == "yolo"
    await client.aclose()


async def test_a_killed_server_closes_its_parked_permissions_on_restart(
    fresh_c2: C2Process, workdir: Path
) -> None:
    """kill -9 with two permissions parked: the restart answers each on the record (cancelled,
    by c2), before the turn's interrupted activity, as a graceful stop does, so a client, a
    push notification or a webhook tracking requests sees them closed."""
    client = Client(fresh_c2)
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/permissions 2 execute")
        asked = [await stream.until_event("permission_request") for _ in range(2)]
        last = stream.ids[-1]
    await client.aclose()
    fresh_c2.stop(sig=signal.SIGKILL)
    fresh_c2.start()
    client = Client(fresh_c2)
    async with EventReader(client, session=sid, after=last) as stream:
        await stream.until_event("error")
    after = [e["event"] for e in stream.events]
    assert after[-2:] == ["session_activity_changed", "error"], after
    resolved = [e for e in stream.events if e["event"] == "permission_resolved"]
    assert sorted(e["request_id"] for e in resolved) == sorted(a["request_id"] for a in asked)
    assert all(e["option_id"] is None and e["answered_by"] is None for e in resolved)
    page = (await client.http.get(f"/v1/sessions/{sid}/transcript")).json()
    assert [e["part"]["kind"] for e in page["entries"]] == ["prompt", "permission", "permission"]
    await client.aclose()


async def test_a_stricter_policy_restarts_an_agent_holding_an_always_grant(
    client: Client, workdir: Path
) -> None:
    """An "always allow" answer leaves a standing grant inside the agent; after a stricter
    policy the next turn runs on a new agent process (with the warning that it starts afresh,
    as this agent cannot load the session), so the grant does not outlive the policy."""
    sid = (await client.new_session(workdir, provider={"custom": "scripted_always"}))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/pid\n/permission execute Deploy")).status_code == 202
        before = int((await stream.until_event("agent_text"))["text"].split("=")[1])
        req = await stream.until_event("permission_request")
        assert [oid for oid, _label in req["options"]] == ["allow", "always", "reject"]
        assert (await client.answer(sid, req["request_id"], "always")).status_code == 200
        await stream.until_event("turn_ended")
        stricter = {"mode": "ask", "sandbox": "read_only"}
        policy = await client.http.put(f"/v1/sessions/{sid}/execution-policy", json=stricter)
        assert policy.status_code == 200, policy.text
        assert (await client.prompt(sid, "/pid", request_id="after")).status_code == 202
        warning = await stream.until_event("error")
        after = await stream.until_event("agent_text")
        await stream.until_event("turn_ended")
    assert warning["terminal"] is False and warning["request_id"] == "after"
    assert "became stricter" in warning["message"]
    assert int(after["text"].split("=")[1]) != before
