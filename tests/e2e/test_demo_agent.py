"""The bundled demo agent (`{"custom":"echo"}`) through a real c2 server, in folders whose own
files could shadow c2's modules."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import Client, EventReader

ECHO = {"custom": "echo"}


async def test_demo_agent_runs_in_a_project_with_its_own_core_package(
    client: Client, workdir: Path
) -> None:
    """A project with its own `core/`, `api/` and even `c2/` packages must not break the demo:
    c2's modules are c2.core / c2.api and the agent starts with `python -P`, so the session's
    folder is not on its import path."""
    for name in ("core", "api", "c2"):
        (workdir / name).mkdir()
        (workdir / name / "__init__.py").write_text(f"raise ImportError('project {name}')\n")
    (workdir / "core" / "agents").mkdir()
    (workdir / "core" / "agents" / "__init__.py").write_text("")
    (workdir / "core" / "agents" / "demo_agent.py").write_text("raise SystemExit(3)\n")
    snap = await client.new_session(workdir, provider=ECHO)
    sid = snap["id"]
    async with EventReader(client, session=sid) as stream:
        resp = await client.prompt(sid, "hello from a shadowing project")
        assert resp.status_code == 202, resp.text
        ended = await stream.until_event("turn_ended", session=sid, timeout=30)
    assert ended["stop_reason"] == "end_turn"
    said = [e["text"] for e in stream.events if e["event"] == "agent_text"]
    assert "".join(said) == "hello from a shadowing project"
