"""A minimal SSE reader for benchmarks: raw asyncio streams, no per-frame JSON or HTTP client
overhead, so on a 2-core machine the measuring client does not become the bottleneck.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any


class RawSse:
    """`GET path` on host:port with a bearer; iterate `frames()` for (id, data) pairs."""

    def __init__(self, host: str, port: int, path: str, bearer: str) -> None:
        self.host, self.port, self.path, self.bearer = host, port, path, bearer
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        request = (
            f"GET {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {self.bearer}\r\nAccept: text/event-stream\r\n\r\n"
        )
        self._writer.write(request.encode())
        await self._writer.drain()
        head = await self._reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(head.decode(errors="replace"))
        self._chunked = b"transfer-encoding: chunked" in head.lower()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def _body(self) -> AsyncIterator[bytes]:
        assert self._reader is not None
        if not self._chunked:
            while data := await self._reader.read(1 << 16):
                yield data
            return
        while True:
            size = int((await self._reader.readuntil(b"\r\n"))[:-2], 16)
            if size == 0:
                return
            yield (await self._reader.readexactly(size + 2))[:-2]

    async def frames(self) -> AsyncIterator[tuple[int | None, str]]:
        """(SSE id or None, raw data string) per frame; comments are skipped."""
        buffer = b""
        async for data in self._body():
            buffer += data
            *complete, buffer = buffer.replace(b"\r\n", b"\n").split(b"\n\n")
            for raw in complete:
                seq, payload = None, []
                for line in raw.decode().split("\n"):
                    if line.startswith("id:"):
                        seq = int(line[3:])
                    elif line.startswith("data:"):
                        payload.append(line[5:].lstrip())
                if payload:
                    yield seq, "\n".join(payload)

    async def count(
        self, marker: bytes, end: bytes, ends: int, on_welcome: Callable[[], None]
    ) -> int:
        """How many times `marker` occurs in the body after the first frame (the welcome, then
        `on_welcome()`) and before the `ends`-th `end`, where reading stops. No framing and no
        decoding: a flat-out client costs a byte search per read, so it is not what limits the
        run. An occurrence split across two reads counts once (each pattern carries a tail of
        the bytes before, one shorter than itself)."""
        markers = ended = 0
        marker_tail = end_tail = b""
        head: bytes | None = b""  # None once the welcome is past
        async for data in self._body():
            if head is not None:
                head += data
                at = head.find(b"\n\n")
                if at < 0:
                    continue
                data, head = head[at + 2 :], None
                on_welcome()
            window = end_tail + data
            if ended + window.count(end) >= ends:
                at = -1
                for _ in range(ends - ended):
                    at = window.find(end, at + 1)
                data = data[: max(0, at + len(end) - len(end_tail))]
                ended = ends
            else:
                ended += window.count(end)
                end_tail = window[len(window) - len(end) + 1 :]
            window = marker_tail + data
            markers += window.count(marker)
            marker_tail = window[len(window) - len(marker) + 1 :]
            if ended >= ends:
                break
        return markers


def event_of(data: str) -> dict[str, Any]:
    """The protocol event inside an `event` frame."""
    frame = json.loads(data)
    event: dict[str, Any] = frame["event"]
    return event
