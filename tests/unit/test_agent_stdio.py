"""NdjsonStdio and its framing: update interception order, replay flag, junk and oversized
lines, reads split into lines, JSON parsed as the standard parser reads it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from c2.core.agents.framing import Lines, NdjsonStdio, parse_line
from c2.core.agents.stdio import AgentChild, spawn


def frame(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def update(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"n": n}}}


class Harness:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.seen: list[tuple[object, bool]] = []
        self.stdio = NdjsonStdio(
            writer, lambda u, replay: self.seen.append((u, replay)), line_limit=256
        )

    async def receive(self) -> dict[str, Any] | None:
        return await asyncio.wait_for(self.stdio.receive(), 5)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    """An NdjsonStdio fed by hand, over a real pipe writer."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop), os.fdopen(write_fd, "wb")
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    yield Harness(writer)
    writer.close()
    os.close(read_fd)


async def test_stdio_takes_updates_in_order_and_returns_other_messages(harness: Harness) -> None:
    """session/update goes to the callback in wire order; responses reach the SDK."""
    for n in range(3):
        harness.stdio.feed(frame(update(n)))
    harness.stdio.feed(frame({"jsonrpc": "2.0", "id": 7, "result": {}}))
    assert await harness.receive() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert harness.seen == [({"n": 0}, False), ({"n": 1}, False), ({"n": 2}, False)]


async def test_stdio_flags_updates_while_a_load_is_outstanding(harness: Harness) -> None:
    """Updates between a session/load request and its response are marked as replay."""
    await harness.stdio.send({"jsonrpc": "2.0", "id": 3, "method": "session/load", "params": {}})
    harness.stdio.feed(frame(update(1)))
    harness.stdio.feed(frame({"jsonrpc": "2.0", "id": 3, "result": {}}))
    harness.stdio.feed(frame(update(2)))
    harness.stdio.feed(frame({"jsonrpc": "2.0", "id": 4, "result": {}}))
    assert (await harness.receive() or {})["id"] == 3
    assert (await harness.receive() or {})["id"] == 4
    assert harness.seen == [({"n": 1}, True), ({"n": 2}, False)]


async def test_stdio_skips_junk_and_oversized_lines(harness: Harness) -> None:
    """Non-JSON, non-object and over-limit lines are skipped; EOF ends the stream."""
    harness.stdio.feed(b"not json\n[1,2]\n\n")
    harness.stdio.feed(b'{"id": 1, "result": "' + b"x" * 500 + b'"}\n')
    harness.stdio.feed(b'{"id": 2}\n')
    harness.stdio.feed_eof()
    assert await harness.receive() == {"id": 2}
    assert await harness.receive() is None
    assert harness.stdio.eof.is_set()


async def test_stdio_takes_updates_as_they_are_read_and_wakes_a_waiting_receive(
    harness: Harness,
) -> None:
    """Updates are handled during `feed` itself, before the SDK looks; a `receive` already
    waiting gets the next message when it is read; EOF answers None from then on."""
    waiting = asyncio.ensure_future(harness.receive())
    await asyncio.sleep(0)
    harness.stdio.feed(frame(update(1)) + b'{"id": 5, "res')
    assert harness.seen == [({"n": 1}, False)]
    assert not waiting.done()
    harness.stdio.feed(b'ult": {}}\n' + frame(update(2)))
    assert harness.seen == [({"n": 1}, False), ({"n": 2}, False)]
    assert await waiting == {"id": 5, "result": {}}
    harness.stdio.feed_eof()
    assert await harness.receive() is None
    assert await harness.receive() is None


async def test_stdio_takes_the_rest_of_a_read_after_a_response_with_an_odd_id(
    harness: Harness,
) -> None:
    """A response whose id no request of ours could have (a list) reaches the SDK, which
    rejects it; the lines after it in the same read are still taken."""
    await harness.stdio.send({"jsonrpc": "2.0", "id": 3, "method": "session/load", "params": {}})
    harness.stdio.feed(b'{"id": [3], "result": {}}\n' + frame(update(1)))
    assert await harness.receive() == {"id": [3], "result": {}}
    assert harness.seen == [({"n": 1}, True)]  # the load is still outstanding


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
    child = await spawn(sys.executable, ["-c", code], dict(os.environ), str(tmp_path))
    stdio = NdjsonStdio(child.stdin, lambda u, replay: None)
    child.stdout_pipe.attach(stdio)
    seen = await asyncio.wait_for(stdio.receive(), 10)
    assert seen is not None
    assert seen["AGENT_API_KEY"] == "for-the-agent"
    assert not [name for name in seen if name.startswith("C2_")]
    child.stdin.close()
    await asyncio.wait_for(child.exited.wait(), 10)


async def exited_then_read(code: str, tmp_path: Path) -> tuple[AgentChild, NdjsonStdio]:
    """An agent running `code` spawned, waited for until it exits with nothing reading its
    stdout, then read: the process and the transport its output goes to."""
    child = await spawn(sys.executable, ["-c", code], dict(os.environ), str(tmp_path))
    await asyncio.wait_for(child.exited.wait(), 10)
    stdio = NdjsonStdio(child.stdin, lambda u, replay: None)
    child.stdout_pipe.attach(stdio)
    return child, stdio


async def test_an_agent_writes_a_tick_of_flat_out_output_without_a_reader(tmp_path: Path) -> None:
    """The agent's stdout pipe holds more than Linux's default 64 KiB: an agent streaming flat
    out while its pipe waits for the tick (here: nobody reads at all) writes 200 KB, more than
    a tick's worth, and exits without blocking; the line then arrives whole."""
    code = "import json, sys; sys.stdout.write(json.dumps({'id': 'x' * 200_000}) + chr(10))"
    child, stdio = await exited_then_read(code, tmp_path)
    assert await asyncio.wait_for(stdio.receive(), 10) == {"id": "x" * 200_000}
    child.stdin.close()
    await asyncio.wait_for(child.exited.wait(), 10)


async def test_agent_output_read_before_the_sink_is_attached_is_kept(tmp_path: Path) -> None:
    """An agent may write, and even exit, before its reader is in place: what it wrote waits in
    the pipe, then EOF, and the sink gets them in order once it is attached."""
    code = 'import sys; sys.stdout.write(\'{"id": 1}\\n{"id": 2}\')'
    child, stdio = await exited_then_read(code, tmp_path)
    assert await asyncio.wait_for(stdio.receive(), 5) == {"id": 1}
    assert await asyncio.wait_for(stdio.receive(), 5) == {"id": 2}
    assert await asyncio.wait_for(stdio.receive(), 5) is None
    child.stdin.close()
    await asyncio.wait_for(child.exited.wait(), 10)


def test_lines_split_across_reads_and_drop_what_is_over_the_limit() -> None:
    """Lines arrive in reads of any size: whole lines come out in order, blank ones skipped;
    one over the limit is dropped whole, whether it came in one read or grew over several,
    and the line after it is kept."""
    lines = Lines(limit=10)
    assert lines.feed(b"ab") == []
    assert lines.feed(b"c\n\n  \nde") == [b"abc"]
    assert lines.feed(b"f\n" + b"x" * 11 + b"\nok\n") == [b"def", b"ok"]
    assert lines.feed(b"y" * 8) == []
    assert lines.feed(b"y" * 8) == []  # 16 bytes without a newline: dropped, not held
    assert lines.feed(b"yyy\nafter\nla") == [b"after"]
    assert lines.end() == b"la"
    assert lines.end() is None


def test_lines_keep_no_tail_of_an_oversized_line_at_eof() -> None:
    lines = Lines(limit=4)
    assert lines.feed(b"123456") == []
    assert lines.end() is None
    assert lines.feed(b"\n") == []  # the state was reset: an empty line, nothing else


def test_parse_line_reads_what_the_standard_parser_reads() -> None:
    """Requests and responses parse exactly as Python's parser reads them (a big integer id
    stays an integer); so do lines orjson refuses (NaN); junk is a ValueError."""
    big = 123456789012345678901234567890
    assert parse_line(b'{"id": %d, "result": {"a": [1, "\\u00e9"]}}' % big) == {
        "id": big,
        "result": {"a": [1, "\u00e9"]},
    }
    notification = b'{"method": "session/update", "params": {"update": {"text": "\\u00e9"}}}'
    assert parse_line(notification) == {
        "method": "session/update",
        "params": {"update": {"text": "\u00e9"}},
    }
    nan = parse_line(b'{"method": "session/update", "x": NaN}')["x"]
    assert nan != nan
    with pytest.raises(ValueError):
        parse_line(b"not json")
