"""HTTP methods through a real uvicorn: HEAD wherever GET is (api/head.py), and a 405 that
names every method its resource allows (RFC 9110 §9.1, §15.5.6).

HEAD is checked on a raw socket: a client library that knows HEAD has no body would read
past stray body bytes, but on a kept-alive connection they would open the next response."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import closing
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import LiveServer, OpenStream, ServerFactory

Answer = tuple[int, dict[str, str], bytes]  # status, headers (names lower-case), body


class Connection:
    """One kept-alive HTTP/1.1 connection, read by hand."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host = f"{parts.hostname}:{parts.port}"
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        self.buffer = b""

    def request(
        self, method: str, path: str, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request; its status, headers (lower-case names) and body. A HEAD
        response's body is what arrived with its head: it must be nothing."""
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        assert status_line.startswith("HTTP/1.1 "), f"a response began with {head[:80]!r}"
        fields = dict(line.split(": ", 1) for line in header_lines)
        fields = {name.lower(): value for name, value in fields.items()}
        if method == "HEAD":
            body, self.buffer = self.buffer, b""
        else:
            size = int(fields["content-length"])
            while len(self.buffer) < size:
                self._fill()
            body, self.buffer = self.buffer[:size], self.buffer[size:]
        return int(status_line.split()[1]), fields, body

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        assert data, "the server closed the connection"
        self.buffer += data


@pytest.fixture
def connection(live_server: LiveServer) -> Iterator[Connection]:
    conn = Connection(live_server.base_url)
    with closing(conn.sock):
        yield conn


# (path, authenticated): reads of every kind, the web client and the docs, a problem answer.
READS = [
    ("/healthz", False),
    ("/readyz", False),
    ("/", False),
    ("/sw.js", False),
    ("/docs", False),
    ("/openapi.json", False),
    ("/v1/sessions", True),
    ("/v1/devices", True),
    ("/v1/sessions/no-such-session", True),
    ("/v1/sessions", False),
]


def test_head_answers_every_get_with_its_status_and_headers_and_no_body(
    live_server: LiveServer, connection: Connection
):
    """HEAD gives the status, type and length GET gives, and not a byte of the body: the
    next request on the same connection reads its own response."""
    for path, authenticated in READS:
        headers = live_server.headers if authenticated else {}
        status, fields, body = connection.request("GET", path, headers)
        head_status, head_fields, head_body = connection.request("HEAD", path, headers)
        assert (head_status, head_body) == (status, b""), path
        assert head_fields["content-type"] == fields["content-type"], path
        assert head_fields.get("content-length") == fields["content-length"], path
        assert int(fields["content-length"]) == len(body) > 0, path
    assert connection.request("GET", "/healthz", {})[0] == 200  # after the last HEAD, too


async def test_head_of_the_event_stream_sends_its_headers_and_opens_no_stream(
    servers: ServerFactory, open_stream: OpenStream
):
    """HEAD /v1/events answers the stream's headers and ends: the connection serves the next
    request, and no stream was opened (a device capped at one stream still opens its one)."""
    live = servers.start(max_streams_per_device=1)
    conn = Connection(live.base_url)
    with closing(conn.sock):
        for _ in range(3):
            status, fields, body = conn.request("HEAD", "/v1/events", live.headers)
            assert (status, body) == (200, b"")
            assert fields["content-type"].startswith("text/event-stream")
            assert fields["cache-control"] == "no-store"
        assert conn.request("GET", "/healthz", {})[0] == 200
    stream = await open_stream(live)
    assert (await stream.next()) is not None


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PATCH", "/v1/sessions", "GET, HEAD, POST"),
        ("DELETE", "/healthz", "GET, HEAD"),
        ("PUT", "/", "GET, HEAD"),
        ("GET", "/v1/ops", "POST"),
        ("HEAD", "/v1/ops", "POST"),
        ("GET", "/v1/sessions/s1/queue/resume", "POST"),  # not /queue/{item_id}'s methods
    ],
)
def test_method_not_allowed_names_every_method_of_the_resource(
    live_server: LiveServer, method: str, path: str, allowed: str
):
    with httpx.Client(base_url=live_server.base_url, headers=live_server.headers) as client:
        resp = client.request(method, path)
    assert resp.status_code == 405
    assert resp.headers["allow"] == allowed
    if method != "HEAD":
        assert resp.json()["code"] == "method_not_allowed"
