"""The agent's stdio as newline-delimited JSON, below the SDK's JSON-RPC layer: reads split
into lines, lines parsed, and the SDK's transport over them (`NdjsonStdio`), which takes
`session/update` notifications off the stream synchronously, in arrival order. Streaming
agents send one line per chunk, so this is per-chunk work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

logger = logging.getLogger(__name__)

LINE_LIMIT = 64 * 1024 * 1024  # agents send single JSON lines well over 1 MiB


class Lines:
    """Newline-delimited framing over reads of any size: the complete non-blank lines, in
    order. A line longer than `limit` is dropped whole with a warning, never buffered to its
    end (bounded memory).

    Splitting each read at once, rather than a `readuntil` per line, costs a sixth as much per
    line (0.26 against 1.6 µs), and a streaming agent sends one line per chunk."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._partial = bytearray()  # the start of a line whose newline has not come yet
        self._oversized = False  # inside a line already over the limit: drop through its end

    def feed(self, data: bytes) -> list[bytes]:
        """The lines `data` completes."""
        pieces = data.split(b"\n")
        rest = pieces.pop()  # after the last newline
        lines = []
        for piece in pieces:
            if self._partial:
                self._partial += piece
                piece = bytes(self._partial)
                self._partial.clear()
            if self._oversized or len(piece) > self.limit:
                logger.warning("dropped an agent line over the %d-byte limit", self.limit)
                self._oversized = False
            elif piece.strip():
                lines.append(piece)
        if not self._oversized:
            self._partial += rest
            if len(self._partial) > self.limit:
                self._partial.clear()
                self._oversized = True
        return lines

    def end(self) -> bytes | None:
        """At EOF: a last line that had no newline, if any (once)."""
        tail, oversized = bytes(self._partial), self._oversized
        self._partial.clear()
        self._oversized = False
        return tail if tail.strip() and not oversized else None


def parse_line(line: bytes) -> Any:
    """One JSON line from the agent, as Python's parser reads it, but fast for the stream of
    `session/update` notifications: one line per chunk, where the standard parser was ~12 %
    of the loop's CPU flat out and orjson takes a quarter of its time. orjson reads an
    integer past 64 bits as a float, so any other message (a request or response the SDK
    gets, whose id must round-trip exactly) is parsed again by the standard parser, as is a
    line orjson refuses (NaN, a lone surrogate escape). Junk raises ValueError."""
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)
    notification = isinstance(message, dict) and "id" not in message
    if notification and message.get("method") == "session/update":
        return message
    return json.loads(line)


class NdjsonStdio:
    """SDK `Transport` over the agent's stdin/stdout, intercepting `session/update`.

    Stdout arrives through `feed` (its StdoutPipe, for each read). The SDK runs every
    inbound notification as its own task; taking updates here, as each read is split into
    lines, keeps their order exact and lets a prompt's response be ordered after every update
    that preceded it on the wire. Everything else waits in order for the SDK's `receive`.
    Updates arriving while a `session/load` request is outstanding are flagged as replay
    (docs/protocol.md §3.3 step 5).
    """

    def __init__(
        self,
        writer: asyncio.StreamWriter,
        on_update: Callable[[object, bool], None],
        line_limit: int = LINE_LIMIT,
    ) -> None:
        self._lines = Lines(line_limit)
        self._messages: deque[dict[str, Any] | None] = deque()  # for the SDK; None: EOF
        self._arrived: asyncio.Future[None] | None = None  # `receive` waiting for a message
        self._writer = writer
        self._on_update = on_update
        self._write_lock = asyncio.Lock()
        self._loads: set[object] = set()
        self._closed = False
        self.eof = asyncio.Event()  # the SDK has been handed everything the agent wrote

    def forget_loads(self) -> None:
        """Stop treating updates as replay (the load request finished or was abandoned)."""
        self._loads.clear()

    async def send(self, message: dict[str, Any]) -> None:
        """Write one JSON line; raises ConnectionError when the agent can't take it."""
        if message.get("method") == "session/load" and "id" in message:
            self._loads.add(message["id"])
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        async with self._write_lock:
            if self._closed or self._writer.is_closing():
                raise ConnectionError("acp connection closed")
            try:
                self._writer.write(data)
                await self._writer.drain()
            except (OSError, RuntimeError) as exc:
                raise ConnectionError("acp connection closed") from exc

    def feed(self, data: bytes) -> None:
        """Take one read of the agent's stdout."""
        for line in self._lines.feed(data):
            self._take(line)

    def feed_eof(self) -> None:
        """The agent's stdout ended: its last line, if unterminated, then EOF for the SDK."""
        if (last := self._lines.end()) is not None:
            self._take(last)
        self._deliver(None)

    async def receive(self) -> dict[str, Any] | None:
        """Next message for the SDK; None at EOF (and after). Updates are never returned."""
        while not self._messages:
            self._arrived = asyncio.get_running_loop().create_future()
            try:
                await self._arrived
            finally:
                self._arrived = None
        message = self._messages[0]
        if message is None:
            self.eof.set()
            return None
        self._messages.popleft()
        return message

    def _take(self, line: bytes) -> None:
        try:
            message = parse_line(line)
        except ValueError:
            logger.debug("ignoring a non-JSON line from the agent")
            return
        if not isinstance(message, dict):
            return
        if message.get("method") == "session/update" and "id" not in message:
            params = message.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            try:
                self._on_update(update, bool(self._loads))
            except Exception:
                logger.exception("failed to handle a session/update")
            return
        ident = message.get("id")
        if "method" not in message and isinstance(ident, int | str) and ident in self._loads:
            self._loads.discard(ident)  # (an id of another type is never one of ours)
        self._deliver(message)

    def _deliver(self, message: dict[str, Any] | None) -> None:
        self._messages.append(message)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    async def close(self) -> None:
        """Close the agent's stdin (EOF tells a well-behaved agent to exit)."""
        # No write lock: a send stuck on a full pipe must not block closing.
        self._closed = True
        with contextlib.suppress(OSError, RuntimeError):
            self._writer.close()
