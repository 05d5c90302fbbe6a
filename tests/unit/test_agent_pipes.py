"""The agent's stdout pipe (core/agents/pipes.py) over a real OS pipe: read on readiness while
quiet, on the shared tick while it trickles, back to readiness when it fills or goes quiet;
every byte reaches the sink once, in order, then EOF."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator

import pytest

from c2.core.agents.pipes import FULL_READ, QUIET_TICKS, PipeTicker, StdoutPipe


class Sink:
    def __init__(self) -> None:
        self.reads: list[bytes] = []
        self.eof = False

    def feed(self, data: bytes) -> None:
        self.reads.append(data)

    def feed_eof(self) -> None:
        self.eof = True

    @property
    def data(self) -> bytes:
        return b"".join(self.reads)


class Ticks:
    """A ticker driven by hand (its own timer is an hour away), counting its after-tick calls;
    engaged from the first small read unless told otherwise."""

    def __init__(self, engage_reads: int = 1, release_reads: int = 1) -> None:
        self.after = 0
        self.ticker = PipeTicker(
            3600, self._after, engage_reads=engage_reads, release_reads=release_reads
        )

    def _after(self) -> None:
        self.after += 1


@pytest.fixture
def fds() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        try:
            os.close(fd)
        except OSError:
            pass  # the pipe closed it


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let the loop run until `check()` holds: readiness reads happen in loop callbacks, and
    what they change (the sink, the pipe's mode) has no event to await."""
    async with asyncio.timeout(timeout):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


async def trickling(fds: tuple[int, int]) -> tuple[Ticks, Sink, StdoutPipe]:
    """A pipe on a hand-driven ticker whose first line (`a`) was read on readiness: it is on
    the tick now."""
    ticks, sink = Ticks(), Sink()
    pipe = StdoutPipe(fds[0], ticks.ticker)
    pipe.attach(sink)
    os.write(fds[1], b"a\n")
    await until(lambda: pipe.ticking)
    assert sink.data == b"a\n"
    return ticks, sink, pipe


async def test_a_small_read_moves_the_pipe_to_the_tick_which_reads_and_commits(
    fds: tuple[int, int],
) -> None:
    """The first line after a quiet spell is read at once; the pipe then waits for the tick,
    which reads everything that came meanwhile in one read and calls its after-tick hook,
    which a tick that read nothing does not call."""
    ticks, sink, pipe = await trickling(fds)
    os.write(fds[1], b"two\n")
    os.write(fds[1], b"three\n")
    await asyncio.sleep(0.1)
    assert sink.data == b"a\n"  # off the readiness set: waiting for the tick
    ticks.ticker.tick()
    assert sink.reads == [b"a\n", b"two\nthree\n"]
    assert ticks.after == 1
    ticks.ticker.tick()
    assert ticks.after == 1  # nothing read, nothing to commit
    pipe.close()
    assert pipe.closed and not pipe.ticking


async def test_a_pipe_that_fills_in_a_tick_goes_back_to_readiness(fds: tuple[int, int]) -> None:
    """An agent writing faster than a tick drains (flat out) is read on readiness again: each
    read then carries many lines, and waiting would only block it on a full pipe."""
    ticks, sink, pipe = await trickling(fds)
    write_fd = fds[1]
    burst = b"x" * (FULL_READ - 2) + b"\n\n"
    os.write(write_fd, burst)
    ticks.ticker.tick()
    assert not pipe.ticking
    os.write(write_fd, b"b\n")
    await until(lambda: sink.data.endswith(b"b\n"))  # read on readiness, no tick needed
    assert sink.data == b"a\n" + burst + b"b\n"
    pipe.close()


async def test_a_pipe_quiet_for_a_while_goes_back_to_readiness(fds: tuple[int, int]) -> None:
    """After QUIET_TICKS empty ticks the pipe leaves the tick: an idle agent costs no ticks,
    and its next line is read at once."""
    ticks, sink, pipe = await trickling(fds)
    write_fd = fds[1]
    for _ in range(QUIET_TICKS - 1):
        ticks.ticker.tick()
    assert pipe.ticking
    ticks.ticker.tick()
    assert not pipe.ticking
    os.write(write_fd, b"b\n")
    await until(lambda: sink.data == b"a\nb\n")
    pipe.close()


async def test_a_read_on_the_tick_starts_the_quiet_count_again(fds: tuple[int, int]) -> None:
    """Quiet means QUIET_TICKS empty ticks in a row: a line just before the limit keeps the
    pipe on the tick for QUIET_TICKS more (the ticker keeps its pipes oldest read first and
    visits only those with data, so this is its bookkeeping, not a per-pipe count)."""
    ticks, sink, pipe = await trickling(fds)
    for _ in range(QUIET_TICKS - 1):
        ticks.ticker.tick()
    os.write(fds[1], b"b\n")
    ticks.ticker.tick()  # the QUIET_TICKS-th tick reads it
    assert sink.data == b"a\nb\n" and pipe.ticking
    for _ in range(QUIET_TICKS - 1):
        ticks.ticker.tick()
    assert pipe.ticking
    ticks.ticker.tick()
    assert not pipe.ticking
    pipe.close()


@pytest.mark.parametrize("on_tick", [False, True])
async def test_eof_reaches_the_sink_after_every_byte_and_closes_the_pipe(
    fds: tuple[int, int], on_tick: bool
) -> None:
    """The writer's end closing is EOF, after all it wrote, whether the pipe is read on
    readiness or on the tick (a short read empties a pipe, so the tick after it sees the
    EOF); the pipe is closed and off both."""
    read_fd, write_fd = fds
    ticks, sink = Ticks(), Sink()
    if on_tick:
        ticks, sink, pipe = await trickling(fds)
    else:
        pipe = StdoutPipe(read_fd)
        pipe.attach(sink)
    os.write(write_fd, b"last\n")
    os.close(write_fd)
    if on_tick:
        ticks.ticker.tick()
        assert not sink.eof
        ticks.ticker.tick()
    await until(lambda: sink.eof)
    assert sink.data == (b"a\nlast\n" if on_tick else b"last\n")
    assert pipe.closed and not pipe.ticking


async def test_a_paused_pipe_is_read_by_neither_the_tick_nor_readiness_until_resumed(
    fds: tuple[int, int],
) -> None:
    """Backpressure: while paused nothing is read (the agent blocks once the pipe is full);
    on resume the pipe is read on readiness first."""
    ticks, sink, pipe = await trickling(fds)
    write_fd = fds[1]
    pipe.pause()
    assert not pipe.ticking
    os.write(write_fd, b"b\n")
    ticks.ticker.tick()
    await asyncio.sleep(0.1)
    assert sink.data == b"a\n"
    pipe.resume()
    await until(lambda: sink.data == b"a\nb\n")
    pipe.close()


async def test_the_tick_reads_each_pipe_on_its_own_timer_and_stops_with_the_last_pipe(
    fds: tuple[int, int],
) -> None:
    """The ticker's own timer reads trickling pipes every interval; lines written between
    ticks arrive in order, with the hook called once per tick that read."""
    read_fd, write_fd = fds
    sink = Sink()
    calls: list[bytes] = []
    ticker = PipeTicker(0.01, lambda: calls.append(sink.data), engage_reads=1)
    pipe = StdoutPipe(read_fd, ticker)
    pipe.attach(sink)
    lines = [f"line {n}\n".encode() for n in range(20)]
    for line in lines:
        os.write(write_fd, line)
        await asyncio.sleep(0.003)
    await until(lambda: sink.data == b"".join(lines))
    assert pipe.ticking
    assert 1 <= len(calls) < len(lines)  # the tick took several lines per read
    pipe.close()
    assert ticker._timer is None  # no pipe left: no more ticks


async def test_a_tick_reads_only_the_pipes_that_hold_something(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One poll a tick finds the pipes with data or at EOF; an empty pipe costs no read (at
    fifty trickling agents most are empty on any tick), yet still counts its quiet ticks."""
    ticks = Ticks()
    pipes: list[tuple[int, int, Sink, StdoutPipe]] = []
    for _ in range(3):
        read_fd, write_fd = os.pipe()
        sink = Sink()
        pipe = StdoutPipe(read_fd, ticks.ticker)
        pipe.attach(sink)
        os.write(write_fd, b"a\n")
        await until(lambda pipe=pipe: pipe.ticking)  # type: ignore[misc]
        pipes.append((read_fd, write_fd, sink, pipe))
    reads: list[int] = []
    real_read = os.read

    def counting_read(fd: int, size: int) -> bytes:
        reads.append(fd)
        return real_read(fd, size)

    monkeypatch.setattr("c2.core.agents.pipes.os.read", counting_read)
    (_, w0, sink0, _), (_, w1, sink1, pipe1), (fd2, _, sink2, pipe2) = pipes
    os.write(w0, b"b\n")
    os.close(w1)  # EOF: found by the poll too
    ticks.ticker.tick()
    assert fd2 not in reads and sink2.data == b"a\n"
    assert sink0.data == b"a\nb\n" and sink1.eof and pipe1.closed
    for _ in range(QUIET_TICKS):
        ticks.ticker.tick()
    assert fd2 not in reads and not pipe2.ticking  # quiet long enough: back to readiness
    for _, write_fd, _, pipe in pipes:
        pipe.close()
        with contextlib.suppress(OSError):
            os.close(write_fd)  # the second one is closed already


async def test_without_a_ticker_every_read_is_on_readiness(fds: tuple[int, int]) -> None:
    """With no ticker (the store commits at once) each line is read as it comes."""
    read_fd, write_fd = fds
    sink = Sink()
    pipe = StdoutPipe(read_fd)
    pipe.attach(sink)
    sent = b""
    for n in range(5):
        sent += b"%d\n" % n
        os.write(write_fd, b"%d\n" % n)

        def has(want: bytes = sent) -> bool:
            return sink.data == want

        await until(has)
    assert not pipe.ticking
    pipe.close()


async def test_a_sink_that_raises_loses_only_that_read(fds: tuple[int, int]) -> None:
    """A failure taking one read is logged; the pipe keeps reading (the agent lives on)."""
    read_fd, write_fd = fds
    seen: list[bytes] = []

    class Fussy(Sink):
        def feed(self, data: bytes) -> None:
            if data.startswith(b"bad"):
                raise ValueError("no")
            seen.append(data)

    pipe = StdoutPipe(read_fd)
    pipe.attach(Fussy())
    os.write(write_fd, b"bad\n")
    await asyncio.sleep(0.05)
    os.write(write_fd, b"good\n")
    await until(lambda: seen == [b"good\n"])
    pipe.close()


@pytest.fixture
def three_pipes() -> Iterator[list[tuple[int, int]]]:
    pairs = [os.pipe() for _ in range(3)]
    yield pairs
    for pair in pairs:
        for fd in pair:
            try:
                os.close(fd)
            except OSError:
                pass  # the pipe closed it


async def test_the_tick_engages_only_when_small_reads_come_often(
    three_pipes: list[tuple[int, int]],
) -> None:
    """A few agents' lines are each worth a wake-up of their own (read, and committed, at
    once); from `engage_reads` small reads within an interval the pipes go on the tick, and a
    pipe's small read joins a tick already running."""
    ticks = Ticks(engage_reads=3)
    sinks = [Sink() for _ in three_pipes]
    pipes = [StdoutPipe(r, ticks.ticker) for r, _ in three_pipes]
    for pipe, sink in zip(pipes, sinks, strict=True):
        pipe.attach(sink)
    for n, (_, write_fd) in enumerate(three_pipes[:2]):
        os.write(write_fd, b"a\n")
        await until(lambda n=n: sinks[n].data == b"a\n")  # type: ignore[misc]
    assert not any(pipe.ticking for pipe in pipes)
    os.write(three_pipes[2][1], b"a\n")
    await until(lambda: pipes[2].ticking)  # the third small read in the interval
    assert not pipes[0].ticking
    os.write(three_pipes[0][1], b"b\n")
    await until(lambda: pipes[0].ticking)  # joins the running tick
    assert sinks[0].data == b"a\nb\n"
    for pipe in pipes:
        pipe.close()


async def test_every_pipe_leaves_the_tick_when_the_load_is_gone(
    three_pipes: list[tuple[int, int]],
) -> None:
    """When fewer than `release_reads` pipes have data on each of QUIET_TICKS ticks, all go
    back to readiness, even pipes that are not quiet themselves."""
    ticks = Ticks(release_reads=2)
    (r0, w0), (r1, w1), _ = three_pipes
    sinks = [Sink(), Sink()]
    pipes = [StdoutPipe(r0, ticks.ticker), StdoutPipe(r1, ticks.ticker)]
    for fd, pipe, sink in zip((w0, w1), pipes, sinks, strict=True):
        pipe.attach(sink)
        os.write(fd, b"a\n")
        await until(lambda pipe=pipe: pipe.ticking)  # type: ignore[misc]
    for n in range(QUIET_TICKS - 1):
        os.write((w0, w1)[n % 2], b"x\n")  # one pipe with data per tick, each every other
        ticks.ticker.tick()
    assert all(pipe.ticking for pipe in pipes)
    os.write(w1, b"last\n")
    ticks.ticker.tick()
    assert not any(pipe.ticking for pipe in pipes)
    os.write(w0, b"now\n")
    await until(lambda: sinks[0].data.endswith(b"now\n"))  # read on readiness
    for pipe in pipes:
        pipe.close()
