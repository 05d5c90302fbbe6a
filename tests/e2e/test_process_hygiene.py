"""Agent processes never outlive c2, turns always end (issue: hardening; real agents 10.6).

Real `c2 serve` subprocesses and real scripted agents: kill -9 and restart, agent crashes,
concurrent creates against the live-agent limit, ignored cancels, deletes of agents that
ignore EOF, SIGTERM. Pids are checked through /proc, with bounded waits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from c2.core.protocol.events import ErrorEvent
from tests.conftest import make_settings, start_server
from tests.e2e.harness import REPO, C2Process, Client, EventReader, poll_until
from tests.e2e.test_turns import alive, wait_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")


def add_provider(server: C2Process, name: str, **env: str) -> None:
    """Register one more scripted-agent provider (before the server starts)."""
    pairs = {"PYTHONPATH": str(REPO), "SCRIPTED_AGENT_LOG": str(server.agent_log), **env}
    table = ", ".join(f'{key} = "{value}"' for key, value in pairs.items())
    with (server.home / "providers.toml").open("a", encoding="utf-8") as f:
        f.write(
            f'\n[providers.{name}]\ncommand = "{sys.executable}"\n'
            f'args = ["-m", "tests.agents.scripted_agent"]\nenv = {{ {table} }}\n'
        )


def stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def agent_pids(server_pid: int) -> list[int]:
    """Running scripted agents whose parent is the server."""
    pids: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(int(entry))
        if fields is None or fields[0] == "Z" or int(fields[1]) != server_pid:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"tests.agents.scripted_agent" in cmdline:
            pids.append(int(entry))
    return pids


@pytest.fixture
def server(tmp_path: Path) -> Iterator[C2Process]:
    """A server of this test's own (not started), with extra providers registered."""
    c2 = C2Process(tmp_path / "home")
    add_provider(
        c2,
        "stubborn_close",
        SCRIPTED_AGENT_STUBBORN="1",
        SCRIPTED_AGENT_SESSION_CLOSE="1",
        SCRIPTED_AGENT_SPAWN_CHILD="1",
    )
    yield c2
    if c2.proc is not None and c2.proc.poll() is None:
        with_signal(c2.proc.pid, signal.SIGCONT)
    c2.stop()


def with_signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def log_entries(server: C2Process, event: str) -> list[dict[str, Any]]:
    return [e for e in server.agent_log_lines() if e.get("event") == event]


async def test_kill9_restart_leaves_no_process_of_the_old_agents(
    server: C2Process, workdir: Path
) -> None:
    """kill -9 of c2 with live agents (one with a grandchild, one blocked writing to a full
    stdout pipe): after a restart on the same home no process of those agents remains."""
    server.start()
    client = Client(server)
    hanging = (await client.new_session(workdir, provider={"custom": "scripted_child"}))["id"]
    idle = (await client.new_session(workdir, provider={"custom": "scripted_child"}))["id"]
    flooding = (await client.new_session(workdir))["id"]
    assert idle
    async with EventReader(client) as stream:
        await stream.frame()
        assert (await client.prompt(hanging, "/hang")).status_code == 202
        await stream.until_event("turn_started", session=hanging)
        assert (await client.prompt(flooding, "/flood 300")).status_code == 202
        await stream.until_event("turn_started", session=flooding)
    await client.aclose()
    await poll_until(lambda: bool(log_entries(server, "flood")))
    assert server.proc is not None
    leaders = agent_pids(server.proc.pid)
    grandchildren = [e["pid"] for e in log_entries(server, "child")]
    assert len(leaders) == 3 and len(grandchildren) == 2
    # Stop reading: the flooding agent fills its stdout pipe and blocks writing.
    os.kill(server.proc.pid, signal.SIGSTOP)
    await wait_flood_blocked(server)
    server.stop(sig=signal.SIGKILL)
    # The leaders die with the server (their parent-death signal, core/agents/stdio.py); the
    # grandchildren are nobody's to kill but the next server's.
    await wait_gone(*leaders, timeout=10)
    assert all(alive(pid) for pid in grandchildren)
    server.start()
    await wait_gone(*leaders, *grandchildren, timeout=10)


async def wait_flood_blocked(server: C2Process) -> None:
    """Until the flooding agent's progress stops moving (it is blocked on the full pipe)."""
    with anyio.fail_after(20):
        last = -1
        while True:
            written = log_entries(server, "flood")[-1]["written"]
            if written == last and written > 0:
                return
            last = written
            await anyio.sleep(0.3)


async def test_agent_crash_ends_its_children_at_once(server: C2Process, workdir: Path) -> None:
    """When an agent's leader dies, its whole process group goes with it, not at delete."""
    server.start()
    client = Client(server)
    sid = (await client.new_session(workdir, provider={"custom": "scripted_child"}))["id"]
    child = log_entries(server, "child")[-1]
    assert alive(child["pid"])
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/crash")
        assert (await stream.until_event("error"))["terminal"] is True
    await wait_gone(child["agent_pid"], child["pid"], timeout=5)
    await client.aclose()


async def test_concurrent_creates_respect_the_live_agent_limit(
    tmp_path: Path, workdir: Path
) -> None:
    """12 concurrent creates with 2 agent slots: never more than 2 agents; refusals are
    503 capacity with Retry-After."""
    server = C2Process(tmp_path / "home", env={"C2_MAX_LIVE_AGENTS": "2"})
    server.start()
    client = Client(server)
    body = {"provider": {"custom": "scripted"}, "cwd": str(workdir), "use_worktree": False}
    try:
        answers = await asyncio.gather(
            *(client.http.post("/v1/sessions", json=body) for _ in range(12))
        )
        created = [a for a in answers if a.status_code == 201]
        refused = [a for a in answers if a.status_code != 201]
        assert len(created) >= 2
        for answer in refused:
            assert answer.status_code == 503 and answer.json()["code"] == "capacity"
            assert int(answer.headers["Retry-After"]) > 0
        assert server.proc is not None
        pid = server.proc.pid
        await poll_until(lambda: len(agent_pids(pid)) == 2)
    finally:
        await client.aclose()
        server.stop()


async def test_concurrent_prompts_never_accept_more_turns_than_agent_slots(
    tmp_path: Path, workdir: Path
) -> None:
    """Prompts to sessions without a live agent, all at once, with 2 slots: each is accepted
    with a slot held for its agent, or refused 503 capacity before turn_started. An accepted
    turn never fails on capacity when its agent starts (the slot used to be counted only then,
    so one of three accepted turns failed 'all 2 live agents are busy')."""
    server = C2Process(tmp_path / "home", env={"C2_MAX_LIVE_AGENTS": "2"})
    server.start()
    client = Client(server)
    try:
        sessions = [(await client.new_session(workdir))["id"] for _ in range(6)]
        async with EventReader(client) as stream:
            await stream.frame()
            answers = await asyncio.gather(
                *(client.prompt(sid, "/text started\n/hang") for sid in sessions)
            )
            accepted = [
                sid for sid, a in zip(sessions, answers, strict=True) if a.status_code == 202
            ]
            for answer in answers:
                if answer.status_code != 202:
                    assert answer.status_code == 503, answer.text
                    assert answer.json()["code"] == "capacity"
            assert 1 <= len(accepted) <= 2
            # Each accepted turn's agent started and took the prompt.
            spoke: set[str] = set()
            while spoke != set(accepted):
                said = await stream.until(lambda e: e["event"] == "agent_text")
                spoke.add(said["session"])
        # (A non-terminal warning is expected: the scripted agent forgets an evicted session.)
        ended = [e for e in stream.events if e["event"] == "error" and e["terminal"]]
        assert [e for e in ended if e["session"] in accepted] == []
        # Each refusal is its prompt's terminal error, for its session.
        refused = {sid for sid in sessions if sid not in accepted}
        assert {e["session"] for e in ended} == refused
        assert {e["message"] for e in ended} == {"all 2 live agents are busy"}
    finally:
        await client.aclose()
        server.stop()


async def test_ignored_cancel_escalates_to_cancelled_and_restarts_the_agent(
    server: C2Process, workdir: Path
) -> None:
    """An agent ignoring session/cancel: after the grace period the turn ends `cancelled`,
    the agent is ended and the next prompt revives a new one."""
    server.start()
    client = Client(server)
    sid = (await client.new_session(workdir))["id"]
    assert server.proc is not None
    (agent,) = agent_pids(server.proc.pid)
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        # The agent speaks once it holds the prompt: a cancel before that never reaches it.
        await client.prompt(sid, "/text busy\n/ignore-cancel")
        await stream.until_event("agent_text")
        assert (await client.http.post(f"/v1/sessions/{sid}/cancel")).json()["cancelled"] is True
        ended = await stream.until_event("turn_ended", timeout=20)
    assert ended["stop_reason"] == "cancelled"
    assert "error" not in stream.names()
    assert (await client.snapshot(sid))["activity"]["state"]["kind"] == "idle"
    await wait_gone(agent)
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        assert (await client.prompt(sid, "again")).status_code == 202
        assert (await stream.until_event("turn_ended"))["stop_reason"] == "end_turn"
    await client.aclose()


async def test_delete_of_an_agent_ignoring_eof_sends_close_and_leaves_no_process(
    server: C2Process, workdir: Path
) -> None:
    """DELETE sends ACP session/close where advertised, answers without waiting for the
    agent, and the agent (ignoring EOF and SIGTERM) and its child are gone soon after."""
    server.start()
    client = Client(server)
    sid = (await client.new_session(workdir, provider={"custom": "stubborn_close"}))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "hello")
        await stream.until_event("turn_ended")
    child = log_entries(server, "child")[-1]
    acp_session = next(
        e["sessionId"] for e in server.agent_log_lines() if e.get("method") == "session/prompt"
    )
    started = time.monotonic()
    assert (await client.http.delete(f"/v1/sessions/{sid}")).status_code == 204
    elapsed = time.monotonic() - started
    print(f"DELETE of an agent ignoring EOF answered in {elapsed * 1000:.0f} ms")

    def closes() -> list[str]:
        lines = server.agent_log_lines()
        return [e["sessionId"] for e in lines if e.get("method") == "session/close"]

    await poll_until(lambda: bool(closes()))  # sent by the background close
    assert closes() == [acp_session]
    await wait_gone(child["agent_pid"], child["pid"], timeout=10)
    await client.aclose()


async def test_sigterm_exits_zero_after_a_clean_drain(server: C2Process, workdir: Path) -> None:
    """SIGTERM with a running turn: the server drains (agents ended) and exits with 0."""
    server.start()
    client = Client(server)
    sid = (await client.new_session(workdir, provider={"custom": "scripted_child"}))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.prompt(sid, "/hang")
        await stream.until_event("turn_started")
    await client.aclose()
    child = log_entries(server, "child")[-1]
    assert server.proc is not None
    server.proc.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(server.proc.wait, 30)
    assert code == 0
    await wait_gone(child["agent_pid"], child["pid"], timeout=5)


async def test_turn_ends_failed_on_an_unexpected_exception(tmp_path: Path, workdir: Path) -> None:
    """A turn task failing with an unexpected exception (MemoryError) still ends the turn:
    failed/provider_error, a terminal error, and the next prompt is accepted."""
    home = tmp_path / "home"
    C2Process(home)  # writes the scripted providers into the home
    live = await asyncio.to_thread(start_server, make_settings(home))
    compiler = live.services.engine.compiler

    async def out_of_memory(cwd: str, doc: Any) -> Any:
        raise MemoryError

    client = Client(live)  # type: ignore[arg-type]  # same base_url / bearer surface
    try:
        sid = (await client.new_session(workdir))["id"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            compiler.compile = out_of_memory  # type: ignore[method-assign]  # fault injection
            assert (await client.prompt(sid, "hello", request_id="p1")).status_code == 202
            error = await stream.until_event("error")
            del compiler.compile
            assert error["terminal"] is True and error["request_id"] == "p1"
            assert "MemoryError" in error["message"]
            state = (await client.snapshot(sid))["activity"]["state"]
            assert state["kind"] == "failed" and state["reason"] == "provider_error"
            assert (await client.prompt(sid, "again")).status_code == 202
            assert (await stream.until_event("turn_ended"))["stop_reason"] == "end_turn"
    finally:
        await client.aclose()
        await asyncio.to_thread(live.stop)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_stream_send_timeout_is_one_log_line(tmp_path: Path) -> None:
    """A stream client that stops reading is dropped after the send timeout with one log
    line and no traceback."""
    home = tmp_path / "home"
    home.mkdir()
    live = await asyncio.to_thread(
        start_server, make_settings(home, send_timeout_seconds=1.0, ping_seconds=0.5)
    )
    seen = Records()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "c2.api", "sse_starlette")]
    for logger in loggers:
        logger.addHandler(seen)
    host, port = live.base_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        head = f"GET /v1/events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {live.bearer}"
        sock.sendall(f"{head}\r\n\r\n".encode())
        big = "x" * 20_000
        with anyio.fail_after(60):
            while not any(r.name == "c2.api.sse_response" for r in seen.records):
                events = [ErrorEvent(session=None, message=big, terminal=False)] * 20
                await asyncio.to_thread(live.emit, *events)
            # Once the client goes too, the connection ends: nothing more can be logged for it.
            sock.close()
            while live.server.server_state.connections:  # noqa: ASYNC110 - server thread state
                await anyio.sleep(0.05)
    finally:
        sock.close()
        for logger in loggers:
            logger.removeHandler(seen)
        await asyncio.to_thread(live.stop)
    (line,) = [r for r in seen.records if r.levelno >= logging.WARNING]
    assert line.name == "c2.api.sse_response" and "read nothing" in line.getMessage()
    assert line.exc_info is None


async def test_a_slow_client_that_reads_on_is_not_dropped(tmp_path: Path) -> None:
    """A client on a slow link that keeps reading through bursts larger than it can take
    within the send timeout stays connected and gets every event: only a client that takes
    nothing for the whole timeout is dropped (every such reader used to be, logged as one
    that 'read nothing')."""
    home = tmp_path / "home"
    home.mkdir()
    live = await asyncio.to_thread(
        start_server, make_settings(home, send_timeout_seconds=1.0, ping_seconds=0.5)
    )
    seen = Records()
    logging.getLogger("c2.api").addHandler(seen)
    host, port = live.base_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    received = bytearray()
    # 12 MB in bursts of 2 MB, read at ~2 MB/s: past what the kernel's buffers hold, a send
    # waits for the client to drain seconds of backlog, longer than the timeout.
    burst = [ErrorEvent(session=None, message="z" * 20_000, terminal=False)] * 100
    bursts = 6
    try:
        head = f"GET /v1/events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {live.bearer}"
        sock.sendall(f"{head}\r\n\r\n".encode())
        while b'"kind":"sessions"' not in received:  # the stream is live: events reach it
            received.extend(await asyncio.to_thread(sock.recv, 65_536))

        def read_slowly() -> None:
            deadline, seen_events = time.monotonic() + 60, _events_in(received)
            while seen_events < bursts * len(burst) and time.monotonic() < deadline:
                piece = sock.recv(65_536)
                if not piece:
                    return  # dropped
                # Counted in what is new (a frame's start may straddle two reads), not in
                # all 12 MB each time: that held the GIL the server thread needs.
                start = max(0, len(received) - len(FRAME_START) + 1)
                received.extend(piece)
                seen_events += received.count(FRAME_START, start)
                time.sleep(0.03)

        reader = asyncio.create_task(asyncio.to_thread(read_slowly))
        for _ in range(bursts):
            await asyncio.to_thread(live.emit, *burst)
        await reader
    finally:
        sock.close()
        logging.getLogger("c2.api").removeHandler(seen)
        await asyncio.to_thread(live.stop)
    assert [r.getMessage() for r in seen.records if r.levelno >= logging.WARNING] == []
    assert _events_in(received) == bursts * len(burst)


FRAME_START = b'data: {"kind":"event"'


def _events_in(response: bytes | bytearray) -> int:
    """The event frames in an SSE response read so far (a frame never spans two chunks)."""
    return response.count(FRAME_START)
