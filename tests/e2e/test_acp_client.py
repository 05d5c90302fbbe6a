"""AgentProcess driving real agent subprocesses (the demo agent and tests/agents/scripted_agent)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from c2.core.agents.client import (
    MAX_QUEUED_UPDATES,
    AgentError,
    AgentProcess,
    AgentUpdate,
    ConfigOptionsUpdate,
    LaunchSpec,
    PermissionAsk,
    PlanUpdate,
    TextChunk,
    ThoughtChunk,
    ToolCallUpdate,
    UsageUpdate,
)
from c2.core.protocol.values import StopReason
from c2.core.providers import DEMO_KEY, ProviderRegistry
from tests.agents.scripted_agent import AGENT_LAUNCH_INPUT, launch_spec, read_log

WAIT = 10.0  # upper bound for any single wait in these tests


class Recorder:
    """AgentHandler that records everything and parks permissions until the test answers."""

    def __init__(self) -> None:
        self.events: list[AgentUpdate | PermissionAsk] = []
        self.asks: asyncio.Queue[tuple[PermissionAsk, asyncio.Future[str | None]]] = asyncio.Queue()
        self.arrived = asyncio.Event()
        # Updates `take_update` refuses (they go to `on_update`, which takes `slow` seconds).
        self.declines: Callable[[AgentUpdate], bool] = lambda update: False
        self.slow = 0.0
        self.queued = 0  # updates that came through `on_update`
        self.gate = asyncio.Event()  # `on_update` waits for it (cleared: the handler is stuck)
        self.gate.set()

    @property
    def updates(self) -> list[AgentUpdate]:
        return [e for e in self.events if not isinstance(e, PermissionAsk)]

    def text(self) -> str:
        return "".join(u.text for u in self.updates if isinstance(u, TextChunk))

    def take_update(self, update: AgentUpdate) -> bool:
        if self.declines(update):
            return False
        self.events.append(update)
        self.arrived.set()
        return True

    async def on_update(self, update: AgentUpdate) -> None:
        self.queued += 1
        self.events.append(update)
        self.arrived.set()
        await self.gate.wait()
        await asyncio.sleep(self.slow)

    async def on_permission(self, ask: PermissionAsk) -> str | None:
        self.events.append(ask)
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.asks.put_nowait((ask, answer))
        return await answer

    async def next_ask(self) -> tuple[PermissionAsk, asyncio.Future[str | None]]:
        return await asyncio.wait_for(self.asks.get(), WAIT)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT):
            while not predicate():
                self.arrived.clear()
                await self.arrived.wait()


Starter = Callable[..., Awaitable[tuple[AgentProcess, Recorder]]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Starter]:
    """Start agents (scripted by default) that are always closed after the test."""
    started: list[AgentProcess] = []

    async def _start(spec: LaunchSpec | None = None, **kw: Any) -> tuple[AgentProcess, Recorder]:
        recorder = Recorder()
        agent = await asyncio.wait_for(
            AgentProcess.start(spec or launch_spec(tmp_path, **kw), recorder), WAIT
        )
        started.append(agent)
        return agent, recorder

    yield _start
    for agent in started:
        await asyncio.wait_for(agent.close(grace=1.0), WAIT)


async def run(agent: AgentProcess, session: str, text: str) -> StopReason:
    return await asyncio.wait_for(agent.prompt(session, text), WAIT)


def pid_gone(pid: int) -> bool:
    """True when no such process exists, or only its zombie is left for someone to reap."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + WAIT
    while not pid_gone(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_agent_process_demo_turn_event_order(start: Starter, tmp_path: Path) -> None:
    """The echo demo streams usage, thought, plan, tool call, then the prompt back, end_turn."""
    spec = ProviderRegistry.load(tmp_path).get(DEMO_KEY).launch(str(tmp_path))
    agent, rec = await start(spec)
    session = await agent.new_session(str(tmp_path))
    prompt = "Hello there, demo agent!\n  second line é"
    assert await run(agent, session.acp_session_id, prompt) is StopReason.END_TURN

    kinds = [type(u) for u in rec.updates]
    first_text = kinds.index(TextChunk)
    assert kinds[:first_text] == [
        UsageUpdate,
        ThoughtChunk,
        PlanUpdate,
        ToolCallUpdate,
        ToolCallUpdate,
    ]
    assert set(kinds[first_text:]) == {TextChunk} and len(kinds) - first_text > 1
    started, finished = rec.updates[3], rec.updates[4]
    assert isinstance(started, ToolCallUpdate) and isinstance(finished, ToolCallUpdate)
    assert (started.kind, started.status) == ("read", "pending")
    assert (finished.id, finished.title, finished.kind, finished.status) == (
        started.id,
        started.title,
        "read",
        "completed",
    )
    chunks = [u for u in rec.updates if isinstance(u, TextChunk)]
    assert "".join(c.text for c in chunks) == prompt
    assert len({c.message_id for c in chunks}) == 1


async def test_agent_process_demo_stops_streaming_on_cancel(start: Starter, tmp_path: Path) -> None:
    """The demo honours session/cancel mid-stream and answers cancelled."""
    entry = ProviderRegistry.load(tmp_path).get(DEMO_KEY)
    spec = entry.launch(str(tmp_path))
    agent, rec = await start(
        LaunchSpec(spec.command, spec.args, {**spec.env, "DEMO_AGENT_DELAY_MS": "50"}, spec.cwd)
    )
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    words = " ".join(f"w{i}" for i in range(40))
    turn = asyncio.create_task(agent.prompt(session, words))
    await rec.wait_for(lambda: rec.text().startswith("w0"))
    await agent.cancel(session)
    assert await asyncio.wait_for(turn, WAIT) is StopReason.CANCELLED
    assert len(rec.text()) < len(words)


async def test_agent_process_reports_capabilities_models_and_options(start: Starter) -> None:
    """initialize reads loadSession; session/new reports models and select-only options."""
    agent, _ = await start()
    assert agent.supports_load_session is True and agent.alive and agent.pid > 0
    info = await agent.new_session(os.getcwd())
    assert info.models is not None
    assert [m.id for m in info.models.available] == ["echo-fast", "echo-smart"]
    assert info.models.current == "echo-fast"
    options = {o.id: o for o in info.config_options}
    assert set(options) == {"verbosity", "effort"}  # the boolean option is filtered out
    assert [c.id for c in options["effort"].choices] == ["low", "medium", "high"]
    assert options["effort"].category == "thought_level" and options["effort"].current == "medium"

    no_load, _ = await start(load=False)
    assert no_load.supports_load_session is False


async def test_agent_process_permission_answered(start: Starter, tmp_path: Path) -> None:
    """A permission ask carries the remembered title; the chosen option reaches the agent."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    turn = asyncio.create_task(
        agent.prompt(session, "/text working\n/tool t1 execute pending rm build/\n/permission edit")
    )
    ask, answer = await rec.next_ask()
    assert (ask.tool_call_id, ask.title, ask.kind) == ("t1", "rm build/", "edit")
    assert ask.options == [("allow", "Allow", "allow_once"), ("reject", "Reject", "reject_once")]
    # The lead-up was delivered before the question.
    assert [type(e) for e in rec.events] == [TextChunk, ToolCallUpdate, PermissionAsk]
    answer.set_result("reject")
    assert await asyncio.wait_for(turn, WAIT) is StopReason.END_TURN
    assert rec.text() == "workingreject"


async def test_agent_process_permission_cancelled(start: Starter, tmp_path: Path) -> None:
    """Answering None sends the cancelled outcome; blank titles fall back to "Tool call"."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    turn = asyncio.create_task(agent.prompt(session, "/permission none"))
    ask, answer = await rec.next_ask()
    assert (ask.title, ask.kind) == ("Tool call", None)
    answer.set_result(None)
    assert await asyncio.wait_for(turn, WAIT) is StopReason.END_TURN
    assert rec.text() == "cancelled"


async def test_agent_process_parked_permissions_do_not_block(
    start: Starter, tmp_path: Path
) -> None:
    """Concurrent asks all arrive while the first is still parked; each gets its own answer."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    turn = asyncio.create_task(agent.prompt(session, "/permissions 3 execute"))
    parked = [await rec.next_ask() for _ in range(3)]
    assert sorted(ask.tool_call_id for ask, _ in parked) == ["perm-0", "perm-1", "perm-2"]
    for ask, answer in reversed(parked):
        answer.set_result("allow" if ask.tool_call_id != "perm-1" else None)
    assert await asyncio.wait_for(turn, WAIT) is StopReason.END_TURN
    assert rec.text() == "allow\ncancelled\nallow\n"


async def test_agent_process_cancel_ends_the_turn(start: Starter, tmp_path: Path) -> None:
    """session/cancel makes a hanging turn return cancelled."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    turn = asyncio.create_task(agent.prompt(session, "/text before\n/hang"))
    await rec.wait_for(lambda: rec.text() == "before")
    await agent.cancel(session)
    assert await asyncio.wait_for(turn, WAIT) is StopReason.CANCELLED


async def test_agent_process_rpc_error_fails_the_prompt(start: Starter, tmp_path: Path) -> None:
    """A JSON-RPC error answer becomes AgentError("<step> failed: <message>"), no rpc prefix."""
    agent, _ = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    with pytest.raises(AgentError, match=r"^prompt failed: kaboom$") as failed:
        await run(agent, session, "/fail kaboom")
    assert failed.value.auth_required is False
    assert agent.alive
    assert await run(agent, session, "/stop max_tokens") is StopReason.MAX_TOKENS


@pytest.mark.parametrize("spawn_child", [False, True])
async def test_agent_process_death_fails_the_prompt_quickly(
    start: Starter, tmp_path: Path, spawn_child: bool
) -> None:
    """An agent dying mid-turn fails the prompt within a second, even if a child holds stdout."""
    agent, rec = await start(spawn_child=spawn_child, log=tmp_path / "log.jsonl")
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    turn = asyncio.create_task(agent.prompt(session, "/crash"))
    await rec.wait_for(lambda: rec.text() == "crashing")
    crashed = time.monotonic()
    with pytest.raises(AgentError, match=r"^prompt failed: agent exited \(code 3\)"):
        await asyncio.wait_for(turn, WAIT)
    assert time.monotonic() - crashed < 1.0
    assert not agent.alive
    with pytest.raises(AgentError, match="agent exited"):
        await run(agent, session, "again")
    await agent.cancel(session)  # never raises on a dead agent


async def test_agent_process_close_leaves_no_process(start: Starter, tmp_path: Path) -> None:
    """close() ends the agent and its grandchild, fails the in-flight prompt, is idempotent."""
    log = tmp_path / "log.jsonl"
    agent, rec = await start(spawn_child=True, log=log)
    [child] = [e["pid"] for e in read_log(log) if e.get("event") == "child"]
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    turn = asyncio.create_task(agent.prompt(session, "/text busy\n/ignore-cancel"))
    await rec.wait_for(lambda: rec.text() == "busy")
    await asyncio.wait_for(agent.close(grace=1.0), WAIT)
    with pytest.raises(AgentError, match=r"^prompt failed: acp connection closed$"):
        await asyncio.wait_for(turn, WAIT)
    assert await wait_gone(agent.pid) and await wait_gone(child)
    assert not agent.alive
    await asyncio.wait_for(agent.close(), WAIT)  # idempotent


async def test_agent_process_close_kills_a_stubborn_agent(start: Starter, tmp_path: Path) -> None:
    """An agent ignoring stdin EOF and SIGTERM is SIGKILLed after the grace period."""
    agent, _ = await start(env={"SCRIPTED_AGENT_STUBBORN": "1"})
    began = time.monotonic()
    await asyncio.wait_for(agent.close(grace=0.3), WAIT)
    assert await wait_gone(agent.pid)
    assert time.monotonic() - began < 3.0


async def test_agent_process_big_line_arrives_intact(start: Starter, tmp_path: Path) -> None:
    """A single 2 MiB agent_message_chunk line is delivered whole."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    assert await run(agent, session, "/bigline 2097152") is StopReason.END_TURN
    [big] = rec.updates
    assert isinstance(big, TextChunk) and big.text == "x" * 2097152


async def test_agent_process_load_session_mutes_replay(start: Starter, tmp_path: Path) -> None:
    """session/load replays only usage to the handler; later updates flow again."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    await run(agent, session, "/text remembered")
    rec.events.clear()
    info = await asyncio.wait_for(agent.load_session(session, str(tmp_path)), WAIT)
    assert info.acp_session_id == session and info.models is not None
    assert [type(u) for u in rec.updates] == [UsageUpdate]
    await run(agent, session, "/text fresh")
    assert rec.text() == "fresh"
    with pytest.raises(AgentError, match=r"^session/load failed: session not found: nope$"):
        await agent.load_session("nope", str(tmp_path))


async def test_agent_process_load_session_in_a_new_process(start: Starter, tmp_path: Path) -> None:
    """With a state dir, the demo's sessions survive the agent process (revive path)."""
    state = {"DEMO_AGENT_STATE_DIR": str(tmp_path / "state")}
    first, _ = await start(env=state)
    session = (await first.new_session(str(tmp_path))).acp_session_id
    await run(first, session, "/text before restart")
    await first.close()
    second, rec = await start(env=state)
    await asyncio.wait_for(second.load_session(session, str(tmp_path)), WAIT)
    assert [type(u) for u in rec.updates] == [UsageUpdate]
    assert await run(second, session, "/text after") is StopReason.END_TURN


async def test_agent_process_set_model_and_config_option(start: Starter, tmp_path: Path) -> None:
    """set_model and set_config_option reach the agent and the new option set comes back."""
    log = tmp_path / "log.jsonl"
    agent, _ = await start(log=log)
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    await asyncio.wait_for(agent.set_model(session, "echo-smart"), WAIT)
    options = await asyncio.wait_for(agent.set_config_option(session, "effort", "high"), WAIT)
    assert {o.id: o.current for o in options} == {"verbosity": "normal", "effort": "high"}
    info = await agent.load_session(session, str(tmp_path))
    assert info.models is not None and info.models.current == "echo-smart"
    with pytest.raises(AgentError, match="unknown model: nope"):
        await agent.set_model(session, "nope")
    with pytest.raises(AgentError, match=r"^session/set_config_option failed: invalid value"):
        await agent.set_config_option(session, "effort", "extreme")
    requests: dict[str, Any] = {}
    for entry in read_log(log):
        if "method" in entry:  # (the agent also logs events of its own)
            requests.setdefault(entry["method"], entry.get("params"))  # first of each method
    assert requests["session/set_model"] == {"sessionId": session, "modelId": "echo-smart"}
    assert requests["session/set_config_option"] == {
        "sessionId": session,
        "configId": "effort",
        "value": "high",
    }
    init = requests["initialize"]
    assert init["protocolVersion"] == 1
    assert init["clientCapabilities"]["fs"] == {"readTextFile": False, "writeTextFile": False}


async def test_agent_process_sends_prompt_text_exactly(start: Starter, tmp_path: Path) -> None:
    """The agent receives the prompt text byte-for-byte as one text block."""
    log = tmp_path / "log.jsonl"
    agent, _ = await start(log=log)
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    text = 'line one\n\n  "quoted" \\ tab\t emoji 🚀 nul-free\r\nend'
    await run(agent, session, text)
    [prompt] = [e for e in read_log(log) if e.get("method") == "session/prompt"]
    assert prompt == {"method": "session/prompt", "sessionId": session, "text": text}


async def test_agent_process_translates_scripted_updates(start: Starter, tmp_path: Path) -> None:
    """Thoughts, plans, usage, agent launches, config updates; user/unknown chunks dropped."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    script = "\n".join(
        [
            "/think hmm",
            "/plan a|b|c",
            "/usage 53000 200000",
            "/user ignored",
            '/raw {"sessionUpdate": "brand_new", "x": 1}',
            "/agent-tool a1",
            "/tool a1 none completed",
            '/raw {"sessionUpdate": "agent_message_chunk", "messageId": "m-1",'
            ' "content": {"type": "text", "text": "hi"}}',
            "/config-update",
        ]
    )
    assert await run(agent, session, script) is StopReason.END_TURN
    launch, done = rec.updates[3], rec.updates[4]
    assert rec.updates[:3] == [
        ThoughtChunk(text="hmm"),
        PlanUpdate(entries=["a", "b", "c"]),
        UsageUpdate(used=53000, size=200000),
    ]
    assert launch == ToolCallUpdate(
        id="a1",
        title="Task",
        status="pending",
        kind="other",
        agent_input={k: v for k, v in AGENT_LAUNCH_INPUT.items() if k != "secret_blob"},
    )
    assert done == ToolCallUpdate(
        id="a1", title="Task", status="completed", kind="other", agent_input=None
    )
    assert rec.updates[5] == TextChunk(message_id="m-1", text="hi")
    config = rec.updates[6]
    assert isinstance(config, ConfigOptionsUpdate)
    assert [o.id for o in config.options] == ["verbosity", "effort"]
    assert len(rec.updates) == 7


async def test_agent_process_refuses_client_side_methods(start: Starter, tmp_path: Path) -> None:
    """fs/* and terminal/* requests from the agent are answered -32601."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    await run(agent, session, "/request fs/read_text_file\n/request terminal/create")
    assert rec.text() == (
        "error -32601: method not found: fs/read_text_file"
        "error -32601: method not found: terminal/create"
    )


async def test_agent_process_many_turns_in_a_row(start: Starter, tmp_path: Path) -> None:
    """Back-to-back turns each return after all their updates were delivered."""
    agent, rec = await start()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    for i in range(30):
        await run(agent, session, f"/chunks 3\n/text {i}")
        assert rec.text().endswith(f"chunk-2 {i}")


async def test_agent_process_keeps_order_when_the_handler_makes_updates_wait(
    start: Starter, tmp_path: Path
) -> None:
    """An update the handler can't take at once waits in `on_update`; the ones behind it queue
    behind it rather than being taken in place, so the handler still sees wire order."""
    agent, rec = await start()
    rec.declines = lambda update: isinstance(update, TextChunk) and update.text == "chunk-3 "
    rec.slow = 0.01
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    await run(agent, session, "/chunks 40\n/text x")
    assert rec.text() == "".join(f"chunk-{i} " for i in range(40)) + "x"
    # chunk-3 and whatever arrived while it waited went through the queue; not all of them.
    assert 0 < rec.queued < 41


async def test_agent_process_stops_reading_while_too_many_updates_wait(
    start: Starter, tmp_path: Path
) -> None:
    """While the handler keeps updates waiting, c2 stops reading the agent once
    MAX_QUEUED_UPDATES are queued (the agent then blocks on its full pipe) instead of holding
    all it says in memory; reading resumes as they drain, nothing lost, wire order kept."""
    agent, rec = await start()
    rec.declines = lambda update: True
    rec.gate.clear()
    session = (await agent.new_session(str(tmp_path))).acp_session_id
    chunks = 20_000
    turn = asyncio.create_task(agent.prompt(session, f"/chunks {chunks}\n/text x"))
    peak = steady = 0
    while steady < 10:  # until what c2 holds has not grown for 0.5 s
        await asyncio.sleep(0.05)
        held = agent._updates.qsize()  # the agent's output read and not yet handled
        steady = steady + 1 if held <= peak else 0
        peak = max(peak, held)
    # At most the bound plus the rest of the read that crossed it.
    assert MAX_QUEUED_UPDATES <= peak < chunks // 4
    assert not turn.done()
    rec.gate.set()
    assert await asyncio.wait_for(turn, WAIT) == StopReason.END_TURN
    assert rec.text() == "".join(f"chunk-{i} " for i in range(chunks)) + "x"


async def test_agent_process_start_missing_command(tmp_path: Path) -> None:
    """A missing command fails start with a message naming it."""
    spec = LaunchSpec("c2-no-such-agent-command", [], dict(os.environ), str(tmp_path))
    with pytest.raises(AgentError, match=r"^command not found: c2-no-such-agent-command$"):
        await AgentProcess.start(spec, Recorder())


async def test_agent_process_start_command_not_executable(tmp_path: Path) -> None:
    """A command that is there but may not be run fails start as exec would, before anything
    starts, for a bare name found through the agent's PATH and for a path from its directory."""
    script = tmp_path / "bin" / "c2-not-executable"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    env = {**os.environ, "PATH": f"{script.parent}{os.pathsep}{os.environ['PATH']}"}
    for command in ("c2-not-executable", "bin/c2-not-executable"):
        spec = LaunchSpec(command, [], env, str(tmp_path))
        with pytest.raises(AgentError, match=f"^command not executable: {command}$"):
            await AgentProcess.start(spec, Recorder())


async def test_agent_process_start_finds_a_relative_command_from_its_directory(
    tmp_path: Path,
) -> None:
    """A command with a slash is found from the agent's working directory, not the server's
    (as exec in the child finds it); a bare name through the PATH the agent is given."""
    agent = tmp_path / "bin" / "agent"
    agent.parent.mkdir()
    agent.write_text(f"#!/bin/sh\nexec {sys.executable} -m tests.agents.scripted_agent\n")
    agent.chmod(0o755)
    base = launch_spec(tmp_path)
    env = {**base.env, "PATH": f"{agent.parent}{os.pathsep}{os.environ['PATH']}"}
    for command in ("bin/agent", "agent"):
        spec = LaunchSpec(command, [], env, str(tmp_path))
        started = await AgentProcess.start(spec, Recorder())
        try:
            assert started.alive_process
        finally:
            await started.close(grace=1.0)


async def test_agent_process_start_missing_cwd(tmp_path: Path) -> None:
    """A missing working directory fails start clearly."""
    spec = LaunchSpec(sys.executable, [], dict(os.environ), str(tmp_path / "gone"))
    with pytest.raises(AgentError, match="working directory not found"):
        await AgentProcess.start(spec, Recorder())


async def test_agent_process_start_initialize_timeout(tmp_path: Path) -> None:
    """An agent that never answers initialize is killed and start fails."""
    log = tmp_path / "pid"
    code = f"import os, time; open({str(log)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    spec = LaunchSpec(sys.executable, ["-c", code], dict(os.environ), str(tmp_path))
    with pytest.raises(AgentError, match=r"^initialize failed: no answer within 0.5 s$"):
        await asyncio.wait_for(AgentProcess.start(spec, Recorder(), initialize_timeout=0.5), WAIT)
    assert await wait_gone(int(log.read_text()))


async def test_agent_process_start_agent_exits_during_initialize(tmp_path: Path) -> None:
    """An agent exiting before initialize reports its exit code and last stderr line."""
    code = "import sys; sys.stderr.write('warming up\\nbad config\\n'); sys.exit(2)"
    spec = LaunchSpec(sys.executable, ["-c", code], dict(os.environ), str(tmp_path))
    with pytest.raises(AgentError) as info:
        await asyncio.wait_for(AgentProcess.start(spec, Recorder()), WAIT)
    assert str(info.value) == "initialize failed: agent exited (code 2): bad config"
