"""A real `c2 serve` subprocess plus a small HTTP/SSE client, for engine e2e tests.

The server runs exactly as a user runs it (CLI, SQLite home, real agent subprocesses), so
restart and process-hygiene tests observe the real thing. The scripted test agent is
registered as `{"custom":"scripted"}` (loadSession on) and `{"custom":"scripted_noload"}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx

from c2.core.home import pair_device
from c2.core.scopes import ALL_SCOPES
from c2.core.store.database import sqlite_url
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[2]
SCRIPTED = {"custom": "scripted"}


def write_providers(home: Path) -> Path:
    """Register the scripted agent in `home/providers.toml`; returns the agent log path."""
    log = home / "agent.log"
    env = f'{{ PYTHONPATH = "{REPO}", SCRIPTED_AGENT_LOG = "{log}"'
    (home / "providers.toml").write_text(
        f"""
[providers.scripted]
command = "{sys.executable}"
args = ["-m", "tests.agents.scripted_agent"]
env = {env}, SCRIPTED_AGENT_LOAD = "1" }}

[providers.scripted_noload]
command = "{sys.executable}"
args = ["-m", "tests.agents.scripted_agent"]
env = {env}, SCRIPTED_AGENT_LOAD = "0" }}

[providers.scripted_child]
command = "{sys.executable}"
args = ["-m", "tests.agents.scripted_agent"]
env = {env}, SCRIPTED_AGENT_SPAWN_CHILD = "1" }}

[providers.scripted_always]
command = "{sys.executable}"
args = ["-m", "tests.agents.scripted_agent"]
env = {env}, SCRIPTED_AGENT_ALWAYS = "1", SCRIPTED_AGENT_LOAD = "0" }}
""",
        encoding="utf-8",
    )
    return log


class C2Process:
    """One `c2 serve` process bound to a home folder; restartable on the same home."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.extra_env = env or {}
        home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.agent_log = write_providers(home)
        self.bearer = ""
        self.ready_seconds = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's stderr (its log), across every start on this home."""
        return self.home / "server.log"

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return ""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("C2_DATABASE_URL", None)
        env["PYTHONPATH"] = str(REPO)
        env.update(self.extra_env)
        return env

    def start(self, poll: float = 0.1) -> None:
        """Run `c2 serve` and wait for /readyz (probed every `poll` s); `ready_seconds` is how
        long that took from the exec (bench/startup.py reports it)."""
        began = time.monotonic()
        # Kept in the home (appended across restarts) for a failing test to show; the child
        # holds its own descriptor, so ours closes once it is spawned.
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "c2.api.cli",
                    "serve",
                    "--home",
                    str(self.home),
                    "--port",
                    str(self.port),
                ],
                cwd=REPO,
                env=self._env(),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + 60  # generous: CI machines may be busy
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/readyz", timeout=1).status_code == 200:
                    break
            if self.proc.poll() is not None:
                raise RuntimeError(f"c2 serve exited with {self.proc.returncode}")
            time.sleep(poll)
        else:
            raise RuntimeError("c2 serve did not become ready")
        self.ready_seconds = time.monotonic() - began
        if not self.bearer:
            self.bearer = self._pair()

    def _pair(self) -> str:
        """A bearer for the tests, paired directly in the home's database as `c2 pair` does
        (core/home.py `pair_device`) but without starting a second interpreter, which costs
        seconds on a busy machine; `c2 pair` itself is tested in tests/e2e/test_auth.py."""
        database_url = self.extra_env.get("C2_DATABASE_URL") or sqlite_url(self.home)
        return pair_device(self.home, database_url, "tests", ALL_SCOPES).bearer

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None

    def agent_log_lines(self) -> list[dict[str, Any]]:
        if not self.agent_log.exists():
            return []
        lines = self.agent_log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


class Client:
    """Thin async client over the c2 HTTP API."""

    def __init__(self, server: C2Process) -> None:
        self.server = server
        self.http = httpx.AsyncClient(
            base_url=server.base_url,
            headers={"Authorization": f"Bearer {server.bearer}"},
            timeout=httpx.Timeout(30.0),
            # The server closes a connection idle for 5 s (keep_alive_seconds), httpx keeps one
            # for 5 s: a request sent on it at that moment fails with ReadError (a test that
            # waited out a 5 s grace period did). Pooled connections retire well before.
            limits=httpx.Limits(keepalive_expiry=2.0),
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def new_session(self, cwd: str | Path, **fields: Any) -> dict[str, Any]:
        body = {"provider": SCRIPTED, "cwd": str(cwd), "use_worktree": False, **fields}
        resp = await self.http.post("/v1/sessions", json=body)
        assert resp.status_code == 201, resp.text
        data: dict[str, Any] = resp.json()
        return data

    async def prompt(
        self, session: str, text: str, request_id: str | None = None
    ) -> httpx.Response:
        body: dict[str, Any] = {"doc": [{"type": "text", "text": text}]}
        if request_id is not None:
            body["request_id"] = request_id
        return await self.http.post(f"/v1/sessions/{session}/prompt", json=body)

    async def answer(self, session: str, input_id: str, option: str | None) -> httpx.Response:
        return await self.http.post(
            f"/v1/sessions/{session}/permissions/{input_id}", json={"option_id": option}
        )

    async def snapshot(self, session: str) -> dict[str, Any]:
        resp = await self.http.get(f"/v1/sessions/{session}")
        assert resp.status_code == 200, resp.text
        data: dict[str, Any] = resp.json()
        return data


class EventReader:
    """Reads `GET /v1/events` frames; `events` collects every protocol event seen."""

    def __init__(self, client: Client, *, session: str | None = None, after: int | None = None):
        self.client = client
        self.params: dict[str, Any] = {}
        if session is not None:
            self.params["session"] = session
        if after is not None:
            self.params["after"] = after
        self.frames: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.ids: list[int] = []
        self._stack = contextlib.AsyncExitStack()
        self._lines: AsyncIterator[str] | None = None

    async def __aenter__(self) -> EventReader:
        resp = await self._stack.enter_async_context(
            self.client.http.stream("GET", "/v1/events", params=self.params, timeout=None)
        )
        assert resp.status_code == 200, (resp.status_code, await resp.aread())
        self._lines = resp.aiter_lines()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def frame(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next data frame (records SSE ids and protocol events)."""
        assert self._lines is not None
        data: dict[str, Any] | None = None
        seq: int | None = None
        with anyio.fail_after(timeout):
            async for line in self._lines:
                if line.startswith("id:"):
                    seq = int(line[3:].strip())
                elif line.startswith("data:"):
                    data = json.loads(line[5:].strip())
                elif line == "" and data is not None:
                    break
        assert data is not None, "stream ended"
        self.frames.append(data)
        if data.get("kind") == "event":
            self.events.append(data["event"])
            assert seq is not None
            self.ids.append(seq)
        return data

    async def until(self, predicate: Any, timeout: float = 15.0) -> dict[str, Any]:
        """Read frames until an event satisfies `predicate`; returns that event."""
        try:
            with anyio.fail_after(timeout):
                while True:
                    frame = await self.frame(timeout)
                    if frame.get("kind") == "event" and predicate(frame["event"]):
                        return dict(frame["event"])
        except TimeoutError:
            # Say what did arrive: a failing run on a busy machine is otherwise mute.
            raise TimeoutError(f"not within {timeout} s; events seen: {self.names()}") from None

    async def until_event(self, name: str, timeout: float = 15.0, **match: Any) -> dict[str, Any]:
        return await self.until(
            lambda e: e["event"] == name and all(e.get(k) == v for k, v in match.items()),
            timeout,
        )

    def names(self, session: str | None = None) -> list[str]:
        return [e["event"] for e in self.events if session is None or e.get("session") == session]

    def events_of(self, session: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("session") == session]


async def poll_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until `predicate()` holds; for state outside this process (pids, log files)."""
    with anyio.fail_after(timeout):
        while not predicate():  # noqa: ASYNC110 - nothing to await: the state is external
            await anyio.sleep(0.02)
