"""Session-level behaviour with the real agents (issue 10, items 3, 5, 8 and MCP servers):
models and modes offered and switchable before and after the first prompt (and really used),
revival after a c2 restart, a no-credential run answered `agent_auth_required`, and an MCP
tool that Claude Code really runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import REPO, C2Process, Client, EventReader
from tests.fakemodel.server import MODEL, FakeModel
from tests.realagents.agents import CLAUDE_CODE_ACP, MODEL_2, claude_code_env, write_providers
from tests.realagents.session import AgentSession

STAMP_SERVER = REPO / "tests" / "mcp" / "stamp_server.py"
ENV_MARKER = "env-reached-the-tool"


@pytest.fixture(scope="module")
def c2(tmp_path_factory: pytest.TempPathFactory, fake_model: FakeModel) -> Iterator[C2Process]:
    """The module's server, plus `claude_nocreds`: Claude Code with no API key or login."""
    root = tmp_path_factory.mktemp("realsessions")
    server = C2Process(root / "c2home")
    write_providers(server.home, root / "agent-homes", fake_model)
    env = claude_code_env(root / "agent-homes" / "nocreds", fake_model)
    del env["ANTHROPIC_API_KEY"]
    inline = ", ".join(f"{k} = {json.dumps(v)}" for k, v in sorted(env.items()))
    with (server.home / "providers.toml").open("a", encoding="utf-8") as out:
        out.write(
            f"\n[providers.claude_nocreds]\ncommand = {json.dumps(str(CLAUDE_CODE_ACP))}\n"
            f"env = {{ {inline} }}\n"
        )
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def api(c2: C2Process) -> AsyncIterator[tuple[Client, EventReader]]:
    """A client and an open event stream, made after any restart of the module's server."""
    client = Client(c2)
    async with EventReader(client) as stream:
        await stream.frame()
        yield client, stream
    await client.aclose()


def said(session: AgentSession) -> str:
    return "".join(e["text"] for e in session.events() if e["event"] == "agent_text")


def models_asked(model: FakeModel, marker: str) -> list[str]:
    """The models the agent asked the fake model for, for prompts containing `marker`."""
    return [r.model for r in model.requests if marker in r.prompt]


async def put(client: Client, session: AgentSession, path: str, body: dict[str, Any]) -> Any:
    resp = await client.http.put(f"/v1/sessions/{session.id}/{path}", json=body, timeout=90)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def test_claude_code_models_and_modes_switch_before_and_after_the_first_prompt(
    api: tuple[Client, EventReader], workdir: Path, fake_model: FakeModel
) -> None:
    """The 201 snapshot offers Claude Code's models and modes; a model and a mode chosen before
    the first prompt are used by it, and both switch again after it; unknown ids are 422, and
    a mode in which it acts unasked beyond the policy is 409."""
    client, stream = api
    session = await AgentSession.create(client, stream, "claude_code", workdir)
    snap = session.snapshot
    assert snap["model"] == "default" and snap["models"]["current"] == "default"
    assert {"default", "haiku", "opus"} <= {m["id"] for m in snap["models"]["available"]}
    assert snap["modes"]["current"] == "default"
    modes = {m["id"] for m in snap["modes"]["available"]}
    assert {"default", "acceptEdits", "plan", "bypassPermissions"} <= modes
    assert (await put(client, session, "model", {"model": "haiku"}))["current"] == "haiku"
    # (Claude Code itself plans with Sonnet when Haiku is chosen: switch to plan later.)
    # In acceptEdits Claude Code edits without asking: beyond the default policy (ask), so
    # refused until the policy accepts edits too.
    refused = await client.http.put(
        f"/v1/sessions/{session.id}/mode", json={"mode_id": "acceptEdits"}
    )
    assert refused.status_code == 409 and refused.json()["code"] == "mode_exceeds_policy"
    policy = {"mode": "accept_edits", "sandbox": "workspace_write"}
    assert (await put(client, session, "execution-policy", policy))["policy"] == policy
    mode = await put(client, session, "mode", {"mode_id": "acceptEdits"})
    assert mode["current"] == "acceptEdits"
    await session.until("modes", current="acceptEdits")
    await session.prompt("first [[say:edits]]")
    ended = await session.turn_end()
    assert ended["event"] == "turn_ended", ended
    assert "haiku" in models_asked(fake_model, "first")[-1]
    await put(client, session, "model", {"model": "opus"})
    await put(client, session, "mode", {"mode_id": "plan"})
    await session.prompt("second [[say:again]]")
    assert (await session.turn_end())["event"] == "turn_ended"
    assert "opus" in models_asked(fake_model, "second")[-1]
    resp = await client.http.put(f"/v1/sessions/{session.id}/model", json={"model": "gpt-5"})
    assert resp.status_code == 422 and resp.json()["code"] == "unknown_model"
    resp = await client.http.put(f"/v1/sessions/{session.id}/mode", json={"mode_id": "yolo"})
    assert resp.status_code == 422 and resp.json()["code"] == "unknown_mode"
    snap = await client.snapshot(session.id)
    assert snap["model"] == "opus" and snap["modes"]["current"] == "plan"
    await session.delete()


async def test_opencode_model_and_mode_are_its_config_options(
    api: tuple[Client, EventReader], workdir: Path, fake_model: FakeModel
) -> None:
    """OpenCode reports model and mode only as config options: the snapshot still offers both
    (never a null model), and PUT …/model and …/mode apply through those options."""
    client, stream = api
    session = await AgentSession.create(client, stream, "opencode", workdir)
    snap = session.snapshot
    assert snap["model"] == f"fake/{MODEL}"
    assert f"fake/{MODEL_2}" in {m["id"] for m in snap["models"]["available"]}
    assert snap["modes"]["current"] == "build"
    assert {m["id"] for m in snap["modes"]["available"]} >= {"build", "plan"}
    await put(client, session, "model", {"model": f"fake/{MODEL_2}"})
    await put(client, session, "mode", {"mode_id": "plan"})
    await session.prompt("oc-first [[say:hello]]")
    assert (await session.turn_end())["event"] == "turn_ended"
    # OpenCode also titles a new session from its first prompt, with its default (small)
    # model, concurrently with the turn: that request may finish either side of the turn's.
    assert MODEL_2 in models_asked(fake_model, "oc-first")
    snap = await client.snapshot(session.id)
    options = {o["id"]: o["current"] for o in snap["config_options"]}
    assert options["model"] == f"fake/{MODEL_2}" and options["mode"] == "plan"
    assert snap["model"] == f"fake/{MODEL_2}" and snap["modes"]["current"] == "plan"
    await put(client, session, "model", {"model": f"fake/{MODEL}"})
    await session.prompt("oc-second [[say:hello]]")
    assert (await session.turn_end())["event"] == "turn_ended"
    assert models_asked(fake_model, "oc-second")[-1] == MODEL
    await session.delete()


@pytest.mark.parametrize("agent", ["claude_code", "opencode"])
async def test_real_agent_session_revives_after_restart(
    c2: C2Process, workdir: Path, agent: str, fake_model: FakeModel
) -> None:
    """After a c2 restart the snapshot keeps models, modes and the chosen model; the next
    prompt reattaches to the agent's session (no "fresh memory" warning) and keeps them."""
    client = Client(c2)
    async with EventReader(client) as stream:
        await stream.frame()
        session = await AgentSession.create(client, stream, agent, workdir)
        await put(client, session, "mode", {"mode_id": "plan"})
        await session.prompt(f"{agent}-before [[say:remember me]]")
        assert (await session.turn_end())["event"] == "turn_ended"
    await client.aclose()
    c2.stop()
    c2.start()
    client = Client(c2)
    try:
        before = await client.snapshot(session.id)
        assert before["modes"]["current"] == "plan" and before["model"]
        assert before["models"]["available"]
        async with EventReader(client) as stream:
            await stream.frame()
            revived = AgentSession(client, stream, session.id, workdir, before)
            await revived.prompt(f"{agent}-after [[say:still here]]")
            ended = await revived.turn_end()
            assert ended["event"] == "turn_ended", ended
            errors = [e["message"] for e in revived.events() if e["event"] == "error"]
            assert errors == []
            assert said(revived).endswith("still here")
        after = await client.snapshot(session.id)
        assert after["modes"]["current"] == "plan" and after["model"] == before["model"]
        assert models_asked(fake_model, f"{agent}-after")
        await revived.delete()
    finally:
        await client.aclose()


async def test_claude_code_without_credentials_is_agent_auth_required(
    api: tuple[Client, EventReader], workdir: Path
) -> None:
    """Claude Code with no API key or login ends the turn with agent_auth_required and its
    authMethods; GET /v1/providers then shows what is known about its auth."""
    client, stream = api
    session = await AgentSession.create(client, stream, {"custom": "claude_nocreds"}, workdir)  # type: ignore[arg-type]
    await session.prompt("hello")
    ended = await session.turn_end()
    assert ended["event"] == "error" and ended["terminal"] is True
    assert ended["code"] == "agent_auth_required"
    assert "prompt failed: Authentication required" in ended["message"]
    assert "rpc error" not in ended["message"]
    [method] = ended["auth_methods"]
    assert method["id"] == "claude-login" and "claude /login" in method["description"]
    rows = (await client.http.get("/v1/providers")).json()
    row = next(r for r in rows if r["id"] == {"custom": "claude_nocreds"})
    assert row["auth_required"] is True and row["auth_methods"][0]["id"] == "claude-login"
    await session.delete()


async def test_claude_code_runs_a_session_mcp_tool(
    api: tuple[Client, EventReader], workdir: Path
) -> None:
    """A stdio MCP server given at creation reaches Claude Code: the fake model calls its tool,
    the tool really runs (with the env c2 kept for it) and its result is in the tool call's
    content; the snapshot shows only the server's name and type."""
    client, stream = api
    stamps = workdir / "stamps.txt"
    server = {
        "name": "stamp",
        "command": sys.executable,
        "args": [str(STAMP_SERVER)],
        "env": [
            {"name": "STAMP_FILE", "value": str(stamps)},
            {"name": "STAMP_SECRET", "value": ENV_MARKER},
        ],
    }
    session = await AgentSession.create(
        client,
        stream,
        "claude_code",
        workdir,
        mcp_servers=[server],
        initial_policy={"mode": "yolo", "sandbox": "danger_full_access"},
    )
    assert session.snapshot["mcp_servers"] == [{"name": "stamp", "type": "stdio"}]
    await session.prompt("Use the tool. [[mcp:stamp:stamp:hello-mcp]]")
    ended = await session.turn_end()
    assert ended["event"] == "turn_ended", ended
    assert stamps.read_text() == "hello-mcp\n"
    calls = [e for e in session.events() if e["event"] == "tool_call"]
    texts = [i.get("text") or "" for c in calls for i in c.get("content") or []]
    assert any(f"stamped:hello-mcp:{ENV_MARKER}" in t for t in texts), calls
    await session.delete()
