"""Claude Code (claude-code-acp) doing real work through a real c2 server (issue 10).

One server for the module; each test has its own session and project folder. The fake model
decides what Claude Code does (prompt markers, tests/fakemodel/script.py); Claude Code's own
tools really run, so "the tool ran" means a file on disk.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import Client, EventReader
from tests.realagents.session import AgentSession

AGENT = "claude_code"


async def open_session(
    client: Client, stream: EventReader, workdir: Path, **fields: object
) -> AgentSession:
    return await AgentSession.create(client, stream, AGENT, workdir, **fields)


async def test_claude_code_write_is_parked_answered_and_runs(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """Default policy: Write parks, allow-once runs it, the turn ends and the page shows it."""
    session = await open_session(client, stream, workdir)
    target = workdir / "hello.txt"
    await session.prompt(f"Please write it. [[write:{target}:hello world]]")
    request = await session.until("permission_request")
    assert request["title"] == f"Write {target}"
    assert not target.exists()
    snap = await client.snapshot(session.id)
    assert snap["activity"]["state"]["kind"] == "awaiting_input"
    await session.answer(request, "allow")
    ended = await session.turn_end()
    assert ended["event"] == "turn_ended" and ended["stop_reason"] == "end_turn"
    assert target.read_text() == "hello world"
    events = session.events()
    texts = [e["text"] for e in events if e["event"] == "agent_text"]
    assert texts and all(texts), "empty chunks are neither stored nor emitted"
    assert "".join(texts).endswith("Hello from the fake model.")
    calls = [e for e in events if e["event"] == "tool_call"]
    assert {c["kind"] for c in calls} == {"edit"}
    assert calls[-1]["status"] == "completed"
    diffs = [i for c in calls for i in c.get("content", []) if i["type"] == "diff"]
    assert diffs and diffs[0]["path"] == str(target) and diffs[0]["new_text"] == "hello world"
    page = await session.transcript()
    parts = [entry["part"] for entry in page["entries"]]
    kinds = [p["kind"] for p in parts if p["kind"] != "text"]
    assert kinds == ["prompt", "permission", "tool_call"]  # the answer is on the record
    answer = next(p for p in parts if p["kind"] == "permission")
    assert answer["option_id"].startswith("allow") and answer["answered_by"] is not None
    tool = next(p for p in parts if p["kind"] == "tool_call")
    assert tool["status"] == "completed" and tool["tool_kind"] == "edit"
    assert any(i["type"] == "diff" for i in tool["content"])
    await session.delete()
    await session.wait_no_process()


async def test_claude_code_reject_keeps_the_tool_from_running(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """A rejected Bash call never runs; the refusal reason is kept on the tool call."""
    session = await open_session(client, stream, workdir)
    marker = workdir / "ran.txt"
    await session.prompt(f"Run it. [[bash:touch {marker}]]")
    request = await session.until("permission_request")
    await session.answer(request, "reject")
    await session.turn_end()
    assert not marker.exists()
    calls = [e for e in session.events() if e["event"] == "tool_call"]
    assert calls[-1]["status"] == "failed" and calls[-1]["kind"] == "execute"
    reasons = [i.get("text", "") for c in calls for i in c.get("content", [])]
    assert any("refused" in r.lower() for r in reasons), reasons
    await session.delete()


async def test_claude_code_cancel_with_a_parked_permission_ends_cancelled(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """Cancel while a permission is parked: the input is drained, the turn reads cancelled."""
    session = await open_session(client, stream, workdir)
    target = workdir / "never.txt"
    await session.prompt(f"[[write:{target}:x]]")
    await session.until("permission_request")
    await session.cancel()
    ended = await session.turn_end()
    ended.pop("checkpoint", None)  # present when the workdir is a git checkout
    assert ended == {
        "event": "turn_ended",
        "session": session.id,
        "stop_reason": "cancelled",
        "turn": 1,
    }
    assert not target.exists()
    snap = await client.snapshot(session.id)
    assert snap["activity"]["state"]["kind"] == "idle"
    await session.delete()


async def test_claude_code_cancel_mid_stream_ends_cancelled(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """Cancel while text streams: the turn ends cancelled long before the stream would."""
    session = await open_session(client, stream, workdir)
    await session.prompt("Count slowly. [[slow]]")
    await session.until("agent_text")
    await session.cancel()
    ended = await session.turn_end(timeout=30)
    assert ended["event"] == "turn_ended" and ended["stop_reason"] == "cancelled"
    await session.delete()
    await session.wait_no_process()


async def test_claude_code_yolo_allows_once_only(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """yolo writes without asking, with a one-shot answer: back under ask, Write asks again."""
    session = await open_session(
        client, stream, workdir, initial_policy={"mode": "yolo", "sandbox": "workspace_write"}
    )
    first, second = workdir / "first.txt", workdir / "second.txt"
    await session.prompt(f"[[write:{first}:1]]")
    assert (await session.turn_end())["event"] == "turn_ended"
    assert first.read_text() == "1"
    assert "permission_request" not in [e["event"] for e in session.events()]
    await session.set_policy("ask")
    await session.prompt(f"[[write:{second}:2]]")
    request = await session.until("permission_request")
    assert not second.exists()
    await session.answer(request, "reject")
    await session.turn_end()
    assert not second.exists()
    await session.delete()


async def test_claude_code_accept_edits_writes_but_asks_for_bash(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """accept_edits: Write runs unasked; Bash still parks."""
    session = await open_session(
        client,
        stream,
        workdir,
        initial_policy={"mode": "accept_edits", "sandbox": "workspace_write"},
    )
    target, marker = workdir / "edit.txt", workdir / "bash.txt"
    await session.prompt(f"[[write:{target}:e]] [[bash:touch {marker}]]")
    request = await session.until("permission_request")
    assert target.read_text() == "e"
    assert not marker.exists()
    await session.answer(request, "allow")
    await session.turn_end()
    assert marker.exists()
    await session.delete()


async def test_claude_code_read_only_refuses_writes_without_asking(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """read_only (even with yolo): Write is refused by policy; nobody is asked."""
    session = await open_session(
        client, stream, workdir, initial_policy={"mode": "yolo", "sandbox": "read_only"}
    )
    target = workdir / "blocked.txt"
    await session.prompt(f"[[write:{target}:no]]")
    await session.turn_end()
    assert not target.exists()
    names = [e["event"] for e in session.events()]
    assert "permission_request" not in names
    calls = [e for e in session.events() if e["event"] == "tool_call"]
    assert calls[-1]["status"] == "failed"
    await session.delete()


async def test_claude_code_stricter_policy_ends_a_users_standing_grant(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """A user's "Always Allow", then read_only: the next Write is refused, not run on the
    agent's own standing rule (the agent is restarted before the turn)."""
    session = await open_session(client, stream, workdir)
    first, second = workdir / "a.txt", workdir / "b.txt"
    await session.prompt(f"[[write:{first}:a]]")
    request = await session.until("permission_request")
    await session.answer(request, "always")
    await session.turn_end()
    assert first.read_text() == "a"
    await session.set_policy("ask", "read_only")
    await session.prompt(f"[[write:{second}:b]]")
    ended = await session.turn_end()
    assert ended["event"] == "turn_ended"
    assert not second.exists()
    await session.delete()
    await session.wait_no_process()
