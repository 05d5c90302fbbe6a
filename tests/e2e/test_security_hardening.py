"""Hardening found by a security review, through a real uvicorn (docs/security.md): stream
tickets and the failure limiter, request bodies that are never read or must arrive in time,
the head size limit, credentials in the access log, and bad input that must be a 422.

Connection-level checks use raw sockets: a client library would finish or fix what these
requests leave unfinished on purpose."""

from __future__ import annotations

import socket
import time
from contextlib import closing

import httpx
import pytest

from c2.api.logs import redact
from tests.conftest import LiveServer, OpenStream, ServerFactory
from tests.e2e.test_security import _problem, access_log_lines


def _connect(live: LiveServer, timeout: float = 10.0) -> socket.socket:
    host, port = live.server.bound
    return socket.create_connection((host, port), timeout=timeout)


def _response_head(sock: socket.socket) -> bytes:
    """Everything up to the end of the response head (a timeout fails the test)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response head: {data!r}"
        data += chunk
    return data


def _closed_by_server(sock: socket.socket, *, within: float, trickle: bool = False) -> bool:
    """Whether the server closes `sock` within `within` seconds (reading what it sends);
    with `trickle`, a body byte goes out every 0.1 s meanwhile, as a slowloris body does."""
    deadline = time.monotonic() + within
    sock.settimeout(0.1)
    while time.monotonic() < deadline:
        try:
            if trickle:
                sock.sendall(b" ")
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return True
    return False


# -- stream tickets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limits",
    [
        {"auth_failures_per_minute": 2},
        {"auth_failures_per_minute": 1000, "auth_failures_per_minute_total": 2},
    ],
    ids=["per-address", "global"],
)
async def test_valid_ticket_opens_a_stream_during_a_flood_of_failures(
    servers: ServerFactory, open_stream: OpenStream, limits: dict[str, int]
) -> None:
    """Past the failure budget (the address's own, or everyone's) a valid ticket still opens
    its stream; a bad one is still refused with 429."""
    live = servers.start(**limits)
    async with httpx.AsyncClient(base_url=live.base_url) as client:
        minted = await client.post("/v1/stream-tickets", headers=live.headers)
        ticket = minted.json()["ticket"]
        bad = {"Authorization": "Bearer bad"}
        statuses = [(await client.get("/v1/sessions", headers=bad)).status_code for _ in range(3)]
        assert statuses == [401, 401, 429]
        refused = await client.get("/v1/events", params={"ticket": "forged"})
        _problem(refused, 429, "rate_limited")
    stream = await open_stream(live, headers={}, params={"ticket": ticket})
    first = await stream.next()
    assert first is not None and first.kind == "sessions"


async def test_head_of_the_stream_does_not_spend_its_ticket(
    live_server: LiveServer, open_stream: OpenStream
) -> None:
    """HEAD /v1/events opens no stream, so it spends no ticket, yet answers as its GET would
    (200 with the stream's headers): the GET after it opens the stream with the same ticket."""
    async with httpx.AsyncClient(base_url=live_server.base_url) as client:
        minted = await client.post("/v1/stream-tickets", headers=live_server.headers)
        ticket = minted.json()["ticket"]
        head = await client.head("/v1/events", params={"ticket": ticket})
        with_bearer = await client.head("/v1/events", headers=live_server.headers)
    stream = await open_stream(live_server, headers={}, params={"ticket": ticket})
    first = await stream.next()
    assert first is not None and first.kind == "sessions"
    assert head.status_code == 200
    assert head.headers["content-type"].startswith("text/event-stream")
    assert with_bearer.status_code == 200
    assert with_bearer.headers["content-type"].startswith("text/event-stream")


# -- request bodies ------------------------------------------------------------------------------


@pytest.mark.parametrize("authenticated", [True, False], ids=["bearer", "pairing"])
def test_body_that_does_not_arrive_in_time_is_408_and_closed(
    servers: ServerFactory, authenticated: bool
) -> None:
    """A body read by the server (an authenticated request's, or the pairing route's) must
    arrive within the header timeout of its head: else 408 and the connection closes."""
    live = servers.start(header_timeout_seconds=0.5)
    path, auth = (
        ("/v1/sessions", f"Authorization: Bearer {live.bearer}\r\n")
        if authenticated
        else ("/v1/pair", "")
    )
    with closing(_connect(live)) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: localhost\r\n{auth}"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode()
        )
        head = _response_head(sock)
        assert head.startswith(b"HTTP/1.1 408 "), head
        assert _closed_by_server(sock, within=5)


def test_unread_body_of_a_refused_request_cannot_hold_the_connection(
    servers: ServerFactory,
) -> None:
    """A request refused before its body is read (401) cannot keep its connection open by
    trickling that body: it is closed at the body deadline."""
    live = servers.start(header_timeout_seconds=0.5)
    with closing(_connect(live)) as sock:
        sock.sendall(
            b"POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        assert _response_head(sock).startswith(b"HTTP/1.1 401 ")
        assert _closed_by_server(sock, within=5, trickle=True)


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("path", ["/healthz", "/", "/no/such/page"])
def test_body_outside_v1_is_never_read(servers: ServerFactory, method: str, path: str) -> None:
    """Outside /v1 no route takes a body and no one is authenticated: the answer comes
    without waiting for (or buffering) the 1 MiB the request announces."""
    live = servers.start(header_timeout_seconds=30)
    with closing(_connect(live, timeout=10)) as sock:
        sock.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
            "Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{".encode()
        )
        status = _response_head(sock).split(b"\r\n", 1)[0]
    assert status.split()[1] in (b"200", b"404", b"405"), status


# -- the request head ----------------------------------------------------------------------------


@pytest.mark.parametrize("padding", [17_000, 100_000])
def test_request_head_over_16_kib_is_400_even_in_one_piece(
    live_server: LiveServer, padding: int
) -> None:
    """The 16 KiB bound holds for a head that arrives whole, not only for one still arriving."""
    for size, expected in ((15_000, b"200"), (padding, b"400")):
        with closing(_connect(live_server)) as sock:
            sock.sendall(
                f"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Pad: {'a' * size}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            status = _response_head(sock).split(b"\r\n", 1)[0]
        assert status.split()[1] == expected, (size, status)


# -- the access log ------------------------------------------------------------------------------


def test_redaction_decodes_parameter_names() -> None:
    """A name the guard decodes to a credential is redacted, however it is spelled."""
    for target in (
        "/v1/events?%74icket=SECRET",
        "/v1/events?after=1&tick%65t=SECRET",
        "/v1/events?TICKET=SECRET#x",
        "/v1/events?x=1;access%5Ftoken=SECRET",
        "/v1/events?+ticket=SECRET",
    ):
        assert "SECRET" not in redact(target), target
    assert redact("/v1/events?x=ticket=y") == "/v1/events?x=ticket=y"  # a value, not a name


def test_access_log_redacts_a_percent_encoded_ticket_name(servers: ServerFactory) -> None:
    """`?%74icket=` is a ticket to the guard (it is spent), so the log redacts it too."""
    live = servers.start()
    with access_log_lines(live) as lines, httpx.Client(base_url=live.base_url) as client:
        ticket = client.post("/v1/stream-tickets", headers=live.headers).json()["ticket"]
        client.get(f"/v1/sessions?%74icket={ticket}", headers=live.headers)
        spent = client.get("/v1/events", params={"ticket": ticket})
    _problem(spent, 401, "invalid_ticket")
    assert any("/v1/sessions?%74icket=" in line for line in lines), lines
    assert not any(ticket in line for line in lines), lines


# -- bad input is a 422, never a 500 -------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"[" * 3000 + b"]" * 3000, b'{"op": ' + b"[" * 3000 + b"]" * 3000 + b"}"],
    ids=["array", "op"],
)
def test_deeply_nested_op_body_is_a_422(live_server: LiveServer, body: bytes) -> None:
    headers = {**live_server.headers, "Content-Type": "application/json"}
    with httpx.Client(base_url=live_server.base_url, headers=headers) as client:
        _problem(client.post("/v1/ops", content=body), 422, "validation_error")


@pytest.mark.parametrize("since", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+01:00"])
def test_usage_since_out_of_range_is_a_422(live_server: LiveServer, since: str) -> None:
    """A `since` with an offset that puts it past either end of UTC is refused like any other
    bad `since` (invalid_usage_query), naming the parameter."""
    with httpx.Client(base_url=live_server.base_url, headers=live_server.headers) as client:
        resp = client.get("/v1/usage", params={"group_by": "day", "since": since})
    assert "since" in _problem(resp, 422, "invalid_usage_query")["detail"]
