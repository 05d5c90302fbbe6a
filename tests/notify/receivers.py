"""Local HTTP receivers for notification tests: a webhook receiver that can be told to fail.

Each runs a ThreadingHTTPServer on a loopback port in a daemon thread, records every request
(headers and body) and answers with the status it is told to; tests wait on what it recorded
with bounded waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import anyio


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered


class Receiver:
    """Records POSTs; answers `status_for(n)` for the n-th request (0-based)."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self.fail_first = 0  # answer 500 to this many requests first
        self.failing = False  # answer 503 to every request while set
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                status = receiver.answer(self.path, dict(self.headers.items()), body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            if self.failing:
                status = 503
            elif self.fail_first > 0:
                self.fail_first -= 1
                status = 500
            else:
                status = self.status_for(headers, body)
            self.requests.append(Received(path, headers, body, status))
            return status

    def status_for(self, headers: dict[str, str], body: bytes) -> int:
        return 200

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    async def wait_for(
        self, predicate: Callable[[list[Received]], bool], timeout: float = 20.0
    ) -> list[Received]:
        """The recorded requests once `predicate` holds for them (bounded wait)."""
        with anyio.fail_after(timeout):
            while not predicate(self.snapshot()):  # noqa: ASYNC110 - another thread's state
                await anyio.sleep(0.02)
        return self.snapshot()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
