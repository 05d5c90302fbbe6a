"""The agent's stdout pipe, read by c2 itself: on readiness while the loop is not busy with
agents or the agent streams flat out, on a shared tick while many agents trickle.

A streaming model sends one line per chunk, tens of times a second. With fifty agents at once
each line woke the event loop on its own: an epoll return, a switch into the loop's thread,
one small read, and a commit and a wake of every stream for little more than that line
(docs/decisions.md, "Performance at load, eleventh slice").

So under load (`PipeTicker.wants`) a pipe whose read on readiness came in small leaves the
loop's readiness set and is read on the next tick instead, with every other trickling pipe:
one wake-up per tick for all of them. After each tick that read, the store is asked to commit
(`after_tick`), so what a tick reads is committed at once: a chunk waits for the tick only.
A pipe goes back to readiness when a tick finds it fuller than a tick should (an agent
streaming flat out: each read then carries many lines, and waiting would only fill the pipe
and block the agent), when it stays empty for `QUIET_TICKS` ticks, or with every other pipe
when the load is gone. Without load every line is read, and committed, as it comes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)

READ_SIZE = 256 * 1024
SMALL_READ = 16 * 1024  # a read on readiness below this moves the pipe to the tick
FULL_READ = 32 * 1024  # half a default Linux pipe in one tick (an agent's holds 256 KiB): readiness
QUIET_TICKS = 20  # consecutive empty ticks before a pipe goes back to readiness
ENGAGE_READS = 5  # small reads on readiness within one interval that engage the tick
RELEASE_READS = 3  # fewer pipes with data per tick than this, QUIET_TICKS times: release all


class StdoutSink(Protocol):
    """Where the agent's stdout goes as it is read (NdjsonStdio)."""

    def feed(self, data: bytes) -> None:
        """One read, in order."""

    def feed_eof(self) -> None:
        """The pipe closed: nothing more comes."""


class PipeTicker:
    """The tick for trickling pipes: while any is on it, every `interval` seconds it reads
    those of them that hold something (one poll finds them), then calls `after_tick` if
    anything was read.

    It engages only under load: a pipe's small read moves it here once `engage_reads` small
    reads on readiness came within one interval (from all pipes), or while others are here
    already. One agent at 100 lines/s costs the loop 100 wake-ups a second, too few to be worth
    up to an interval of latency on each line; fifty at 20/s cost 1,000. When fewer than
    `release_reads` pipes had anything on each of `QUIET_TICKS` ticks in a row, every pipe goes
    back to readiness."""

    def __init__(
        self,
        interval: float,
        after_tick: Callable[[], None] | None = None,
        *,
        engage_reads: int = ENGAGE_READS,
        release_reads: int = RELEASE_READS,
    ) -> None:
        self.interval = interval
        self._after_tick = after_tick
        self._engage, self._release = engage_reads, release_reads
        # Each pipe on the tick and the tick it last read something (or joined), oldest first:
        # the quiet ones are found at the front, not by visiting every pipe on every tick.
        self._pipes: dict[StdoutPipe, int] = {}
        self._by_fd: dict[int, StdoutPipe] = {}
        self._ticks = 0  # ticks so far
        # The pipes' descriptors: one poll a tick finds those with data (or EOF). At fifty
        # agents trickling, four of five pipes are empty on a tick, and a read that finds
        # nothing (a syscall and a BlockingIOError) costs ~2.6 µs against ~0.15 µs per
        # descriptor polled (timeit, 50 pipes).
        self._poll = select.poll()
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0  # loop time of the next tick
        self._window_end = 0.0  # loop time the current count of small reads ends
        self._small_reads = 0
        self._slack = 0  # consecutive ticks with fewer than `release_reads` pipes read

    def wants(self) -> bool:
        """Called for each small read on readiness: should that pipe move to the tick?"""
        if self._pipes:
            return True
        now = asyncio.get_running_loop().time()
        if now >= self._window_end:
            self._window_end, self._small_reads = now + self.interval, 0
        self._small_reads += 1
        return self._small_reads >= self._engage

    def add(self, pipe: StdoutPipe) -> None:
        """Read `pipe` on the tick from now on (the first tick is one interval away)."""
        fd = pipe.fileno()
        if pipe in self._pipes or fd is None:
            return
        self._pipes[pipe] = self._ticks
        self._by_fd[fd] = pipe
        self._poll.register(fd, select.POLLIN)
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._due = loop.time() + self.interval
            self._timer = loop.call_at(self._due, self.tick)
            self._slack = 0

    def discard(self, pipe: StdoutPipe) -> None:
        """Stop reading `pipe` on the tick (before its descriptor closes); the timer stops
        with the last pipe."""
        if pipe not in self._pipes:
            return
        del self._pipes[pipe]
        fd = pipe.fileno()
        if fd is not None:
            del self._by_fd[fd]
            self._poll.unregister(fd)
        if not self._pipes and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def __contains__(self, pipe: object) -> bool:
        return pipe in self._pipes

    def tick(self) -> None:
        """Read each pipe on the tick that holds data or is at EOF, once (the timer calls
        this; so may a test); one that stayed empty for QUIET_TICKS ticks goes back to
        readiness.

        Only the pipes the poll found are visited (at fifty agents trickling, four of five
        are empty on a tick), in the order they joined the poll."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._ticks += 1
        read, busy = self._read_ready()
        pipes = self._pipes
        while pipes:
            oldest = next(iter(pipes))
            if self._ticks - pipes[oldest] < QUIET_TICKS:
                break
            oldest.to_readiness()  # its agent went quiet: its next line is worth a wake-up
        if read and self._after_tick is not None:
            try:
                self._after_tick()
            except Exception:
                logger.exception("after-tick hook failed")
        self._slack = self._slack + 1 if busy < self._release else 0
        if self._slack >= QUIET_TICKS:
            for pipe in tuple(self._pipes):
                pipe.to_readiness()  # the load is gone: each line is worth a wake-up again
        if self._pipes:
            loop = asyncio.get_running_loop()
            # A steady cadence; a late tick does not make the next one late too.
            self._due = max(self._due + self.interval, loop.time())
            self._timer = loop.call_at(self._due, self.tick)

    def _read_ready(self) -> tuple[int, int]:
        """Drain the pipes the poll finds with data or at EOF; (bytes read, pipes that had
        any). A pipe read moves to the back of `_pipes`, marked with this tick."""
        read = busy = 0
        pipes, by_fd = self._pipes, self._by_fd
        for fd, _events in self._poll.poll(0):  # POLLIN, or POLLHUP at EOF
            pipe = by_fd.get(fd)
            if pipe is None:
                continue  # it left the tick earlier in this one
            got = pipe.drain()
            read += got
            busy += got > 0
            if not got or pipe not in pipes:
                continue  # nothing (EOF closed it), or closed or paused meanwhile
            if got >= FULL_READ:
                pipe.to_readiness()  # flat out: waiting a tick would only fill the pipe
            else:
                del pipes[pipe]
                pipes[pipe] = self._ticks
        return read, busy


class StdoutPipe:
    """The read end of the agent's stdout (non-blocking; closed here). Everything read goes to
    the sink in order, then EOF. Reading starts at `attach`: what the agent writes before then
    waits in the pipe. `pause` stops reading (once the pipe is full the agent's writes block)."""

    def __init__(self, fd: int, ticker: PipeTicker | None = None) -> None:
        os.set_blocking(fd, False)
        self._fd: int | None = fd
        self._ticker = ticker
        self._sink: StdoutSink | None = None
        self._paused = False
        self._watching: asyncio.AbstractEventLoop | None = None  # whose readiness set it is on

    @property
    def closed(self) -> bool:
        """Closed: at EOF, a failed read or `close`."""
        return self._fd is None

    def fileno(self) -> int | None:
        """The pipe's descriptor; None once closed."""
        return self._fd

    @property
    def ticking(self) -> bool:
        """Read on the tick rather than on readiness."""
        return self._ticker is not None and self in self._ticker

    def attach(self, sink: StdoutSink) -> None:
        """Read into `sink` from now on."""
        self._sink = sink
        self._watch()

    def pause(self) -> None:
        """Stop reading until `resume` (backpressure: the agent blocks once the pipe fills)."""
        self._paused = True
        self._unwatch()
        self._untick()

    def resume(self) -> None:
        """Read again after `pause`, on readiness first."""
        if self._paused:
            self._paused = False
            self._watch()

    def close(self) -> None:
        """Stop reading and close the pipe; the sink hears nothing more."""
        self._unwatch()
        self._untick()
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def to_readiness(self) -> None:
        """Off the tick: read each time the pipe has data."""
        self._untick()
        self._watch()

    def _ready(self) -> None:
        got = self.drain()
        ticker = self._ticker
        if not 0 < got < SMALL_READ or ticker is None or self._watching is None:
            return  # nothing, or much (flat out), or closed or paused meanwhile
        if ticker.wants():
            self._unwatch()
            ticker.add(self)

    def drain(self) -> int:
        """Read until the pipe is empty (EOF: close, tell the sink); returns the bytes read
        (on readiness, or by the tick)."""
        got = 0
        while self._fd is not None and not self._paused:
            try:
                data = os.read(self._fd, READ_SIZE)
            except BlockingIOError:
                break
            except OSError as exc:  # nothing more can be read from it: as good as EOF
                logger.warning("agent stdout read failed: %s", exc)
                data = b""
            if not data:
                self.close()
                self._deliver(None)
                break
            got += len(data)
            self._deliver(data)
            if len(data) < READ_SIZE:
                break  # a pipe gives all it holds: a short read emptied it
        return got

    def _deliver(self, data: bytes | None) -> None:
        sink = self._sink
        assert sink is not None  # reads start at attach
        try:
            if data is None:
                sink.feed_eof()
            else:
                sink.feed(data)
        except Exception:  # the pipe stays readable: one bad read must not end the agent
            logger.exception("failed to take the agent's output")

    def _watch(self) -> None:
        if self._fd is None or self._sink is None or self._paused or self._watching is not None:
            return
        self._watching = asyncio.get_running_loop()
        self._watching.add_reader(self._fd, self._ready)

    def _unwatch(self) -> None:
        if self._watching is not None and self._fd is not None:
            self._watching.remove_reader(self._fd)
        self._watching = None

    def _untick(self) -> None:
        if self._ticker is not None:
            self._ticker.discard(self)
