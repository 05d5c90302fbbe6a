"""The server's direct body writer (api/http11.py) on a real uvicorn connection: it writes what
the ASGI `send` would (h11's chunked framing, in order), and hands back to `send` wherever it
must (HTTP/1.0, a socket pushing back, before the response started, an empty chunk)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import uvicorn
from starlette.types import Receive, Scope, Send

from c2.api.http11 import CHUNK_WRITER, ChunkWriter, HeadDeadlineProtocol
from tests.conftest import LiveServer
from tests.ports import free_port

Handler = Callable[[ChunkWriter, Send, Receive], Awaitable[None]]
START = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"x/y")]}
END = {"type": "http.response.body", "body": b"", "more_body": False}


def body(data: bytes) -> dict[str, object]:
    return {"type": "http.response.body", "body": data, "more_body": True}


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[int]:
    """A real uvicorn server on c2's protocol whose one route runs `handler` with the request's
    writer; yields its port."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await handler(scope["extensions"][CHUNK_WRITER], send, receive)

    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http=HeadDeadlineProtocol,
        lifespan="off",
        log_level="error",
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(1000):
        if server.started:
            break
        await asyncio.sleep(0.01)
    else:
        raise RuntimeError("the server did not start")
    try:
        yield port
    finally:
        server.should_exit = True
        await task


async def request(port: int, version: str = "1.1", rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    head = f"GET / HTTP/{version}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    await asyncio.get_running_loop().sock_sendall(sock, head.encode())
    return sock


async def read_all(sock: socket.socket) -> bytes:
    loop, out = asyncio.get_running_loop(), bytearray()
    with sock:
        while data := await loop.sock_recv(sock, 1 << 16):
            out += data
    return bytes(out)


def split(response: bytes) -> tuple[bytes, bytes]:
    head, _, rest = response.partition(b"\r\n\r\n")
    return head, rest


def dechunk(raw: bytes) -> tuple[list[bytes], bool]:
    """The chunks of a chunked body and whether the terminating zero-size chunk came."""
    chunks: list[bytes] = []
    while raw:
        size_line, _, raw = raw.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return chunks, True
        chunks.append(raw[:size])
        assert raw[size : size + 2] == b"\r\n"
        raw = raw[size + 2 :]
    return chunks, False


async def test_chunks_go_out_in_order_framed_as_send_frames_them():
    wrote: list[bool] = []

    async def handler(write: ChunkWriter, send: Send, receive: Receive) -> None:
        wrote.append(write(b"early"))  # before the start: send's job
        await send(START)
        await send(body(b"one "))  # through send, then beside it: one body
        wrote.extend([write(b"two "), write(b""), write(b"three")])
        await send(END)
        wrote.append(write(b"late"))  # after the end: nothing more may go out

    async with serving(handler) as port:
        response = await read_all(await request(port))
    head, raw = split(response)
    assert b"transfer-encoding: chunked" in head.lower()
    assert dechunk(raw) == ([b"one ", b"two ", b"three"], True)
    assert wrote == [False, True, False, True, False]


async def test_an_http_1_0_body_is_left_to_send():
    wrote: list[bool] = []

    async def handler(write: ChunkWriter, send: Send, receive: Receive) -> None:
        await send(START)
        wrote.append(write(b"bare"))
        await send(body(b"bare"))
        await send(END)

    async with serving(handler) as port:
        response = await read_all(await request(port, version="1.0"))
    head, raw = split(response)
    assert b"chunked" not in head.lower()
    assert raw == b"bare"  # close-delimited, unframed
    assert wrote == [False]


async def test_a_client_that_stops_reading_turns_writes_back_to_send():
    """Written directly until the socket pushes back, then through `send`, which waits for the
    client: every byte arrives, in order."""
    chunk, written, sent = 64 * 1024, [0], [0]
    pushed_back = asyncio.Event()

    async def handler(write: ChunkWriter, send: Send, receive: Receive) -> None:
        await send(START)
        n = 0
        while n < 2048:  # 128 MiB: far past any socket buffer
            data = bytes([n % 251]) * chunk
            n += 1
            if write(data):
                written[0] += 1
                continue
            pushed_back.set()
            await send(body(data))  # waits until the client reads again
            sent[0] += 1
            if sent[0] == 3:
                break
        await send(END)

    async with serving(handler) as port:
        sock = await request(port, rcvbuf=4096)
        await asyncio.wait_for(pushed_back.wait(), 30)
        response = await read_all(sock)
    chunks, ended = dechunk(split(response)[1])
    assert ended and written[0] > 0 and sent[0] == 3
    assert b"".join(chunks) == b"".join(
        bytes([n % 251]) * chunk for n in range(written[0] + sent[0])
    )


async def test_a_gone_client_takes_no_write():
    wrote: list[bool] = []

    async def handler(write: ChunkWriter, send: Send, receive: Receive) -> None:
        await send(START)
        assert (await receive())["type"] == "http.request"  # the (empty) request body
        assert (await receive())["type"] == "http.disconnect"
        wrote.append(write(b"x"))  # dropped quietly, as send drops it
        await send(END)

    async with serving(handler) as port:
        sock = await request(port)
        assert (await asyncio.get_running_loop().sock_recv(sock, 1024)).startswith(b"HTTP/1.1 200")
        sock.close()
        for _ in range(500):
            if wrote:
                break
            await asyncio.sleep(0.01)
    assert wrote == [True]


def test_c2_event_stream_to_an_http_1_0_client(live_server: LiveServer):
    """c2's own stream takes the send path for an unchunked body: the welcome frame arrives."""
    host, port = live_server.base_url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"GET /v1/events HTTP/1.0\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {live_server.bearer}\r\n\r\n".encode()
        )
        data = b""
        while b'"kind":"sessions"' not in data:
            more = sock.recv(65536)
            assert more, data
            data += more
    head, raw = split(data)
    assert head.startswith(b"HTTP/1.1 200") and b"chunked" not in head.lower()
    assert raw.startswith(b"id: ") and b'data: {"kind":"sessions"' in raw
