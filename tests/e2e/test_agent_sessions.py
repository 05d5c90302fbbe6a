"""Session-level agent behaviour through a real c2 server and the scripted agent: the ACP session
at creation (models, modes, config options in the 201), modes and models that really apply,
auth-required and stderr-explained failures, MCP servers (sent, summarised, kept secret, revived),
resume before load, session/close before eviction.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import REPO, C2Process, Client, EventReader, poll_until
from tests.gitrepos import git, make_repo

SECRET = "s3cr3t-token-value"
EXTRA = {
    "modes": {"SCRIPTED_AGENT_MODES": "1", "SCRIPTED_AGENT_RESUME": "1"},
    "optmodel": {"SCRIPTED_AGENT_MODEL_OPTION": "1"},
    "auth": {"SCRIPTED_AGENT_AUTH": "new", "SCRIPTED_AGENT_SPAWN_CHILD": "1"},
    "auth_prompt": {"SCRIPTED_AGENT_AUTH": "prompt"},
    "stderr_exit": {"SCRIPTED_AGENT_EXIT_ON_NEW": "Refusing to run as root without IS_SANDBOX=1"},
    "mcp_http": {"SCRIPTED_AGENT_MCP": "http"},
}
PROVIDER_MCP = (
    'mcp_servers = [{ name = "base", command = "/bin/cat", args = [], env = [] },'
    ' { name = "shared", command = "/bin/echo", args = ["provider"], env = [] }]'
)


def add_providers(server: C2Process) -> None:
    """Append scripted-agent variants (one per EXTRA entry) to the server's providers.toml."""
    state = server.home / "agent-state"
    lines = []
    for name, env in EXTRA.items():
        full = {
            "PYTHONPATH": str(REPO),
            "SCRIPTED_AGENT_LOG": str(server.agent_log),
            "DEMO_AGENT_STATE_DIR": str(state),
            **env,
        }
        env_toml = ", ".join(f"{k} = {json.dumps(v)}" for k, v in full.items())
        lines += [
            f"[providers.{name}]",
            f'command = "{sys.executable}"',
            'args = ["-m", "tests.agents.scripted_agent"]',
            f"env = {{ {env_toml} }}",
        ]
        if name == "modes":
            lines.append(PROVIDER_MCP)
        lines.append("")
    with (server.home / "providers.toml").open("a", encoding="utf-8") as f:
        f.write("\n" + "\n".join(lines))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[C2Process]:
    c2 = C2Process(tmp_path_factory.mktemp("c2home"))
    add_providers(c2)
    c2.start()
    yield c2
    c2.stop()


@pytest.fixture
async def api(server: C2Process) -> AsyncIterator[Client]:
    client = Client(server)
    yield client
    await client.aclose()


def requests_of(server: C2Process, method: str) -> list[dict[str, Any]]:
    return [e for e in server.agent_log_lines() if e.get("method") == method]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_new_session_snapshot_offers_models_modes_and_options(
    api: Client, server: C2Process, workdir: Path
) -> None:
    """The 201 snapshot carries models, modes and config options: session/new ran at creation."""
    async with EventReader(api) as stream:
        await stream.frame()
        snap = await api.new_session(workdir, provider={"custom": "modes"})
        sid = snap["id"]
        created = await stream.until_event("session_created", session=sid)
        modes_event = await stream.until_event("modes", session=sid)
    assert stream.events.index(created) < stream.events.index(modes_event)
    assert snap["model"] == "echo-fast"
    assert [m["id"] for m in snap["models"]["available"]] == ["echo-fast", "echo-smart"]
    assert snap["modes"]["current"] == "default"
    assert [m["id"] for m in snap["modes"]["available"]] == [
        "default",
        "acceptEdits",
        "plan",
        "bypassPermissions",
    ]
    assert snap["modes"]["available"][2]["description"] == "Analyse only; change nothing"
    assert {o["id"] for o in snap["config_options"]} >= {"verbosity", "effort"}
    assert modes_event["current"] == "default" and len(modes_event["available"]) == 4
    [new] = created_in(server, workdir)
    prompts = [e for e in requests_of(server, "session/prompt") if e["sessionId"] == new]
    assert prompts == []  # created before any prompt


def created_in(server: C2Process, cwd: Path) -> list[str]:
    """ACP session ids the scripted agent created in `cwd`, oldest first."""
    lines = server.agent_log_lines()
    return [
        e["sessionId"] for e in lines if e.get("event") == "new_session" and e["cwd"] == str(cwd)
    ]


async def test_set_mode_applies_before_and_after_a_prompt(
    api: Client, server: C2Process, workdir: Path
) -> None:
    """PUT …/mode and the set_mode op call session/set_mode and broadcast `modes`; the agent's
    own current_mode_update shows too; an unknown mode is 422 unknown_mode."""
    sid = (await api.new_session(workdir, provider={"custom": "modes"}))["id"]
    async with EventReader(api, session=sid) as stream:
        await stream.frame()
        resp = await api.http.put(f"/v1/sessions/{sid}/mode", json={"mode_id": "plan"})
        assert resp.status_code == 200, resp.text
        assert resp.json() == {"session": sid, "current": "plan"}
        assert (await stream.until_event("modes"))["current"] == "plan"
        await api.prompt(sid, "/mode default")
        assert (await stream.until_event("modes"))["current"] == "default"
        await stream.until_event("turn_ended")
        resp = await api.http.post(
            "/v1/ops", json={"op": "set_mode", "session": sid, "mode_id": "plan"}
        )
        assert resp.status_code == 200, resp.text
        assert (await stream.until_event("modes"))["current"] == "plan"
        resp = await api.http.put(f"/v1/sessions/{sid}/mode", json={"mode_id": "yolo"})
        assert resp.status_code == 422 and resp.json()["code"] == "unknown_mode"
    acp_sid = (await api.snapshot(sid))["modes"]
    assert acp_sid["current"] == "plan"
    sets = [e["params"]["modeId"] for e in requests_of(server, "session/set_mode")]
    assert sets[-2:] == ["plan", "plan"]


async def test_a_mode_in_which_the_agent_acts_unasked_must_fit_the_policy(
    api: Client, server: C2Process, workdir: Path
) -> None:
    """In Claude Code's acceptEdits and bypassPermissions the agent acts without asking, so
    c2's policy could no longer decide: set through c2 such a mode is refused (409
    mode_exceeds_policy) unless the policy allows the same unasked, and a policy made
    stricter moves the agent off it (to its first mode within the policy), as `modes`."""
    sid = (await api.new_session(workdir, provider={"custom": "modes"}))["id"]

    async def mode(mode_id: str) -> int:
        resp = await api.http.put(f"/v1/sessions/{sid}/mode", json={"mode_id": mode_id})
        if resp.status_code != 200:
            assert resp.json()["code"] == "mode_exceeds_policy", resp.text
        return resp.status_code

    async def policy(mode_: str, sandbox: str) -> None:
        body = {"mode": mode_, "sandbox": sandbox}
        resp = await api.http.put(f"/v1/sessions/{sid}/execution-policy", json=body)
        assert resp.status_code == 200, resp.text

    assert (await mode("bypassPermissions"), await mode("acceptEdits")) == (409, 409)
    assert await mode("plan") == 200  # asks as ever
    await policy("accept_edits", "workspace_write")
    assert (await mode("acceptEdits"), await mode("bypassPermissions")) == (200, 409)
    await policy("yolo", "danger_full_access")
    assert await mode("bypassPermissions") == 200
    async with EventReader(api, session=sid) as stream:
        await stream.frame()
        await policy("ask", "read_only")
        moved = await stream.until_event("modes")
    assert moved["current"] == "default"
    assert (await api.snapshot(sid))["modes"]["current"] == "default"
    sets = [e["params"]["modeId"] for e in requests_of(server, "session/set_mode")]
    assert sets[-1] == "default"  # the agent itself was switched


async def test_an_agent_switching_itself_beyond_the_policy_is_switched_back(
    api: Client, server: C2Process, workdir: Path
) -> None:
    """Claude Code may leave plan mode into acceptEdits on its own: under `ask` c2 switches it
    back to its first mode within the policy and says so; a policy that allows the mode
    leaves the agent's choice alone."""
    sid = (await api.new_session(workdir, provider={"custom": "modes"}))["id"]
    async with EventReader(api, session=sid) as stream:
        await stream.frame()
        await api.prompt(sid, "/mode bypassPermissions")
        assert (await stream.until_event("modes"))["current"] == "bypassPermissions"
        assert (await stream.until_event("modes"))["current"] == "default"
        said = await stream.until_event("error")
        await stream.until_event("turn_ended")
    assert said["terminal"] is False and "switched it to default" in said["message"]
    assert (await api.snapshot(sid))["modes"]["current"] == "default"
    assert [e["params"]["modeId"] for e in requests_of(server, "session/set_mode")][-1] == "default"

    body = {"mode": "yolo", "sandbox": "danger_full_access"}
    assert (
        await api.http.put(f"/v1/sessions/{sid}/execution-policy", json=body)
    ).status_code == 200
    async with EventReader(api, session=sid) as stream:
        await stream.frame()
        await api.prompt(sid, "/mode bypassPermissions")
        await stream.until_event("turn_ended")
    assert (await api.snapshot(sid))["modes"]["current"] == "bypassPermissions"


async def test_set_model_unknown_id_is_422(api: Client, workdir: Path) -> None:
    """A model id the agent does not offer is 422 unknown_model, not a 409 about mid-session."""
    sid = (await api.new_session(workdir))["id"]
    resp = await api.http.put(f"/v1/sessions/{sid}/model", json={"model": "gpt-nope"})
    assert resp.status_code == 422 and resp.json()["code"] == "unknown_model"
    assert "echo-fast" in resp.json()["detail"]
    assert (await api.snapshot(sid))["model"] == "echo-fast"


async def test_model_only_as_config_option_is_applied_there(
    api: Client, server: C2Process, workdir: Path
) -> None:
    """An agent exposing its model only as a config option (OpenCode) gets the model through
    session/set_config_option; the snapshot's model and picker reflect that option."""
    snap = await api.new_session(workdir, provider={"custom": "optmodel"})
    sid = snap["id"]
    assert snap["model"] == "echo-fast"
    assert [m["id"] for m in snap["models"]["available"]] == ["echo-fast", "echo-smart"]
    resp = await api.http.put(f"/v1/sessions/{sid}/model", json={"model": "echo-smart"})
    assert resp.status_code == 200, resp.text
    async with EventReader(api, session=sid) as stream:
        await stream.frame()
        await api.prompt(sid, "/model")
        await stream.until_event("turn_ended")
    said = "".join(e.get("text", "") for e in stream.events if e["event"] == "agent_text")
    assert said == "model=echo-smart"
    calls = [e["params"] for e in requests_of(server, "session/set_config_option")]
    assert {"configId": "model", "value": "echo-smart"}.items() <= calls[-1].items()
    snap = await api.snapshot(sid)
    assert snap["model"] == "echo-smart" and snap["models"]["current"] == "echo-smart"
    options = {o["id"]: o["current"] for o in snap["config_options"]}
    assert options["model"] == "echo-smart"
    resp = await api.http.put(f"/v1/sessions/{sid}/model", json={"model": "nope"})
    assert resp.status_code == 422 and resp.json()["code"] == "unknown_model"


async def test_auth_required_refuses_creation_and_leaves_nothing(
    api: Client, server: C2Process, workdir: Path
) -> None:
    """An agent refusing session/new with ACP's auth error fails creation with
    agent_auth_required and its authMethods; no row, no process, no worktree remain."""
    repo = make_repo(workdir, with_origin=False, subdir=None).root
    before = (await api.http.get("/v1/sessions")).json()["sessions"]
    async with EventReader(api) as stream:
        await stream.frame()
        resp = await api.http.post(
            "/v1/sessions",
            json={
                "provider": {"custom": "auth"},
                "cwd": str(repo),
                "use_worktree": True,
                "request_id": "auth-1",
            },
        )
        event = await stream.until_event("error", request_id="auth-1")
    assert resp.status_code == 503, resp.text
    problem = resp.json()
    assert problem["code"] == "agent_auth_required"
    assert problem["auth_methods"] == [
        {"id": "claude-login", "name": "Log in with Claude", "description": "Run `claude /login`"}
    ]
    assert "session/new failed: Authentication required" in problem["detail"]
    assert "rpc error" not in problem["detail"]
    assert "no credentials found" in problem["stderr_tail"]
    assert event["code"] == "agent_auth_required" and event["terminal"] is True
    assert event["auth_methods"] == problem["auth_methods"]
    assert (await api.http.get("/v1/sessions")).json()["sessions"] == before
    worktrees = server.home / "worktrees"
    assert not worktrees.exists() or not any(worktrees.rglob("*"))
    assert git(repo, "branch", "--list", "c2/*") == ""
    [spawned] = [e for e in server.agent_log_lines() if e.get("event") == "child"][-1:]
    await poll_until(lambda: not pid_alive(spawned["agent_pid"]) and not pid_alive(spawned["pid"]))
    rows = {json.dumps(r["id"]): r for r in (await api.http.get("/v1/providers")).json()}
    auth_row = rows[json.dumps({"custom": "auth"})]
    assert auth_row["auth_required"] is True
    assert [m["id"] for m in auth_row["auth_methods"]] == ["claude-login"]
    assert rows[json.dumps({"custom": "modes"})]["auth_methods"] in (None, [])


async def test_auth_required_on_prompt_ends_the_turn(api: Client, workdir: Path) -> None:
    """A prompt answered with ACP's auth error fails the turn with agent_auth_required."""
    sid = (await api.new_session(workdir, provider={"custom": "auth_prompt"}))["id"]
    async with EventReader(api, session=sid) as stream:
        await stream.frame()
        await api.prompt(sid, "hello", request_id="p-auth")
        event = await stream.until_event("error", request_id="p-auth")
    assert event["code"] == "agent_auth_required" and event["terminal"] is True
    assert event["auth_methods"][0]["id"] == "claude-login"
    assert event["message"].startswith("the agent needs you to log in first (prompt failed:")
    state = (await api.snapshot(sid))["activity"]["state"]
    assert state["kind"] == "failed" and state["reason"] == "provider_error"


async def test_agent_exit_on_new_session_names_step_and_carries_stderr(
    api: Client, workdir: Path
) -> None:
    """An agent that exits during session/new fails creation naming the step, with the stderr
    line that explains it."""
    resp = await api.http.post(
        "/v1/sessions",
        json={"provider": {"custom": "stderr_exit"}, "cwd": str(workdir), "use_worktree": False},
    )
    assert resp.status_code == 503, resp.text
    problem = resp.json()
    assert problem["code"] == "provider_unavailable"
    assert "session/new failed: agent exited (code 1)" in problem["detail"]
    assert "IS_SANDBOX=1" in problem["stderr_tail"]


async def test_prompt_failure_carries_stderr_tail(api: Client, workdir: Path) -> None:
    """A failed prompt's error event names the step, drops the JSON-RPC prefix and carries the
    stderr the agent wrote meanwhile."""
    sid = (await api.new_session(workdir))["id"]
    async with EventReader(api, session=sid) as stream:
        await stream.frame()
        await api.prompt(sid, "/stderr-fail model API said 529 overloaded", request_id="p-err")
        event = await stream.until_event("error", request_id="p-err")
    assert event["message"] == "prompt failed: Internal error (the agent gave up)"
    assert event["stderr_tail"] == "model API said 529 overloaded"
    assert "code" not in event


async def test_mcp_servers_sent_merged_and_kept_secret(
    api: Client, server: C2Process, workdir: Path
) -> None:
    """mcp_servers reach session/new merged with the provider's (the session's wins by name);
    clients only ever see {name, type}; env values never leave c2."""
    servers = [
        {
            "name": "shared",
            "command": "/usr/bin/env",
            "args": ["tool"],
            "env": [{"name": "API_TOKEN", "value": SECRET}],
        },
        {"name": "files", "command": "/bin/ls", "args": [], "env": []},
    ]
    async with EventReader(api) as stream:
        await stream.frame()
        resp = await api.http.post(
            "/v1/sessions",
            json={
                "provider": {"custom": "modes"},
                "cwd": str(workdir),
                "use_worktree": False,
                "mcp_servers": servers,
            },
        )
        assert resp.status_code == 201, resp.text
        sid = resp.json()["id"]
        await stream.until_event("modes", session=sid)
    assert SECRET not in resp.text
    assert resp.json()["mcp_servers"] == [
        {"name": "base", "type": "stdio"},
        {"name": "shared", "type": "stdio"},
        {"name": "files", "type": "stdio"},
    ]
    assert SECRET not in json.dumps(stream.frames)
    assert SECRET not in (await api.http.get(f"/v1/sessions/{sid}")).text
    assert SECRET not in (await api.http.get("/v1/sessions")).text
    [new] = [e for e in requests_of(server, "session/new") if e["params"]["cwd"] == str(workdir)][
        -1:
    ]
    sent = {s["name"]: s for s in new["params"]["mcpServers"]}
    assert list(sent) == ["base", "shared", "files"]
    assert sent["shared"] == {
        "name": "shared",
        "command": "/usr/bin/env",
        "args": ["tool"],
        "env": [{"name": "API_TOKEN", "value": SECRET}],
    }


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        ({"command": "/bin/cat", "args": [], "env": []}, "invalid_mcp_server"),
        ({"name": "x", "command": "cat", "args": [], "env": []}, "invalid_mcp_server"),
        ({"type": "websocket", "name": "x", "url": "http://127.0.0.1:1"}, "invalid_mcp_server"),
        (
            {"type": "sse", "name": "x", "url": "http://127.0.0.1:1", "headers": []},
            "mcp_unsupported",
        ),
    ],
)
async def test_mcp_servers_refused_leave_nothing(
    api: Client, workdir: Path, entry: dict[str, Any], code: str
) -> None:
    """Missing name, relative command, wrong type → 422 invalid_mcp_server; a transport the
    agent did not advertise → 422 mcp_unsupported; no session is left behind."""
    before = (await api.http.get("/v1/sessions")).json()["sessions"]
    resp = await api.http.post(
        "/v1/sessions",
        json={
            "provider": {"custom": "mcp_http"},
            "cwd": str(workdir),
            "use_worktree": False,
            "mcp_servers": [entry],
        },
    )
    assert resp.status_code == 422, resp.text
    assert resp.json()["code"] == code
    assert (await api.http.get("/v1/sessions")).json()["sessions"] == before


async def test_mcp_servers_duplicate_name_and_http_when_advertised(
    api: Client, server: C2Process, workdir: Path
) -> None:
    """A duplicate name is invalid; an http server goes through to an agent advertising http,
    its headers kept out of every answer."""
    http = {
        "type": "http",
        "name": "remote",
        "url": "http://127.0.0.1:9/mcp",
        "headers": [{"name": "Authorization", "value": f"Bearer {SECRET}"}],
    }
    body = {"provider": {"custom": "mcp_http"}, "cwd": str(workdir), "use_worktree": False}
    resp = await api.http.post("/v1/sessions", json=body | {"mcp_servers": [http, http]})
    assert resp.status_code == 422 and resp.json()["code"] == "invalid_mcp_server"
    resp = await api.http.post("/v1/sessions", json=body | {"mcp_servers": [http]})
    assert resp.status_code == 201, resp.text
    assert resp.json()["mcp_servers"] == [{"name": "remote", "type": "http"}]
    assert SECRET not in resp.text
    new = [e for e in requests_of(server, "session/new") if e["params"]["cwd"] == str(workdir)]
    assert new[-1]["params"]["mcpServers"] == [http]


async def test_revival_resumes_with_mcp_servers_mode_and_model(tmp_path: Path) -> None:
    """After a restart the snapshot keeps models, modes and MCP servers; the next prompt
    resumes (session/resume, not load) with the same MCP servers (secrets included) and
    re-applies a mode chosen while the agent was down."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    server = C2Process(tmp_path / "home")
    add_providers(server)
    server.start()
    try:
        api = Client(server)
        servers = [
            {
                "name": "t",
                "command": "/bin/cat",
                "args": [],
                "env": [{"name": "K", "value": SECRET}],
            }
        ]
        created = await api.new_session(workdir, provider={"custom": "modes"}, mcp_servers=servers)
        sid = created["id"]
        resp = await api.http.put(f"/v1/sessions/{sid}/model", json={"model": "echo-smart"})
        assert resp.status_code == 200, resp.text
        async with EventReader(api, session=sid) as stream:
            await stream.frame()
            await api.prompt(sid, "/text first")
            await stream.until_event("turn_ended")
        await api.aclose()
        server.stop()
        server.start()
        api = Client(server)
        snap = await api.snapshot(sid)
        assert snap["model"] == "echo-smart" and snap["modes"]["current"] == "default"
        assert snap["mcp_servers"] == [
            {"name": "base", "type": "stdio"},
            {"name": "shared", "type": "stdio"},
            {"name": "t", "type": "stdio"},
        ]
        resp = await api.http.put(f"/v1/sessions/{sid}/mode", json={"mode_id": "plan"})
        assert resp.status_code == 200, resp.text
        async with EventReader(api, session=sid) as stream:
            await stream.frame()
            await api.prompt(sid, "/model")
            await stream.until_event("turn_ended")
        said = "".join(e.get("text", "") for e in stream.events if e["event"] == "agent_text")
        assert said == "model=echo-smart"
        assert not [e for e in stream.events if e["event"] == "error"]
        [acp_sid] = created_in(server, workdir)
        resumed = requests_of(server, "session/resume")
        assert [e["params"]["sessionId"] for e in resumed] == [acp_sid]
        assert resumed[-1]["params"]["mcpServers"][-1]["env"] == [{"name": "K", "value": SECRET}]
        assert not requests_of(server, "session/load")
        assert requests_of(server, "session/set_mode")[-1]["params"]["modeId"] == "plan"
        assert (await api.snapshot(sid))["modes"]["current"] == "plan"
        await api.aclose()
    finally:
        server.stop()


async def test_eviction_closes_the_acp_session_first(tmp_path: Path) -> None:
    """Evicting an idle agent to make room sends session/close first (when advertised)."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    server = C2Process(tmp_path / "home", env={"C2_MAX_LIVE_AGENTS": "1"})
    add_providers(server)
    server.start()
    try:
        api = Client(server)
        first = await api.new_session(workdir, provider={"custom": "modes"})
        await api.new_session(workdir, provider={"custom": "modes"})
        closes = requests_of(server, "session/close")
        first_acp = created_in(server, workdir)[0]
        assert [e["params"]["sessionId"] for e in closes] == [first_acp]
        assert first["id"] in {
            s["id"] for s in (await api.http.get("/v1/sessions")).json()["sessions"]
        }
        # The evicted session is not lost: its next prompt revives an agent for it (evicting
        # the other, idle one). A busy slot refusing with 503 capacity is checked in
        # test_process_hygiene.py, the whole rule in process in tests/unit/test_engine_turns.py.
        async with EventReader(api, session=first["id"]) as stream:
            await stream.frame()
            assert (await api.prompt(first["id"], "/text revived")).status_code == 202
            ended = await stream.until_event("turn_ended")
        assert ended["stop_reason"] == "end_turn"
        said = [e["text"] for e in stream.events if e["event"] == "agent_text"]
        assert "".join(said) == "revived"
        assert len(requests_of(server, "session/close")) == 2  # the other agent made room
        await api.aclose()
    finally:
        server.stop()
