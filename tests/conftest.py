"""Shared fixtures: a real uvicorn serving the real app on 127.0.0.1:0, in a background thread.

The server runs in this process so a test can commit events through the app's own Store
(`LiveServer.emit`) and observe what clients receive; it is restartable on the same home
and database for restart tests. Each server has its own temp home and SQLite database.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest

from c2.api.app import create_app
from c2.api.server import C2Server, build_server
from c2.api.services import Services
from c2.api.settings import Settings
from c2.core.auth import PairedDevice, create_device
from c2.core.protocol.events import ErrorEvent, Event
from c2.core.scopes import ALL_SCOPES, Scope
from c2.core.store.database import UnitOfWork, sqlite_url

T = TypeVar("T")
START_TIMEOUT = 30.0


def make_settings(home: Path, **overrides: Any) -> Settings:
    """Test settings: temp home, its own SQLite file, an ephemeral loopback port."""
    base = Settings(home=home, database_url=sqlite_url(home), host="127.0.0.1", port=0)
    return replace(base, **overrides)


@dataclass
class LiveServer:
    """One running server; `bearer` belongs to a device paired at first start."""

    settings: Settings
    server: C2Server
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop
    base_url: str
    bearer: str = ""
    device_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.settings.home

    @property
    def services(self) -> Services:
        services = self.server.services
        assert services is not None
        return services

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.bearer}"}

    def call(self, make: Callable[[], Awaitable[T]], timeout: float = 15.0) -> T:
        """Run a coroutine on the server's event loop and wait (bounded) for its result."""

        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    async def acall(self, make: Callable[[], Awaitable[T]], timeout: float = 15.0) -> T:
        """`call` for async tests: waits without blocking the test's own loop."""
        return await asyncio.to_thread(self.call, make, timeout)

    def pair(self, name: str, scopes: frozenset[Scope] = ALL_SCOPES) -> PairedDevice:
        """A new device with `scopes`, minted in the store like `c2 pair` does."""
        return self.call(
            lambda: self.services.store.write(lambda uow: create_device(uow, name, scopes))
        )

    def emit(self, *events: Event) -> list[int]:
        """Commit `events` through the app's Store in one transaction; their sequences.

        Read back from the log: tests using it are the only writers while they emit.
        """
        store = self.services.store

        async def run() -> list[int]:
            before = await store.read(lambda r: r.events.last_seq())

            def emit_all(uow: UnitOfWork) -> None:
                for ev in events:
                    uow.emit(ev)

            await store.write(emit_all)
            rows = await store.read(lambda r: r.events.after(before, limit=len(events)))
            return [row.seq for row in rows]

        return self.call(run)

    def emit_errors(self, count: int, *, session: str | None = None, size: int = 0) -> list[int]:
        """Commit `count` error events (each its own transaction); their sequences."""
        pad = "x" * size
        seqs: list[int] = []
        for i in range(count):
            seqs += self.emit(ErrorEvent(session=session, message=f"e{i} {pad}", terminal=False))
        return seqs

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=START_TIMEOUT)
        assert not self.thread.is_alive(), "server did not stop"


def start_server(settings: Settings, *, bearer: str = "", device_id: str = "") -> LiveServer:
    """Start uvicorn with the app for `settings` in a thread; pair a device unless given."""
    app = create_app(settings)
    started = threading.Event()
    box: dict[str, Any] = {}

    async def on_started(server: C2Server) -> None:
        box["loop"] = asyncio.get_running_loop()
        started.set()

    server = build_server(app, settings, on_started=on_started, log_level="warning")
    server.config.access_log = False

    def run() -> None:
        try:
            server.serve_here()  # on the loop `c2 serve` runs
        except BaseException as exc:  # surfaced by the waiting test
            box["error"] = exc
        finally:
            started.set()

    thread = threading.Thread(target=run, name="c2-live-server", daemon=True)
    thread.start()
    if not started.wait(START_TIMEOUT) or "loop" not in box:
        raise RuntimeError(f"server did not start: {box.get('error')!r}")
    host, port = server.bound
    live = LiveServer(settings, server, thread, box["loop"], f"http://{host}:{port}")
    if bearer:
        live.bearer, live.device_id = bearer, device_id
    else:
        paired = live.pair("tests")
        live.bearer, live.device_id = paired.bearer, paired.device_id
    return live


class ServerFactory:
    """Starts servers (fresh or on an existing home) and stops whatever is left at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self._tmp = tmp_path
        self._running: list[LiveServer] = []
        self._count = 0

    def start(self, **overrides: Any) -> LiveServer:
        self._count += 1
        home = self._tmp / f"home{self._count}"
        home.mkdir(mode=0o700)
        live = start_server(make_settings(home, **overrides))
        self._running.append(live)
        return live

    def restart(self, live: LiveServer) -> LiveServer:
        """Stop `live` and start a new server on the same home and database (same bearer)."""
        if live.thread.is_alive():
            live.stop()
        again = start_server(live.settings, bearer=live.bearer, device_id=live.device_id)
        self._running.append(again)
        return again

    def close(self) -> None:
        for live in self._running:
            if live.thread.is_alive():
                live.stop()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[ServerFactory]:
    factory = ServerFactory(tmp_path)
    yield factory
    factory.close()


@pytest.fixture
def live_server(servers: ServerFactory) -> LiveServer:
    """A running server with default settings and a paired bearer."""
    return servers.start()


# -- SSE reading -------------------------------------------------------------------------------


@dataclass
class Frame:
    data: dict[str, Any]
    id: int | None

    @property
    def kind(self) -> str:
        return str(self.data["kind"])


class SSEClient:
    """Reads one `GET /v1/events` response frame by frame (comments are kept separately)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.comments: list[str] = []
        self._lines = response.aiter_lines()

    async def next(self, timeout: float = 10.0) -> Frame | None:
        """The next data frame; None when the stream ended."""
        data: list[str] = []
        seq: int | None = None
        with anyio.fail_after(timeout):
            async for line in self._lines:
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                elif line.startswith("id:"):
                    seq = int(line[3:].strip())
                elif line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif line == "" and data:
                    return Frame(json.loads("\n".join(data)), seq)
        return None

    async def events(self, count: int, timeout: float = 10.0) -> list[Frame]:
        """The next `count` event frames (fails on any other kind)."""
        frames: list[Frame] = []
        with anyio.fail_after(timeout):
            while len(frames) < count:
                frame = await self.next(timeout)
                assert frame is not None, f"stream ended after {len(frames)} of {count} events"
                assert frame.kind == "event", frame.data
                frames.append(frame)
        return frames


# `open_stream`'s opener: (live server, *, headers, params, expect) -> an SSEClient.
OpenStream = Callable[..., Coroutine[Any, Any, SSEClient]]


@pytest.fixture
async def open_stream() -> AsyncIterator[OpenStream]:
    """A stream opener: each call takes a live server (and headers, params, the expected
    status) and gives an SSEClient; all are closed at teardown."""
    async with AsyncExitStack() as stack:

        async def opener(
            live: LiveServer,
            *,
            headers: dict[str, str] | None = None,
            params: dict[str, Any] | None = None,
            expect: int = 200,
        ) -> SSEClient:
            client = await stack.enter_async_context(
                httpx.AsyncClient(base_url=live.base_url, timeout=httpx.Timeout(10.0, read=None))
            )
            response = await stack.enter_async_context(
                client.stream(
                    "GET",
                    "/v1/events",
                    headers=live.headers if headers is None else headers,
                    params=params,
                )
            )
            assert response.status_code == expect, response.status_code
            return SSEClient(response)

        yield opener
