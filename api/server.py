"""uvicorn, run our way: one worker, c2's shutdown order, bounded connections, an announcement.

On shutdown the app drains first (ops refused, turns ended, agents closed, streams ended)
so uvicorn's wait for open connections never hangs on an endless SSE stream. A SIGTERM that
led to a clean drain is a clean exit (status 0), not a death by the re-raised signal.
Connections are bounded (docs/security.md): a concurrency limit below the file-descriptor
limit (raised to its hard maximum at start), a deadline for every request head, a keep-alive
timeout and a header size limit; credentials are redacted from the access log.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import resource
import signal
import socket
from collections.abc import Awaitable, Callable, Generator
from importlib.util import find_spec

import uvicorn
from fastapi import FastAPI
from sse_starlette.sse import AppStatus

from c2.api.http11 import HeadDeadlineProtocol
from c2.api.logs import install_log_filters, uvicorn_log_config
from c2.api.services import Services
from c2.api.settings import Settings, url_host
from c2.api.sse_response import UnfinishedStreamFilter

log = logging.getLogger(__name__)
MAX_HEADER_BYTES = 16 * 1024  # request line plus headers; a bearer needs well under 1 KiB
# File descriptors kept back from the connection limit: agent pipes, the database, logs.
RESERVED_FDS = 256
# Allocations between young-generation collections (Python's default: 700); see
# freeze_startup_objects. Flat out (200,000 chunks) the collector took 0.75 s of the server's
# 9.5 s at 10,000 and 0.34 s at 50,000 (100,000: 0.19 s, but a ~19 ms pause per collection).
YOUNG_GC_THRESHOLD = 50_000
# uvloop where it installs (not Windows): each SSE frame is a socket write and a few loop
# callbacks, uvloop's fast path. bench/fleet.py showed a small gain (20x100: 17.0 -> 16.4 us of
# server CPU per frame on a loaded machine), not yet measured on an idle one.
LOOP = "uvloop" if find_spec("uvloop") is not None else "asyncio"

OnStarted = Callable[["C2Server"], Awaitable[None]]


def freeze_startup_objects() -> None:
    """Exempt what start-up built (modules, schemas, the app) from the collector's full passes,
    and collect the young generation less often.

    A full collection traverses every tracked object: with the ~240,000 of a started server it
    took ~0.25 s of CPU (the loop stalled as long), five times in a 14 s fleet run, a fifth of
    the server's CPU (bench/fleet.py --profile). Objects that live as long as the process never
    become garbage; after one collection (nothing cyclic left to free) they are moved to the
    permanent generation, and full passes only traverse what came after. Streaming allocates
    short-lived objects fast (a chunk's models, futures, closures): at the default threshold of
    700 the young collections ran ~40 times a second for ~0.5 ms each; most of those objects
    are freed by reference counting before a collection at 50,000 comes round. Only objects
    still alive, or cyclic garbage, count towards it, so it bounds the garbage left waiting.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, older, oldest)


def raise_fd_limit() -> int:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == hard:
        return soft if soft != resource.RLIM_INFINITY else 1 << 20
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
        return soft
    return hard


def connection_limit(settings: Settings, fd_limit: int) -> int:
    """uvicorn's limit_concurrency: the configured one, never past the descriptors we have."""
    return max(8, min(settings.max_connections, fd_limit - RESERVED_FDS))


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
        freeze_startup_objects()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        services = self.services
        if services is not None:
            await services.drain()
            self.drained_cleanly = True
        await super().shutdown(sockets)

    def serve_here(self) -> None:
        """Serve on this thread until told to exit, on the event loop `run` gives `c2 serve`
        (uvloop where it installs): for a server run in a thread of its own, as the benches
        and tests do. `asyncio.run(self.serve())` there would run asyncio's own loop, whose
        socket writes cost several times as much (docs/decisions.md, "twenty-first sitting")."""
        with asyncio.Runner(loop_factory=self.config.get_loop_factory()) as runner:
            runner.run(self.serve())

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
    protocol = type(
        "C2HttpProtocol",
        (HeadDeadlineProtocol,),
        {"header_timeout": settings.header_timeout_seconds},
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        workers=1,
        lifespan="on",
        log_level=log_level,
        log_config=uvicorn_log_config(),
        access_log=access_log,
        # The client address counts pairing and auth attempts: taken from X-Forwarded-For only
        # when the peer is one of the configured proxies, never from headers otherwise.
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=list(settings.trusted_proxies) or None,
        server_header=False,
        timeout_graceful_shutdown=int(max(1, settings.shutdown_grace_seconds)),
        http=protocol,
        loop=LOOP,
        limit_concurrency=connection_limit(settings, raise_fd_limit()),
        timeout_keep_alive=settings.keep_alive_seconds,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    # After uvicorn.Config, which (re)configures uvicorn's loggers. The dropped-stream filter
    # goes first: a line it drops must not count among OncePerInterval's repeats, whose
    # "(N more like this…)" suffix it would then no longer recognise.
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, UnfinishedStreamFilter) for f in error_log.filters):
        error_log.addFilter(UnfinishedStreamFilter())
    install_log_filters()
    return C2Server(config, app, on_started)


def listen_socket(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound before the app starts (as uvicorn would bind it),
    so a taken port is one line from `c2 serve` instead of a log after start-up."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """The one line `c2 serve` prints when it cannot bind `host:port`, saying what to change."""
    where = f"cannot listen on {url_host(host) if host else host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return f"{where}: the port is already in use (another c2?); choose one with --port"
    if exc.errno == errno.EACCES:
        return f"{where}: permission denied; choose a port above 1023 with --port"
    reason = exc.strerror or str(exc)
    return f"{where}: {reason}; check --host (an address of this machine, e.g. 127.0.0.1)"
