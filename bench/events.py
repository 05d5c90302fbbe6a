"""Event-log fan-out: commit throughput, SSE delivery to 1/10/100 clients, latency, idle memory,
a storm of new streams, 100 clients of which 10 stop reading, and a storm of resumes after a
restart.

The server (real app, real uvicorn on 127.0.0.1 on `c2 serve`'s event loop, SQLite in a temp
home) runs in this process; events are committed through its Store, one event per write job
(group commit batches them), each stamped with the wall clock inside its transaction. SSE
clients run in a subprocess (raw asyncio streams) and report receipt times, so latency is
commit → client receipt.

First the memory an idle stream holds, and 500 new streams opened at once (clients without a
position to resume from, each welcomed with the session list). Each client count then runs
twice: flat out (throughput; latency then includes queueing) and paced at --rate events/s
(rate/5 for 100 clients) for commit → receipt latency under steady load. Then 100 clients at
1,000 events/s for 10 s, and the same with 10 of them reading nothing after their welcome
frame (issue 17): the other 90 must lose nothing and keep their p99. Last, a restart, and 500
clients resuming at once with `Last-Event-ID`, as web clients do after a deploy (they each
authenticate with a fresh stream ticket; these with the bearer).

Run: .venv/bin/python -m bench.events [--events 5000] [--rate 5000] [--idle 100]
[--write-interval-ms 10]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.fleet import cpu_seconds
from c2.api.app import create_app
from c2.api.server import C2Server, build_server
from c2.api.services import Services
from c2.api.settings import Settings
from c2.core.auth import create_device
from c2.core.protocol.events import ErrorEvent
from c2.core.session import SessionRecord, utcnow
from c2.core.store.database import UnitOfWork, sqlite_url

WINDOW = 1024  # write jobs in flight at once
SEED_BATCH = 2_000  # rows per seeding write job (sessions here, chunks in bench/pages.py)
# The measure of an idle stream: RSS growth over 100 streams, 100 sessions stored.
IDLE_SESSIONS = 100
# New streams opened at once: one welcome read shared, not one each.
STORM_STREAMS = 500
# Events each client of the resume storm missed before the restart.
RESUME_MISSED = 10
PACE_TICK = 0.002  # seconds between paced submissions
LATENCY_STREAMS = 10  # streams per client process whose every event is timed
# Issue 17's stalled readers: 100 clients at 1,000 events/s for 10 s, 10 of them not reading.
STALL_RATE = 1000.0
STALL_EVENTS = 10_000
STALLED_RCVBUF = 4096  # bytes: the kernel's minimum, more or less
# Characters added to each event of that run: the kernel buffers up to 4 MiB for a stream
# that is not read (tcp_wmem), so 10,000 events of ~1 KiB outgrow it and the sends block.
STALL_PAD = 1000


# -- client side (subprocess) ------------------------------------------------------------------
# HTTP/1.0 keeps the body un-chunked, so frames are counted and stamps extracted from whole
# reads with C-speed bytes methods; the measuring client must not eat the server's CPU.

EVENT_MARK = b'data: {"kind":"event"'
STAMP = re.compile(rb'"message":"([0-9.]+)')


class Stream:
    def __init__(self, port: int, bearer: str) -> None:
        self.port, self.bearer = port, bearer
        self.carry = b""

    async def open(self, stalled: bool = False, after: int | None = None) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if stalled:
            # A reader that stops: a small receive buffer closes its TCP window within a few
            # frames, so the server's sends to it block (as for a phone gone to sleep).
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, STALLED_RCVBUF)
        sock.connect(("127.0.0.1", self.port))
        self.reader, self.writer = await asyncio.open_connection(sock=sock)
        resume = "" if after is None else f"Last-Event-ID: {after}\r\n"
        self.writer.write(
            f"GET /v1/events HTTP/1.0\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {self.bearer}\r\n{resume}\r\n".encode()
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n", 1)[0], head
        while b"\n\n" not in self.carry:  # the welcome `sessions` frame, or the first replayed
            self.carry += await self.reader.read(1 << 16)
        self.carry = self.carry[self.carry.index(b"\n\n") + 2 :]

    async def read(self, expect: int, timed: bool) -> dict[str, Any]:
        latencies: list[float] = []
        count, first, last = 0, 0.0, 0.0
        while count < expect:
            data = await self.reader.read(1 << 18)
            if not data:
                break
            now = time.time()
            buf = self.carry + data
            cut = buf.rfind(b"\n\n") + 2
            complete, self.carry = buf[:cut], buf[cut:]
            count += complete.count(EVENT_MARK)
            if timed:
                latencies += [now - float(stamp) for stamp in STAMP.findall(complete)]
            first = first or now
            last = now
        return {"count": count, "first": first, "last": last, "latencies": latencies}

    def close(self) -> None:
        self.writer.close()


async def _client(args: argparse.Namespace) -> None:
    """`--streams` streams (resuming after `--after`, if given); the first `--stall` read their
    first frame and then nothing; with `--hold` they stay open until stdin closes, else each
    reads `--expect` events and the results are printed."""
    streams, stall, after = args.streams, args.stall, args.after
    conns = [Stream(args.port, args.bearer) for _ in range(streams)]
    print("opening", flush=True)
    await asyncio.gather(*(c.open(stalled=i < stall, after=after) for i, c in enumerate(conns)))
    print("ready", flush=True)
    if args.hold:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        return
    readers = conns[stall:]
    results = await asyncio.gather(
        *(c.read(args.expect, i < LATENCY_STREAMS) for i, c in enumerate(readers))
    )
    print(json.dumps(results), flush=True)
    for c in conns:
        c.close()


# -- server side -------------------------------------------------------------------------------


class Server:
    def __init__(
        self, home: Path, write_interval_ms: float = Settings.stream_write_interval_ms
    ) -> None:
        self.home, self.write_interval_ms = home, write_interval_ms
        # Every bench stream is one device's: lift the per-device stream cap (docs/security.md).
        settings = Settings(
            home=home,
            database_url=sqlite_url(home),
            port=0,
            stream_backlog=4096,
            max_streams_per_device=10_000,
            stream_write_interval_ms=write_interval_ms,
        )
        self.app = create_app(settings)
        ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

        async def on_started(_server: C2Server) -> None:
            self.loop = asyncio.get_running_loop()
            ready.set()

        self.server = build_server(
            self.app, settings, on_started=on_started, log_level="warning", access_log=False
        )
        self.thread = threading.Thread(target=self.server.serve_here)  # on c2 serve's loop
        self.thread.start()
        if not ready.wait(30):
            raise RuntimeError("server did not start")
        self.port = self.server.bound[1]
        paired = self.run(self.services.store.write(lambda uow: create_device(uow, "bench")))
        self.bearer = paired.bearer

    @property
    def services(self) -> Services:
        services = self.server.services
        assert services is not None
        return services

    def run(self, coro: Any, timeout: float = 120) -> Any:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def seed_sessions(self, count: int, already: int = 0) -> None:
        """Sessions `already`..`count`-1, a second apart, through the app's store."""
        start = utcnow() - timedelta(seconds=count)
        for low in range(already, count, SEED_BATCH):
            records = [
                SessionRecord(
                    id=f"bench-{n:07d}",
                    provider="custom:echo",
                    cwd="/tmp",
                    title=f"Bench session {n}",
                    created_at=start + timedelta(seconds=n),
                )
                for n in range(low, min(count, low + SEED_BATCH))
            ]

            def insert(uow: UnitOfWork, records: list[SessionRecord] = records) -> None:
                for rec in records:
                    uow.sessions.insert(rec)

            self.run(self.services.store.write(insert))

    async def produce(
        self, count: int, rate: float | None = None, pad: int = 0
    ) -> tuple[float, float]:
        """Commit `count` stamped events (each `pad` characters longer), one write job each,
        as fast as possible or paced at `rate` events/s; (start, end) wall times."""
        store = self.services.store
        padding = " " + "x" * pad if pad else ""

        def job(uow: UnitOfWork) -> None:
            message = f"{time.time():.6f}{padding}"
            uow.emit(ErrorEvent(session=None, message=message, terminal=False))

        start = time.time()
        pending: deque[asyncio.Future[None]] = deque()
        per_tick = count if rate is None else max(1, round(rate * PACE_TICK))
        sent = 0
        while sent < count:
            for _ in range(min(per_tick, count - sent)):
                pending.append(store.submit(job))
                sent += 1
                if len(pending) >= WINDOW:
                    await pending.popleft()
            if rate is not None:
                await asyncio.sleep(max(0.0, start + sent / rate - time.time()))
        while pending:
            await pending.popleft()
        return start, time.time()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def _spawn(
    server: Server, streams: int, expect: int, idle: bool, stall: int = 0
) -> subprocess.Popen[str]:
    """A client process with its streams open (each has had its welcome frame)."""
    proc = _client_process(server, streams, expect, idle, stall)
    _await_line(proc, "opening")
    _await_line(proc, "ready")
    return proc


def _client_process(
    server: Server,
    streams: int,
    expect: int,
    idle: bool,
    stall: int = 0,
    after: int | None = None,
) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "bench.events", "--client", "--port", str(server.port)]
    args += [f"--bearer={server.bearer}", "--streams", str(streams), "--expect", str(expect)]
    args += ["--stall", str(stall)] + ([] if after is None else ["--after", str(after)])
    return subprocess.Popen(
        args + (["--hold"] if idle else []),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )


def _await_line(proc: subprocess.Popen[str], expected: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != expected:
        proc.kill()
        raise RuntimeError(f"client said {line!r}, not {expected!r}")


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _deliver(
    server: Server, streams: int, events: int, rate: float | None, stall: int = 0, pad: int = 0
) -> dict[str, float]:
    """Commit `events` (flat out, or paced at `rate`/s) to `streams` clients, `stall` of which
    stop reading after their welcome frame; throughput and latency of the others, and how
    many events they missed (each must see every one)."""
    proc = _spawn(server, streams, events, idle=False, stall=stall)
    start, committed = server.run(server.produce(events, rate, pad))
    lagging = server.services.bus.lagging_count  # all committed: the stalled ones are behind
    out, _ = proc.communicate(timeout=120)
    results = json.loads(out.strip().splitlines()[-1])
    last = max(r["last"] for r in results)
    latencies = [lat for r in results for lat in r["latencies"]]
    return {
        "committed": events / (committed - start),
        "delivered": events / (last - start),
        "p50": statistics.median(latencies) * 1e3,
        "p99": _pct(latencies, 0.99) * 1e3,
        "lost": sum(events - r["count"] for r in results),
        "lagging": lagging,
    }


def fan_out(server: Server, streams: int, events: int, rate: float) -> None:
    """Throughput flat out, then latency at a steady `rate` (queueing excluded)."""
    flat = _deliver(server, streams, events, None)
    paced = _deliver(server, streams, max(1000, int(rate * 2)), rate)
    assert flat["lost"] == paced["lost"] == 0, "a client missed events"
    print(
        f"{streams:>4} clients | flat out: committed {flat['committed']:>7,.0f} ev/s, "
        f"delivered {flat['delivered']:>7,.0f} ev/s per client "
        f"({streams * flat['delivered']:>7,.0f} frames/s), p99 {flat['p99']:5.1f} ms | "
        f"at {rate:,.0f} ev/s: p50 {paced['p50']:5.1f} ms, p99 {paced['p99']:5.1f} ms",
        flush=True,
    )


def stalled_readers(server: Server, streams: int, stalled: int, rate: float, events: int) -> None:
    """Issue 17: `streams` clients at `rate` events/s, then the same with `stalled` of them
    not reading; the readers must lose nothing, their p99 stay under 50 ms and within twice
    the run without stalled readers. A stalled stream's sends block; its backlog overflows
    and it is dropped after the send timeout, while the others go on."""
    calm = _deliver(server, streams, events, rate, pad=STALL_PAD)
    stuck = _deliver(server, streams, events, rate, stall=stalled, pad=STALL_PAD)
    ratio = stuck["p99"] / calm["p99"] if calm["p99"] > 0 else float("inf")
    print(
        f"{streams:>4} clients at {rate:,.0f} ev/s, {stalled} not reading: the other "
        f"{streams - stalled} lost {stuck['lost']:.0f}, p50 {stuck['p50']:5.1f} ms, p99 "
        f"{stuck['p99']:5.1f} ms | none stalled: lost {calm['lost']:.0f}, p99 "
        f"{calm['p99']:5.1f} ms | ratio {ratio:.2f}; streams behind at the end "
        f"{stuck['lagging']:.0f} (none stalled: {calm['lagging']:.0f}) "
        "(targets: lost 0, p99 < 50 ms, ratio <= 2)",
        flush=True,
    )


def idle_memory(server: Server, streams: int) -> None:
    """Memory per idle stream, `IDLE_SESSIONS` sessions stored (so each welcome frame is a full
    page). RSS first, as the issue measured it, with tracemalloc off (its own bookkeeping for
    every allocation grows RSS as much as the streams do): one stream pays what a first stream
    pays once, then `streams` open at once (their welcomes' garbage, freed but kept by the
    allocator, counts too), then `streams` more beside them (built in memory the first batch's
    garbage left free: nearly what each holds). Then the Python objects a further `streams`
    hold (tracemalloc): what each stream costs, whatever the allocator does."""
    server.seed_sessions(IDLE_SESSIONS)
    held_open = [_spawn(server, 1, 0, idle=True)]
    rss = [_settled_rss_kib()]
    for _ in range(2):
        held_open.append(_spawn(server, streams, 0, idle=True))
        rss.append(_settled_rss_kib())
    tracemalloc.start()
    try:
        held_before = tracemalloc.get_traced_memory()[0]
        held_open.append(_spawn(server, streams, 0, idle=True))
        time.sleep(1.0)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - held_before
    finally:
        tracemalloc.stop()
    subscribers = server.services.bus.subscriber_count
    for proc in held_open:
        proc.communicate("", timeout=30)
    first, beside = (rss[1] - rss[0]) / streams, (rss[2] - rss[1]) / streams
    print(
        f"idle streams ({subscribers} open, {IDLE_SESSIONS} sessions stored), per stream: RSS "
        f"+{first:.1f} KiB for {streams} opened at once after a first one, +{beside:.1f} KiB for "
        f"{streams} more beside them; Python objects held {held / 1024 / streams:.1f} KiB "
        f"(target < 32 KiB)",
        flush=True,
    )
    time.sleep(0.5)  # the closed streams' tasks finish


def welcome_storm(server: Server, streams: int) -> None:
    """`streams` new streams opened at once (page loads after a deploy, say): from the first
    connect until every stream has its welcome frame (`_storm`), the server's CPU per stream,
    and the session-list reads their welcomes took."""
    feed = server.services.feed
    proc = _client_process(server, streams, 0, idle=True)
    took, used, reads = _storm(proc, lambda: feed.welcome_reads)
    print(
        f"new streams: {streams} opened at once ({IDLE_SESSIONS} sessions stored), "
        f"all welcomed in {took * 1000:.0f} ms, server CPU {used * 1000 / streams:.2f} ms per "
        f"stream, {reads} session-list read(s)",
        flush=True,
    )
    time.sleep(0.5)  # the closed streams' tasks finish


def resume_storm(server: Server, streams: int, missed: int) -> Server:
    """A restart, then `streams` clients resuming at once with `Last-Event-ID`, each having
    missed the last `missed` events before it (web clients reconnecting after a deploy):
    from the first connect until every stream has its first replayed frame, the server's CPU
    per stream, and how many of their replays read the log. Returns the restarted server."""
    head = server.run(server.services.store.read(lambda r: r.events.last_seq()))
    server.stop()
    restarted = Server(server.home, server.write_interval_ms)
    feed, auth = restarted.services.feed, restarted.services.auth
    proc = _client_process(restarted, streams, 0, idle=True, after=head - missed)
    bearer_reads = auth.bearer_reads
    took, used, reads = _storm(proc, lambda: feed.log_reads)
    print(
        f"resumed streams: {streams} resuming at once after a restart, {missed} events missed "
        f"each, all replayed in {took * 1000:.0f} ms, server CPU {used * 1000 / streams:.2f} ms "
        f"per stream, {reads} replay(s) read from the log, "
        f"{auth.bearer_reads - bearer_reads} bearer read(s)",
        flush=True,
    )
    return restarted


def _storm(proc: subprocess.Popen[str], count: Callable[[], int]) -> tuple[float, float, int]:
    """From the client's first connect until each of its streams has its first frame: the
    seconds, the server's CPU seconds (this process's, whose only other thread waits on the
    client), and how much `count` grew meanwhile."""
    _await_line(proc, "opening")
    before, cpu, start = count(), cpu_seconds(os.getpid()), time.monotonic()
    _await_line(proc, "ready")
    took, used = time.monotonic() - start, cpu_seconds(os.getpid()) - cpu
    proc.communicate("", timeout=30)
    return took, used, count() - before


def _settled_rss_kib() -> int:
    """RSS once the streams just opened have sent their welcome frames and gone idle."""
    time.sleep(1.0)
    gc.collect()
    return _rss_kib()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--idle", type=int, default=100)
    parser.add_argument("--rate", type=float, default=5000, help="paced rate for latency")
    parser.add_argument(
        "--write-interval-ms",
        type=float,
        default=Settings.stream_write_interval_ms,
        help="C2_STREAM_WRITE_INTERVAL_MS: latency traded for fewer socket writes",
    )
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--bearer", default="", help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--expect", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stall", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--after", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        asyncio.run(_client(args))
        return
    with tempfile.TemporaryDirectory(prefix="c2-bench-") as tmp:
        server = Server(Path(tmp) / "home", args.write_interval_ms)
        try:
            server.run(server.produce(1000))  # warm-up: connections, statements, page cache
            idle_memory(server, args.idle)
            welcome_storm(server, STORM_STREAMS)
            for streams, rate in ((1, args.rate), (10, args.rate), (100, args.rate / 5)):
                fan_out(server, streams, args.events, rate)
            stalled_readers(server, 100, 10, STALL_RATE, STALL_EVENTS)
            server = resume_storm(server, STORM_STREAMS, RESUME_MISSED)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
