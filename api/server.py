"""uvicorn, run our way: one worker, c2's shutdown order, and a start-up announcement.

On shutdown the app drains first (ops refused, turns ended, agents closed, streams ended)
so uvicorn's wait for open connections never hangs on an endless SSE stream. A SIGTERM that
led to a clean drain is a clean exit (status 0), not a death by the re-raised signal.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
from collections.abc import Awaitable, Callable, Generator

import uvicorn
from fastapi import FastAPI
from sse_starlette.sse import AppStatus

from api.routes.events import UnfinishedStreamFilter
from api.services import Services
from api.settings import Settings

OnStarted = Callable[["C2Server"], Awaitable[None]]


class C2Server(uvicorn.Server):
    def __init__(
        self, config: uvicorn.Config, app: FastAPI, on_started: OnStarted | None = None
    ) -> None:
        super().__init__(config)
        self.app, self.on_started = app, on_started
        self.drained_cleanly = False

    @property
    def services(self) -> Services | None:
        return getattr(self.app.state, "services", None)

    @property
    def bound(self) -> tuple[str, int]:
        """The host and port actually listened on (port 0 resolves here)."""
        sock = self.servers[0].sockets[0]
        host, port = sock.getsockname()[:2]
        return str(host), int(port)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit and self.on_started is not None:
            await self.on_started(self)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        services = self.services
        if services is not None:
            await services.drain()
            self.drained_cleanly = True
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # uvicorn re-raises the captured signals once served, so SIGTERM would end the process
        # with status -15 even after a clean drain. SIGTERM is how c2 is asked to stop: once
        # the drain completed it is not re-raised. SIGINT keeps uvicorn's behaviour.
        with super().capture_signals():
            yield
            if self.drained_cleanly:
                captured: list[int] = self._captured_signals
                captured[:] = [sig for sig in captured if sig != signal.SIGTERM]


def build_server(
    app: FastAPI,
    settings: Settings,
    *,
    on_started: OnStarted | None = None,
    log_level: str = "info",
    access_log: bool = True,
) -> C2Server:
    # Streams end through Services.drain (after the engine's last events were delivered), each
    # with a proper end of body; sse-starlette's own signal hook would cut them mid-response.
    AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        workers=1,
        lifespan="on",
        log_level=log_level,
        access_log=access_log,
        proxy_headers=False,  # the peer address counts pairing attempts; never trust headers
        server_header=False,
        timeout_graceful_shutdown=int(max(1, settings.shutdown_grace_seconds)),
    )
    # After uvicorn.Config, which (re)configures uvicorn's loggers.
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, UnfinishedStreamFilter) for f in error_log.filters):
        error_log.addFilter(UnfinishedStreamFilter())
    return C2Server(config, app, on_started)


def url_host(host: str) -> str:
    """A host usable in a URL: wildcard binds become loopback, IPv6 gets brackets."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
