"""OpenCode (`opencode acp`) doing real work through a real c2 server (issue 10).

OpenCode starts slowly, so each test runs several turns in one session. Its config (see
tests/realagents/agents.py) makes edits and shell commands ask, so c2's policy decides them.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import Client, EventReader
from tests.realagents.session import AgentSession

AGENT = "opencode"


async def open_session(
    client: Client, stream: EventReader, workdir: Path, **fields: object
) -> AgentSession:
    return await AgentSession.create(client, stream, AGENT, workdir, **fields)


async def test_opencode_write_is_parked_answered_and_runs(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """Default policy: write parks, allow-once runs it, the turn ends; usage is real."""
    session = await open_session(client, stream, workdir)
    target = workdir / "hello.txt"
    await session.prompt(f"Please write it. [[write:{target}:hello world]]")
    request = await session.until("permission_request")
    assert not target.exists()
    await session.answer(request, "allow")
    ended = await session.turn_end()
    assert ended["event"] == "turn_ended" and ended["stop_reason"] == "end_turn"
    assert target.read_text() == "hello world"
    events = session.events()
    texts = [e["text"] for e in events if e["event"] == "agent_text"]
    assert texts and all(texts)
    calls = [e for e in events if e["event"] == "tool_call"]
    assert {c["kind"] for c in calls} == {"edit"} and calls[-1]["status"] == "completed"
    # Both reports survive: usage_update's cost and the prompt response's real counts.
    usage = [e for e in events if e["event"] == "usage"]
    assert any(u.get("cost", {}).get("currency") == "USD" for u in usage), usage
    counted = [u for u in usage if "total_tokens" in u]
    assert counted and counted[-1]["output_tokens"] > 0
    assert counted[-1]["total_tokens"] == counted[-1]["input_tokens"] + counted[-1]["output_tokens"]
    page = await session.transcript()
    parts = [entry["part"] for entry in page["entries"]]
    tool = next(p for p in parts if p["kind"] == "tool_call")
    assert tool["status"] == "completed" and tool["tool_kind"] == "edit"
    await session.delete()
    await session.wait_no_process()


async def test_opencode_reject_and_cancels_end_the_turn_cancelled(
    client: Client, stream: EventReader, workdir: Path
) -> None:
    """Reject keeps bash from running; cancel with a parked permission and mid-stream both
    read cancelled (OpenCode itself answers end_turn)."""
    session = await open_session(client, stream, workdir)
    marker, target = workdir / "ran.txt", workdir / "never.txt"
    await session.prompt(f"[[bash:touch {marker}]]")
    request = await session.until("permission_request")
    await session.answer(request, "reject")
    await session.turn_end()
    assert not marker.exists()

    await session.prompt(f"[[write:{target}:x]]")
    await session.until("permission_request")
    await session.cancel()
    ended = await session.turn_end()
    assert ended["event"] == "turn_ended" and ended["stop_reason"] == "cancelled"
    assert not target.exists()

    await session.prompt("Count slowly. [[slow]]")
    await session.until("agent_text", text="0 ")
    await session.cancel()
    ended = await session.turn_end(timeout=30)
    assert ended["event"] == "turn_ended" and ended["stop_reason"] == "cancelled"
    await session.delete()


async def test_opencode_policy_cells(client: Client, stream: EventReader, workdir: Path) -> None:
    """yolo writes unasked with a one-shot answer (ask asks again); accept_edits writes but
    asks for bash; read_only refuses writes unasked."""
    session = await open_session(
        client, stream, workdir, initial_policy={"mode": "yolo", "sandbox": "workspace_write"}
    )
    files = {name: workdir / f"{name}.txt" for name in ("yolo", "ask", "edits", "bash", "ro")}

    def asked() -> int:
        return [e["event"] for e in session.events()].count("permission_request")

    await session.prompt(f"[[write:{files['yolo']}:1]]")
    await session.turn_end()
    assert files["yolo"].exists() and asked() == 0

    await session.set_policy("ask")
    await session.prompt(f"[[write:{files['ask']}:2]]")
    request = await session.until("permission_request")
    await session.answer(request, "reject")
    await session.turn_end()
    assert not files["ask"].exists()

    await session.set_policy("accept_edits")
    await session.prompt(f"[[write:{files['edits']}:3]] [[bash:touch {files['bash']}]]")
    request = await session.until("permission_request")
    assert files["edits"].exists() and not files["bash"].exists()
    await session.answer(request, "reject")
    await session.turn_end()
    assert not files["bash"].exists()

    await session.set_policy("yolo", "read_only")
    before = asked()
    await session.prompt(f"[[write:{files['ro']}:4]]")
    await session.turn_end()
    assert not files["ro"].exists() and asked() == before
    await session.delete()
    await session.wait_no_process()
