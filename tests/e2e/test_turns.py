"""Prompt turns over ACP through a real server and the scripted agent (issue: agent sessions)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import anyio

from tests.e2e.harness import C2Process, Client, EventReader, poll_until


def session_events(stream: EventReader, session: str) -> list[dict[str, Any]]:
    return [e for e in stream.events if e.get("session") == session]


async def test_prompt_emits_events_in_protocol_order(client: Client, workdir: Path) -> None:
    """An accepted prompt: running → title → turn_started → stream → idle → turn_ended."""
    snap = await client.new_session(workdir, request_id="create-1")
    sid = snap["id"]
    async with EventReader(client) as stream:
        welcome = await stream.frame()
        assert welcome["kind"] == "sessions"
        assert any(s["id"] == sid for s in welcome["sessions"])
        resp = await client.prompt(sid, "Hello there, echo agent.", request_id="p-1")
        assert resp.status_code == 202, resp.text
        body = resp.json()
        assert body["request_id"] == "p-1" and body["transcript_seq"] == 0
        await stream.until_event("turn_ended", session=sid)
    events = session_events(stream, sid)
    names = [e["event"] for e in events]
    assert names[:3] == ["session_activity_changed", "session_title_changed", "turn_started"]
    assert events[0]["activity"]["revision"] == 1
    assert events[0]["activity"]["state"]["kind"] == "running"
    assert events[0]["activity"]["state"]["prompt_request_id"] == "p-1"
    assert events[1]["title"] == "Hello there, echo agent"
    assert events[2] == {
        "event": "turn_started",
        "session": sid,
        "request_id": "p-1",
        "transcript_seq": 0,
        "turn": 1,
    }
    assert names[-2:] == ["session_activity_changed", "turn_ended"]
    assert events[-2]["activity"] == {"revision": 2, "state": {"kind": "idle"}}
    assert events[-1]["stop_reason"] == "end_turn"
    middle = set(names[3:-2])
    assert {"agent_text", "agent_thought", "plan", "tool_call", "usage", "context_window"} <= middle
    texts = [e for e in events if e["event"] == "agent_text"]
    assert "".join(e["text"] for e in texts) == "Hello there, echo agent."
    assert len({e["message_id"] for e in texts}) == 1
    seqs = [e["transcript_seq"] for e in events if "transcript_seq" in e]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert stream.ids == sorted(stream.ids)


async def test_turn_two_clients_see_identical_sequences(client: Client, workdir: Path) -> None:
    """Two concurrent streams receive the same events with the same ids in the same order."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client) as a, EventReader(client) as b:
        await a.frame()
        await b.frame()
        assert (await client.prompt(sid, "/chunks 50")).status_code == 202
        await a.until_event("turn_ended", session=sid)
        await b.until_event("turn_ended", session=sid)
    assert a.ids == b.ids
    assert a.events == b.events


async def test_prompt_while_running_is_rejected_without_touching_the_turn(
    client: Client, workdir: Path
) -> None:
    """A second prompt gets 409 and a correlated non-terminal error; the turn keeps running."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/hang", request_id="first")).status_code == 202
        await stream.until_event("turn_started")
        resp = await client.prompt(sid, "again", request_id="second")
        assert resp.status_code == 409
        assert resp.json()["code"] == "turn_already_running"
        err = await stream.until_event("error")
        assert err["request_id"] == "second" and err["terminal"] is False
        assert (await client.snapshot(sid))["activity"]["state"]["kind"] == "running"
        cancel = await client.http.post(f"/v1/sessions/{sid}/cancel")
        assert cancel.status_code == 202 and cancel.json()["cancelled"] is True
        ended = await stream.until_event("turn_ended")
        assert ended["stop_reason"] == "cancelled"
    assert stream.names().count("turn_started") == 1


async def test_provider_error_fails_the_turn_with_a_terminal_error(
    client: Client, workdir: Path
) -> None:
    """A failing session/prompt: failed/provider_error activity, then a terminal error."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/fail kaboom", request_id="p-fail")
        err = await stream.until_event("error")
    activity = [e for e in stream.events if e["event"] == "session_activity_changed"][-1]
    assert activity["activity"]["state"]["kind"] == "failed"
    assert activity["activity"]["state"]["reason"] == "provider_error"
    assert "kaboom" in err["message"] and err["terminal"] is True
    assert err["request_id"] == "p-fail"
    assert "turn_ended" not in stream.names()


async def test_agent_crash_mid_turn_ends_the_turn_quickly(client: Client, workdir: Path) -> None:
    """An agent that dies mid-turn ends the turn with a terminal error within a second."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/crash")
        await stream.until_event("agent_text")
        started = time.monotonic()
        err = await stream.until_event("error", timeout=5)
        assert time.monotonic() - started < 1.5
    assert err["terminal"] is True
    # The next prompt revives the agent.
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "back again")).status_code == 202
        assert (await stream.until_event("turn_ended"))["stop_reason"] == "end_turn"


def count_loads(client: Client) -> int:
    return sum(m.get("method") == "session/load" for m in client.server.agent_log_lines())


async def pid_turn(client: Client, stream: EventReader, sid: str, rid: str) -> int:
    """Run a `/pid` turn; the agent process's pid."""
    resp = await client.prompt(sid, "/pid", request_id=rid)
    assert resp.status_code == 202, resp.text
    said = await stream.until_event("agent_text")
    await stream.until_event("turn_ended")
    return int(said["text"].split("=")[1])


async def test_an_agent_failing_its_turns_is_restarted_for_the_next(
    client: Client, workdir: Path
) -> None:
    """An agent whose process lives on but fails every prompt (Claude Code's adapter once its
    `claude` child died) runs the next turn as a fresh process, which restores the session
    (session/load): one failure suffices, and no restart is announced (this agent keeps no
    saved sessions, so only its failed restore is)."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        before = await pid_turn(client, stream, sid, "wedged-1")
        loads = count_loads(client)
        await client.prompt(sid, "/wedge Session did not end in result", request_id="wedged-2")
        failed = await stream.until_event("error", request_id="wedged-2")
        after = await pid_turn(client, stream, sid, "wedged-3")
    assert failed["terminal"] is True and "did not end in result" in failed["message"]
    assert after != before
    errors = [e for e in stream.events if e["event"] == "error"]
    assert [e for e in errors if e["terminal"]] == [failed]
    assert not any("kept failing" in e["message"] for e in errors)  # restored: nothing lost
    assert count_loads(client) == loads + 1  # the fresh agent restored the session


async def test_an_agent_without_load_is_restarted_after_two_failures_in_a_row(
    client: Client, workdir: Path
) -> None:
    """An agent that cannot restore a session loses its context in a restart: one failed turn
    keeps it, a second in a row restarts it, saying the context is lost."""
    sid = (await client.new_session(workdir, provider={"custom": "scripted_noload"}))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        first = await pid_turn(client, stream, sid, "noload-1")
        await client.prompt(sid, "/fail once", request_id="noload-2")
        await stream.until_event("error", request_id="noload-2")
        # A turn done resets the count.
        assert await pid_turn(client, stream, sid, "noload-3") == first
        await client.prompt(sid, "/wedge stuck", request_id="noload-4")
        await stream.until_event("error", request_id="noload-4")
        await client.prompt(sid, "again", request_id="noload-5")
        await stream.until_event("error", request_id="noload-5")
        await client.prompt(sid, "/pid", request_id="noload-6")
        notice = await stream.until_event("error", request_id="noload-6")
        said = await stream.until_event("agent_text")
        await stream.until_event("turn_ended")
    assert notice["terminal"] is False
    assert notice["message"].startswith("the agent kept failing its turns, so it was restarted")
    assert "fresh memory" in notice["message"]
    assert int(said["text"].split("=")[1]) != first


async def test_new_session_rejects_unknown_provider_and_bad_cwd(
    client: Client, workdir: Path
) -> None:
    """Unknown provider → 422 + correlated terminal error; a missing cwd names the path."""
    async with EventReader(client) as stream:
        await stream.frame()
        resp = await client.http.post(
            "/v1/sessions",
            json={
                "provider": {"custom": "nope"},
                "cwd": str(workdir),
                "use_worktree": False,
                "request_id": "bad-provider",
            },
        )
        assert resp.status_code == 422 and resp.json()["code"] == "unknown_provider"
        err = await stream.until_event("error")
        assert err["session"] is None and err["terminal"] is True
        assert err["request_id"] == "bad-provider"
        missing = workdir / "missing"
        resp = await client.http.post(
            "/v1/sessions",
            json={"provider": {"custom": "scripted"}, "cwd": str(missing), "use_worktree": False},
        )
        assert resp.status_code == 422 and resp.json()["code"] == "invalid_cwd"
        assert str(missing) in resp.json()["detail"]
    listed = (await client.http.get("/v1/sessions")).json()["sessions"]
    assert all(s["cwd"] != str(missing) for s in listed)


async def test_new_session_broadcasts_session_created_with_request_id(
    client: Client, workdir: Path
) -> None:
    """The 201 receipt is broadcast as session_created echoing the request id."""
    async with EventReader(client) as stream:
        await stream.frame()
        snap = await client.new_session(
            workdir, request_id="mine", initial_policy={"mode": "yolo", "sandbox": "read_only"}
        )
        created = await stream.until_event("session_created", session=snap["id"])
    assert created["request_id"] == "mine"
    assert created["cwd"] == str(workdir.resolve())
    assert snap["policy"] == {"mode": "yolo", "sandbox": "read_only"}
    assert snap["activity"] == {"revision": 0, "state": {"kind": "idle"}}
    assert snap["project_path"] == str(workdir.resolve()) and snap["worktree_path"] is None


async def test_set_model_and_config_option_round_trip(client: Client, workdir: Path) -> None:
    """set_model and set_config_option work before the first prompt and broadcast the state."""
    created = await client.new_session(workdir)
    sid = created["id"]
    assert created["model"] == "echo-fast" and created["models"]["current"] == "echo-fast"
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        resp = await client.http.put(
            f"/v1/sessions/{sid}/config-options/verbosity", json={"value": "terse"}
        )
        assert resp.status_code == 200, resp.text  # the ACP session exists from creation
        assert {o["id"]: o["current"] for o in resp.json()["options"]}["verbosity"] == "terse"
        await stream.until_event("config_options")
        resp = await client.http.put(f"/v1/sessions/{sid}/model", json={"model": "echo-smart"})
        assert resp.status_code == 200 and resp.json()["current"] == "echo-smart"
        assert (await stream.until_event("models"))["current"] == "echo-smart"
        await client.prompt(sid, "/model")
        await stream.until_event("turn_ended")
        said = "".join(e.get("text", "") for e in stream.events if e["event"] == "agent_text")
    assert said == "model=echo-smart"  # the agent really uses it
    snap = await client.snapshot(sid)
    assert snap["model"] == "echo-smart"
    assert {o["id"]: o["current"] for o in snap["config_options"]}["verbosity"] == "terse"
    unknown = await client.http.put(
        "/v1/sessions/00000000-0000-0000-0000-000000000000/config-options/verbosity",
        json={"value": "terse"},
    )
    assert unknown.status_code == 404 and unknown.json()["code"] == "no_such_session"


async def test_prompt_survives_client_disconnect(client: Client, workdir: Path) -> None:
    """A POST whose client vanished after sending still runs to turn_ended."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        body = b'{"doc":[{"type":"text","text":"/sleep 300\\n/text done"}]}'
        head = (
            f"POST /v1/sessions/{sid}/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {client.server.bearer}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", client.server.port)) as sock:
            sock.sendall(head + body)
            await anyio.sleep(0.05)
        ended = await stream.until_event("turn_ended")
    assert ended["stop_reason"] == "end_turn"
    assert "done" in "".join(e.get("text", "") for e in stream.events)


async def test_delete_session_ends_agent_and_hides_it(client: Client, workdir: Path) -> None:
    """DELETE archives the session, kills its agent, keeps its transcript readable."""
    sid = (await client.new_session(workdir, provider={"custom": "scripted_child"}))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/hang")
        await stream.until_event("turn_started")
    pids = [e for e in client.server.agent_log_lines() if e.get("event") == "child"]
    agent_pid, child_pid = pids[-1]["agent_pid"], pids[-1]["pid"]
    assert (await client.http.delete(f"/v1/sessions/{sid}")).status_code == 204
    await wait_gone(agent_pid, child_pid)
    listed = (await client.http.get("/v1/sessions")).json()["sessions"]
    assert sid not in {s["id"] for s in listed}
    page = await client.http.get(f"/v1/sessions/{sid}/transcript")
    assert page.status_code == 200 and page.json()["entries"][0]["part"]["kind"] == "prompt"


async def wait_gone(*pids: int, timeout: float = 10.0) -> None:
    await poll_until(lambda: not any(alive(pid) for pid in pids), timeout)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it no longer runs.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped between kill(0) and the read
        return False


async def test_a_session_deleted_mid_stream_gets_nothing_after_its_turn_ended(
    client: Client, workdir: Path
) -> None:
    """Deleting a session whose agent streams ends its turn failed/interrupted with the
    terminal error, then `session_deleted`; what the agent still says until it is stopped
    reaches neither the stream nor the transcript (it used to come after both)."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/pid\n/stamped 3000 300")).status_code == 202
        pid = int((await stream.until_event("agent_text", session=sid))["text"].split("=")[1])
        for _ in range(20):  # well into the stream
            await stream.until_event("agent_text", session=sid)
        assert (await client.http.delete(f"/v1/sessions/{sid}")).status_code == 204
        await stream.until_event("session_deleted", session=sid)
        await wait_gone(pid)
        # Anything the agent said before it died is in the log before this barrier.
        barrier = (await client.new_session(workdir))["id"]
        await stream.until_event("session_created", session=barrier)
    mine = [e for e in stream.events if e.get("session") == sid]
    end = next(n for n, e in enumerate(mine) if e["event"] == "error")
    assert mine[end]["terminal"] is True
    assert mine[end]["message"] == "the session was deleted before the turn finished"
    assert mine[end - 1]["activity"]["state"]["reason"] == "interrupted"
    assert [e["event"] for e in mine[end + 1 :]] == ["session_deleted"]
    said_seqs = [e["transcript_seq"] for e in mine if e["event"] == "agent_text"]
    page = (await client.http.get(f"/v1/sessions/{sid}/transcript")).json()
    last = page["entries"][-1]
    assert last.get("last_seq", last["seq"]) == said_seqs[-1]


async def test_a_session_stream_resumes_past_the_sessions_deletion(
    client: Client, workdir: Path
) -> None:
    """A `?session=` stream that dropped before the session was deleted resumes from its
    position and replays what followed, `session_deleted` included; only a stream without a
    position (or for a session that never was) is 404."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "/text hello")).status_code == 202
        await stream.until_event("turn_ended")
        position = stream.ids[-1]
    assert (await client.http.delete(f"/v1/sessions/{sid}")).status_code == 204
    async with EventReader(client, session=sid, after=position) as resumed:
        await resumed.until_event("session_deleted")
    assert resumed.names() == ["session_deleted"]
    fresh = await client.http.get("/v1/events", params={"session": sid})
    assert fresh.status_code == 404 and fresh.json()["code"] == "no_such_session"
    never = await client.http.get(
        "/v1/events", params={"session": "no-such-session", "after": position}
    )
    assert never.status_code == 404 and never.json()["code"] == "no_such_session"


async def test_restart_mid_turn_reports_interrupted(fresh_c2: C2Process, workdir: Path) -> None:
    """A server killed mid-turn comes back with failed/interrupted, never a stale running."""
    client = Client(fresh_c2)
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/hang", request_id="hang-1")
        await stream.until_event("turn_started")
        # The ACP session id is durable once the agent has the prompt.
        await poll_until(
            lambda: any(e.get("method") == "session/prompt" for e in fresh_c2.agent_log_lines())
        )
        last = stream.ids[-1]
    await client.aclose()
    fresh_c2.stop(sig=9)  # no graceful shutdown: start-up recovery must fix the state
    fresh_c2.start()
    client = Client(fresh_c2)
    snap = await client.snapshot(sid)
    state = snap["activity"]["state"]
    assert state["kind"] == "failed" and state["reason"] == "interrupted"
    assert state["message"] == "C2 stopped before the turn finished"
    async with EventReader(client, after=last) as stream:
        event = await stream.until_event("session_activity_changed", session=sid)
        # The turn's end as clients clear a running turn on it: its terminal error.
        error = await stream.until_event("error", session=sid)
    assert event["activity"]["state"]["reason"] == "interrupted"
    assert error["terminal"] is True and error["request_id"] == "hang-1"
    assert error["message"] == "C2 stopped before the turn finished"
    listed = (await client.http.get("/v1/sessions")).json()["sessions"]
    assert all(s["activity"]["state"]["kind"] not in ("running", "awaiting_input") for s in listed)
    # The session is revived on its next prompt, restoring the agent session via session/load.
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "after restart", request_id="again")).status_code == 202
        await stream.until_event("turn_ended")
    methods = [e["method"] for e in fresh_c2.agent_log_lines() if "method" in e]
    assert "session/load" in methods
    # The scripted agent forgot its sessions with its process: the load fails, c2 says so.
    (warning,) = [e for e in stream.events if e["event"] == "error"]
    assert "fresh memory" in warning["message"] and warning["terminal"] is False
    assert warning["request_id"] == "again"
    await client.aclose()


async def test_shutdown_leaves_no_agent_process(fresh_c2: C2Process, workdir: Path) -> None:
    """Stopping the server ends every agent process group (agents and their children)."""
    client = Client(fresh_c2)
    sid = (await client.new_session(workdir, provider={"custom": "scripted_child"}))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/hang")
        await stream.until_event("turn_started")
    await client.aclose()
    child = [e for e in fresh_c2.agent_log_lines() if e.get("event") == "child"][-1]
    assert alive(child["agent_pid"]) and alive(child["pid"])
    fresh_c2.stop()
    await wait_gone(child["agent_pid"], child["pid"], timeout=5)
    fresh_c2.start()
    snap = await Client(fresh_c2).snapshot(sid)
    assert snap["activity"]["state"]["kind"] == "failed"


async def test_agent_launch_tool_call_keeps_only_allowlisted_input(
    client: Client, workdir: Path
) -> None:
    """An agent-launch tool call carries bounded agent_input; arbitrary payload is dropped."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/agent-tool task-1\n/tool task-1 none completed")
        await stream.until_event("turn_ended")
    calls = [e for e in stream.events if e["event"] == "tool_call"]
    assert calls[0]["agent_input"] == {
        "subagent_type": "explorer",
        "description": "Explore the repository",
        "prompt": "Map the modules under core/",
    }
    assert calls[1]["status"] == "completed" and "agent_input" not in calls[1]
    assert calls[1]["title"] == "Task" and calls[1]["kind"] == "other"
    # The page projection folds the in-flight row into the terminal one, keeping metadata.
    page = (await client.http.get(f"/v1/sessions/{sid}/transcript")).json()
    tools = [e["part"] for e in page["entries"] if e["part"]["kind"] == "tool_call"]
    assert len(tools) == 1 and tools[0]["status"] == "completed"
    assert tools[0]["agent_input"]["subagent_type"] == "explorer"


async def test_line_over_one_mebibyte_reaches_clients_intact(client: Client, workdir: Path) -> None:
    """A 2 MiB agent chunk is committed and streamed whole."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/bigline 2097152")
        text = await stream.until_event("agent_text", timeout=30)
        await stream.until_event("turn_ended")
    assert text["text"] == "x" * 2_097_152


async def test_agent_ignoring_cancel_is_ended_by_delete(client: Client, workdir: Path) -> None:
    """A turn whose agent ignores cancel keeps running; deleting the session ends it."""
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        # The agent speaks once it holds the prompt: a cancel before that never reaches it.
        await client.prompt(sid, "/text busy\n/ignore-cancel")
        await stream.until_event("agent_text")
        resp = await client.http.post(f"/v1/sessions/{sid}/cancel")
        assert resp.json()["cancelled"] is True
        await anyio.sleep(0.5)
        assert (await client.snapshot(sid))["activity"]["state"]["kind"] == "running"
        assert (await client.http.delete(f"/v1/sessions/{sid}")).status_code == 204
        err = await stream.until_event("error")
    assert err["terminal"] is True
    assert (await client.http.get(f"/v1/sessions/{sid}")).status_code == 404  # deleted


async def test_revival_without_load_support_starts_fresh_silently(
    fresh_c2: C2Process, workdir: Path
) -> None:
    """An agent without loadSession is revived with session/new and no warning."""
    client = Client(fresh_c2)
    sid = (await client.new_session(workdir, provider={"custom": "scripted_noload"}))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "first")
        await stream.until_event("turn_ended")
    await client.aclose()
    fresh_c2.stop()
    fresh_c2.start()
    client = Client(fresh_c2)
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "second")
        await stream.until_event("turn_ended")
    await client.aclose()
    methods = [e["method"] for e in fresh_c2.agent_log_lines() if "method" in e]
    assert "session/load" not in methods and methods.count("session/new") == 2
    assert "error" not in stream.names()
