"""NdjsonStdio framing: update interception order, replay flag, junk and oversized lines."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from c2.core.agents.stdio import NdjsonStdio, spawn


def frame(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def update(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"n": n}}}


class Harness:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.seen: list[tuple[object, bool]] = []
        self.reader = reader
        self.stdio = NdjsonStdio(reader, writer, lambda u, replay: self.seen.append((u, replay)))

    async def receive(self) -> dict[str, Any] | None:
        return await asyncio.wait_for(self.stdio.receive(), 5)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    """An NdjsonStdio over an in-memory reader and a real pipe writer."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop), os.fdopen(write_fd, "wb")
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    yield Harness(asyncio.StreamReader(limit=256), writer)
    writer.close()
    os.close(read_fd)


async def test_stdio_takes_updates_in_order_and_returns_other_messages(harness: Harness) -> None:
    """session/update goes to the callback in wire order; responses reach the SDK."""
    for n in range(3):
        harness.reader.feed_data(frame(update(n)))
    harness.reader.feed_data(frame({"jsonrpc": "2.0", "id": 7, "result": {}}))
    assert await harness.receive() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert harness.seen == [({"n": 0}, False), ({"n": 1}, False), ({"n": 2}, False)]


async def test_stdio_flags_updates_while_a_load_is_outstanding(harness: Harness) -> None:
    """Updates between a session/load request and its response are marked as replay."""
    await harness.stdio.send({"jsonrpc": "2.0", "id": 3, "method": "session/load", "params": {}})
    harness.reader.feed_data(frame(update(1)))
    harness.reader.feed_data(frame({"jsonrpc": "2.0", "id": 3, "result": {}}))
    harness.reader.feed_data(frame(update(2)))
    harness.reader.feed_data(frame({"jsonrpc": "2.0", "id": 4, "result": {}}))
    assert (await harness.receive() or {})["id"] == 3
    assert (await harness.receive() or {})["id"] == 4
    assert harness.seen == [({"n": 1}, True), ({"n": 2}, False)]


async def test_stdio_skips_junk_and_oversized_lines(harness: Harness) -> None:
    """Non-JSON, non-object and over-limit lines are skipped; EOF ends the stream."""
    harness.reader.feed_data(b"not json\n[1,2]\n\n")
    harness.reader.feed_data(b'{"id": 1, "result": "' + b"x" * 500 + b'"}\n')
    harness.reader.feed_data(b'{"id": 2}\n')
    harness.reader.feed_eof()
    assert await harness.receive() == {"id": 2}
    assert await harness.receive() is None
    assert harness.stdio.eof.is_set()


async def test_stdio_send_after_close_raises_connection_error(harness: Harness) -> None:
    """Sending on a closed stdin is a ConnectionError (the SDK fails the request)."""
    await harness.stdio.close()
    with pytest.raises(ConnectionError):
        await harness.stdio.send({"jsonrpc": "2.0", "method": "session/cancel"})


async def test_spawn_withholds_c2_variables_from_the_agent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A spawned agent sees the server's environment except c2's own C2_* variables."""
    monkeypatch.setenv("C2_DATABASE_URL", "postgresql+psycopg://c2:secret@db/c2")
    monkeypatch.setenv("C2_HOME", str(tmp_path))
    monkeypatch.setenv("AGENT_API_KEY", "for-the-agent")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    process, protocol = await spawn(sys.executable, ["-c", code], dict(os.environ), str(tmp_path))
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 10)
    await asyncio.wait_for(protocol.exited.wait(), 10)
    seen = json.loads(line)
    assert seen["AGENT_API_KEY"] == "for-the-agent"
    assert not [name for name in seen if name.startswith("C2_")]
