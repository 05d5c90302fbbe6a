"""The agent's stdout pipe, read by c2 itself: on readiness while the agent is quiet or
streaming flat out, on a shared tick while it trickles.

A streaming model sends one line per chunk, tens of times a second. With fifty agents at once
each line woke the event loop on its own: an epoll return, a switch into the loop's thread with
cold caches, one small read. Those wake-ups, not the Python that handles a chunk, were most of
what a chunk cost the loop (docs/decisions.md, "Performance at load, eleventh slice").

So a pipe whose read on readiness came in small leaves the loop's readiness set and is read
on the next tick instead, with every other trickling pipe: one wake-up per tick for all of
them. The tick runs at the store's commit interval and then asks the store to commit
(`after_tick`), so what a tick reads is committed at once: a chunk waits for one interval, as
it already did for its commit, not for two. A pipe goes back to readiness when a tick finds it
fuller than a tick should (an agent streaming flat out: each read then carries many lines, and
waiting would only fill the pipe and block the agent) or empty for `QUIET_TICKS` ticks. The
first output after a quiet spell is read at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)

READ_SIZE = 256 * 1024
SMALL_READ = 16 * 1024  # a read on readiness below this moves the pipe to the tick
FULL_READ = 32 * 1024  # half a Linux pipe in one tick: back to readiness
QUIET_TICKS = 20  # consecutive empty ticks before a pipe goes back to readiness


class StdoutSink(Protocol):
    """Where the agent's stdout goes as it is read (NdjsonStdio)."""

    def feed(self, data: bytes) -> None:
        """One read, in order."""

    def feed_eof(self) -> None:
        """The pipe closed: nothing more comes."""


class PipeTicker:
    """The tick for trickling pipes: while any is on it, every `interval` seconds it reads
    each of them, then calls `after_tick` if anything was read."""

    def __init__(self, interval: float, after_tick: Callable[[], None] | None = None) -> None:
        self.interval = interval
        self._after_tick = after_tick
        self._pipes: dict[StdoutPipe, None] = {}  # an ordered set: read in the order they came
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0  # loop time of the next tick

    def add(self, pipe: StdoutPipe) -> None:
        """Read `pipe` on the tick from now on (the first tick is one interval away)."""
        self._pipes[pipe] = None
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._due = loop.time() + self.interval
            self._timer = loop.call_at(self._due, self.tick)

    def discard(self, pipe: StdoutPipe) -> None:
        """Stop reading `pipe` on the tick; the timer stops with the last pipe."""
        self._pipes.pop(pipe, None)
        if not self._pipes and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def __contains__(self, pipe: object) -> bool:
        return pipe in self._pipes

    def tick(self) -> None:
        """Read every pipe on the tick once (the timer calls this; so may a test)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        read = 0
        for pipe in tuple(self._pipes):
            read += pipe.tick()
        if read and self._after_tick is not None:
            try:
                self._after_tick()
            except Exception:
                logger.exception("after-tick hook failed")
        if self._pipes:
            loop = asyncio.get_running_loop()
            # A steady cadence; a late tick does not make the next one late too.
            self._due = max(self._due + self.interval, loop.time())
            self._timer = loop.call_at(self._due, self.tick)


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
        self._quiet = 0  # consecutive empty ticks

    @property
    def closed(self) -> bool:
        """Closed: at EOF, a failed read or `close`."""
        return self._fd is None

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

    def tick(self) -> int:
        """The tick's read: everything the pipe holds. Returns the bytes read."""
        got = self._drain()
        if not self.ticking:
            return got  # closed or paused meanwhile
        if got >= FULL_READ:
            self._untick()
            self._watch()
        elif got:
            self._quiet = 0
        else:
            self._quiet += 1
            if self._quiet >= QUIET_TICKS:
                self._untick()
                self._watch()
        return got

    def _ready(self) -> None:
        got = self._drain()
        if 0 < got < SMALL_READ and self._ticker is not None and self._watching is not None:
            self._unwatch()
            self._quiet = 0
            self._ticker.add(self)

    def _drain(self) -> int:
        """Read until the pipe is empty (EOF: close, tell the sink); returns the bytes read."""
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
        if self._fd is None or self._sink is None or self._paused or self._watching:
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
