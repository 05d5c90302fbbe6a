"""A stand-in cluster member for relay tests (issue 18): a row in the registry with a long
lease and an advertised URL this test process serves, so a real member relays to it.

What it does with a relayed request is the test's: `before` runs first (e.g. moves the
session's ownership in the database, as an adoption elsewhere would), then the request is
passed on verbatim (the relaying member's key included) to a real member `via`, whose answer
goes back. A ghost without a server (`serve=False`) advertises a port nothing listens on: a
dead owner whose lease has not run out yet.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from c2.core.store.cluster import ClusterRepository
from tests.ports import free_port

GHOST_ID = "ghost-member"
GHOST_LEASE_SECONDS = 600.0  # outlives any test: it is never taken over meanwhile
_HOP = {"host", "content-length", "content-encoding", "connection", "transfer-encoding"}


def sql(database_url: str, statement: str, **params: Any) -> Any:
    """Run one statement on the cluster's schema; its first column of the first row."""
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement), params)
            row = result.first() if result.returns_rows else None
    finally:
        engine.dispose()
    return None if row is None else row[0]


def cluster_key(database_url: str) -> str:
    return str(sql(database_url, "SELECT value FROM cluster_settings WHERE name = 'secret'"))


def set_owner(database_url: str, session: str, owner: str) -> None:
    sql(database_url, "UPDATE sessions SET owner = :o WHERE id = :s", o=owner, s=session)


class Ghost:
    """The relayed requests it received (method, path) and their headers (names lower-case),
    in order."""

    def __init__(self, via: str | None = None, before: Callable[[], None] | None = None) -> None:
        self.via, self.before = via, before
        self.received: list[tuple[str, str]] = []
        self.headers: list[dict[str, str]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def answer(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> httpx.Response:
        self.received.append((method, path))
        self.headers.append({k.lower(): v for k, v in headers.items()})
        if self.before is not None:
            self.before()
        assert self.via is not None
        kept = {k: v for k, v in headers.items() if k.lower() not in _HOP}
        return httpx.request(method, self.via + path, headers=kept, content=body, timeout=60)


@contextmanager
def ghost_member(database_url: str, ghost: Ghost, *, serve: bool = True) -> Iterator[Ghost]:
    """`ghost` registered (and, with `serve`, answering) for the block; unregistered after."""
    server: ThreadingHTTPServer | None = None
    if serve:
        server = ThreadingHTTPServer(("127.0.0.1", ghost.port), _handler(ghost))
        threading.Thread(target=server.serve_forever, daemon=True).start()
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            ClusterRepository(conn).register(GHOST_ID, ghost.url, GHOST_LEASE_SECONDS)
        yield ghost
    finally:
        with engine.begin() as conn:
            ClusterRepository(conn).leave(GHOST_ID)
        engine.dispose()
        if server is not None:
            server.shutdown()
            server.server_close()


def _handler(ghost: Ghost) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _relay(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            answer = ghost.answer(self.command, self.path, dict(self.headers.items()), body)
            self.send_response(answer.status_code)
            for name, value in answer.headers.items():
                if name.lower() not in _HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def do_GET(self) -> None:
            self._relay()

        def do_POST(self) -> None:
            self._relay()

        def do_DELETE(self) -> None:
            self._relay()

        def log_message(self, *_args: Any) -> None:
            return

    return Handler
