"""Fleet load: S sessions, each agent streaming R chunks/s for T s, watched by 10 clients on the
global stream plus one client per session on `?session=`.

The agents run `/blast` (tests/agents/scripted_agent.py): pre-encoded ACP lines written in
batches, each chunk carrying its emission time, so the generator is not the bottleneck. Client
streams are spread over worker processes that only scan strings (no JSON) for the same reason.

Printed per fleet size: agent-line → client latency p50/p99/max (and the median of the first and
last quarter of the run: a growing backlog shows as the second far above the first), chunks
carried vs offered and lost, the server's own CPU (rusage of the `c2 serve` process: steadier
than latency, yet it moves with what waking cold code costs on a shared VM) per delivered frame
and as % of a core, its RSS, how long `GET /healthz` took meanwhile (a probe with its own client
every PROBE_INTERVAL: the loop that reads the agents answers requests too, so a loop held by
their output shows there), and `bench.reference` over the same window in its own process (that
cost of the machine, so a figure can be read beside it). First, what a live session holds on
c2's side (RSS growth per session after the first, each agent started and one prompt answered,
no stream open, on the fresh server). Before and after the fleet: the bare-reader ceiling (one
agent flat out into a reader that only splits lines) beside c2 flat out with 10 clients (which
only count, so they leave the cores to c2), as a ratio, with where the cores went; then a reader
that also parses each chunk and records it as two rows in SQLite (the least a server that keeps
every chunk does), to show how much of that ceiling any such server can reach.

Run: .venv/bin/python -m bench.fleet [--sessions 20,50] [--rate 100] [--seconds 20]
[--no-ceiling] [--flat-runs 3] [--profile FILE] [--nice-agents N] [--database-url URL]

c2 stores on SQLite in its home unless `--database-url` names a PostgreSQL: the run then uses a
fresh schema of it, dropped afterwards.

Where the S agents need more of the cores than the machine has to spare, c2's threads wait for a
core behind them; `--nice-agents N` runs the agents at that niceness, so such a run measures
c2 and the generator line shows the agents falling behind their schedule instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pstats
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from bench.profiling import pyspy
from bench.sse_reader import RawSse
from bench.writer import FloorRow, floor_db, floor_row, insert_chunks
from c2.core.store.database import COMMIT_INTERVAL
from tests.agents.scripted_agent import launch_spec
from tests.contract.pg import pg_schema_url
from tests.e2e.harness import C2Process, Client

TARGET_SESSION_KIB = 256  # issue 17: what a live session holds on c2's side
SESSION_MEMORY_COUNT = 20  # live sessions measured for it (session_memory)
TARGETS = (
    "targets (issue 17): 50x20/s and 20x100/s with 10+S clients: p99 < 25 ms, nothing lost, "
    "< 15 us server CPU per delivered frame; flat out with 10 clients >= 80% of the bare reader; "
    f"c2's RSS per live session < {TARGET_SESSION_KIB} KiB"
)
TICKS = os.sysconf("SC_CLK_TCK")
IDLE_SECONDS = 2.0
REPO = Path(__file__).resolve().parent.parent
# Seconds between the API probe's requests during a fleet run: ~5 requests a second add
# ~1-2 ms/s of server CPU, under 1 % of the 50 x 20 run's.
PROBE_INTERVAL = 0.2
PROFILING = REPO / "bench" / "profiling"  # its sitecustomize.py profiles inside the server
OUTSIDE_PROFILER = os.environ.get("C2_BENCH_PROFILER") == "py-spy"


# -- the server process as the kernel sees it ----------------------------------------------------


def _stat(path: Path) -> list[str]:
    """The fields of a /proc/<pid>/stat after the command name: [0] state, [1] parent pid,
    [11] user and [12] system CPU in clock ticks."""
    return path.read_text().rsplit(")", 1)[1].split()


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of `pid` (system: the kernel's work for it, such as the
    loopback TCP path of every socket write)."""
    fields = _stat(Path(f"/proc/{pid}/stat"))
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` itself (its threads included, its agents not)."""
    return sum(cpu_split(pid))


def children(pid: int) -> dict[int, list[str]]:
    """The live child processes of `pid` (the server's agents), with their stat fields."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = _stat(stat)
        except OSError:
            continue  # it ended meanwhile
        if int(fields[1]) == pid:
            found[int(stat.parent.name)] = fields
    return found


def children_cpu(pid: int) -> float:
    """User + system CPU of the live child processes of `pid` (the server's agents)."""
    return sum((int(f[11]) + int(f[12])) / TICKS for f in children(pid).values())


def nice_children(pid: int, niceness: int) -> None:
    """Lower the scheduling priority of `pid`'s agents (each its own process group)."""
    for child in children(pid):
        with contextlib.suppress(ProcessLookupError):
            os.setpriority(os.PRIO_PGRP, child, niceness)


def _by_role(pid: int, measure: Callable[[Path], float]) -> dict[str, float]:
    """`measure` of each of `pid`'s threads (its /proc task folder), summed by role: the event
    loop (the main thread) and the others (the store's writer and readers above all; Python
    does not name threads for the kernel)."""
    roles: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            value = measure(task)
        except OSError:
            continue  # it ended meanwhile
        role = "loop" if task.name == str(pid) else "other threads"
        roles[role] = roles.get(role, 0.0) + value
    return roles


def _task_cpu(task: Path) -> float:
    fields = _stat(task / "stat")
    return (int(fields[11]) + int(fields[12])) / TICKS


def _task_wakes(task: Path) -> float:
    status = (task / "status").read_text()
    return next(
        float(line.split()[1])
        for line in status.splitlines()
        if line.startswith("voluntary_ctxt_switches")
    )


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of `pid`'s threads by role (`_by_role`)."""
    return _by_role(pid, _task_cpu)


def thread_wakes(pid: int) -> dict[str, float]:
    """Voluntary context switches of `pid`'s threads by role (`_by_role`): each is a sleep
    and a wake-up, which on a shared 2-core VM cost 20-60 µs of CPU apiece and run the code
    after them cold (docs/decisions.md, "fourteenth slice"). Steadier than CPU from hour to
    hour: a count of work, not a time."""
    return _by_role(pid, _task_wakes)


def since(now: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """A by-role reading (thread_cpu, thread_wakes) less an earlier one of the same kind."""
    return {role: value - before.get(role, 0.0) for role, value in now.items()}


def thread_shares(cpu: dict[str, float], seconds: float, wakes: dict[str, float]) -> str:
    """`cpu` (a `since` of thread_cpu) as shares of a core over `seconds`, busiest first, each with
    its wake-ups a second (`wakes`: thread_wakes over the same window, if taken)."""
    busiest = sorted(cpu.items(), key=lambda kv: -kv[1])
    return ", ".join(
        f"{role} {spent / seconds:.1%}"
        + (f" ({wakes[role] / seconds:,.0f} wake-ups/s)" if role in wakes else "")
        for role, spent in busiest
    )


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the bare-reader ceiling ---------------------------------------------------------------------


async def bare_reader_rate(chunks: int, cwd: Path, durable: Path | None = None) -> float:
    """Chunks/s of one `/stamped` agent (the ACP SDK's own encoding per chunk, as a real agent
    pays it) into a reader that only splits its stdout into lines.

    With `durable` (a folder), the reader also does the least any server that records every
    chunk must: parse each line and insert its transcript row and event into c2's two tables
    on SQLite, one transaction per commit interval (bench/writer.py's floor database)."""
    db = floor_db(durable / "durable-reader.db") if durable is not None else None
    rows: list[FloorRow] = []
    flushed = time.monotonic()
    spec = launch_spec(cwd)
    proc = await asyncio.create_subprocess_exec(
        spec.command,
        *spec.args,
        env=spec.env,
        cwd=spec.cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 20,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout

    async def call(ident: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None
        message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        await proc.stdin.drain()
        marker = f'"id":{ident},'.encode()
        while True:
            line = await stdout.readline()
            if not line:
                raise RuntimeError("agent exited")
            if marker in line.replace(b" ", b"") and b'"result"' in line:
                reply: dict[str, Any] = json.loads(line)
                return reply

    try:
        await call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = await call(2, "session/new", {"cwd": str(cwd), "mcpServers": []})
        session = new["result"]["sessionId"]
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": f"/stamped {chunks}"}]}
        started = time.perf_counter()
        assert proc.stdin is not None
        proc.stdin.write(
            json.dumps(
                {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}
            ).encode()
            + b"\n"
        )
        await proc.stdin.drain()
        seen = 0
        while True:
            line = await stdout.readline()
            if b"agent_message_chunk" in line:
                seen += 1
                if db is not None:
                    text = json.loads(line)["params"]["update"]["content"]["text"]
                    rows.append(floor_row(session, seen, text))
                    if time.monotonic() - flushed >= COMMIT_INTERVAL:
                        insert_chunks(db, rows)
                        rows, flushed = [], time.monotonic()
            elif b'"id":3' in line.replace(b" ", b""):
                break
        if db is not None and rows:
            insert_chunks(db, rows)
        elapsed = time.perf_counter() - started
        assert seen == chunks, seen
        return chunks / elapsed
    finally:
        proc.kill()
        await proc.wait()
        if db is not None:
            db.close()


# -- client workers (separate processes) ---------------------------------------------------------


async def run_worker(spec: dict[str, Any]) -> None:
    """Read the given streams until each saw its expected `turn_ended` count; print a summary."""
    latencies: list[int] = []  # microseconds
    stamps: list[int] = []  # emission time, milliseconds since the epoch
    counts: list[int] = []

    async def consume(stream: RawSse, turns: int) -> None:
        frames = stream.frames()
        await anext(frames)  # welcome
        ready.set()
        chunks = ended = 0
        async for _seq, data in frames:
            at = data.find('"text":"t=')
            if at >= 0:
                stamp = int(data[at + 10 : data.index('"', at + 10)])
                latencies.append((time.time_ns() - stamp) // 1000)
                stamps.append(stamp // 1_000_000)
                chunks += 1
            elif '"turn_ended"' in data:
                ended += 1
                if ended == turns:
                    break
        counts.append(chunks)

    async def count(stream: RawSse, turns: int) -> None:
        counts.append(await stream.count(b'"text":"t=', b'"turn_ended"', turns, ready.set))

    streams = []
    for path, _turns in spec["paths"]:
        stream = RawSse("127.0.0.1", spec["port"], path, spec["bearer"])
        await stream.open()
        streams.append(stream)
    ready = asyncio.Event()
    tasks = [
        asyncio.create_task((count if spec.get("count_only") else consume)(s, turns))
        for s, (_p, turns) in zip(streams, spec["paths"], strict=True)
    ]
    await ready.wait()
    print("ready", flush=True)
    cpu_ready = time.process_time()  # this process's start-up is not the load's
    _done, pending = await asyncio.wait(tasks, timeout=spec["timeout"])
    for task in pending:
        task.cancel()
    for stream in streams:
        await stream.close()
    result = {
        "latencies_us": latencies,
        "stamps_ms": stamps,
        "counts": counts,
        "incomplete": len(pending),
        "cpu_s": time.process_time() - cpu_ready,
    }
    sys.stdout.write(json.dumps(result) + "\n")


@dataclass
class Worker:
    proc: subprocess.Popen[str]
    streams: int


def spawn_workers(
    server: C2Process,
    paths: list[tuple[str, int]],
    n: int,
    timeout: float,
    count_only: bool = False,
) -> list[Worker]:
    """`n` client processes reading `paths` (path, turns to wait for); `count_only`: they only
    count chunks (no latency), at a byte search per read instead of work per frame."""
    workers = []
    for i in range(n):
        mine = paths[i::n]
        if not mine:
            continue
        spec = {
            "port": server.port,
            "bearer": server.bearer,
            "paths": mine,
            "timeout": timeout,
            "count_only": count_only,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.fleet", "--worker", json.dumps(spec)],
            stdout=subprocess.PIPE,
            text=True,
        )
        workers.append(Worker(proc, len(mine)))
    for worker in workers:
        assert worker.proc.stdout is not None
        if worker.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("a client worker failed to connect")
    return workers


class Collected(NamedTuple):
    latencies_ms: list[float]  # in emission order
    counts: list[int]  # chunks per stream
    incomplete: int  # streams that did not finish
    cpu_s: float  # the workers' CPU from their streams' start to their end
    emitted_s: float  # from the first chunk's emission stamp to the last's


def collect(workers: list[Worker]) -> Collected:
    """What the client workers saw, once they finished."""
    pairs: list[tuple[int, int]] = []
    counts: list[int] = []
    incomplete = 0
    cpu = 0.0
    for worker in workers:
        out, _ = worker.proc.communicate()
        result = json.loads(out.strip().splitlines()[-1])
        pairs += zip(result["stamps_ms"], result["latencies_us"], strict=True)
        counts += result["counts"]
        incomplete += result["incomplete"]
        cpu += result["cpu_s"]
    pairs.sort()
    emitted = (pairs[-1][0] - pairs[0][0]) / 1000 if pairs else 0.0
    return Collected([lat / 1000 for _stamp, lat in pairs], counts, incomplete, cpu, emitted)


# -- one fleet run -------------------------------------------------------------------------------


@dataclass
class FleetResult:
    sessions: int
    rate: int
    seconds: float
    offered: int = 0
    delivered: int = 0
    lost: int = 0
    incomplete: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    early_ms: float = 0.0
    late_ms: float = 0.0
    cpu_s: float = 0.0
    system_s: float = 0.0
    wall_s: float = 0.0
    rss_mib: float = 0.0
    agents_cpu_s: float = 0.0  # the load generator: the S agents
    clients_cpu_s: float = 0.0  # the SSE client processes
    emitted_s: float = 0.0  # how long the agents took to emit their chunks (stamps)
    idle_cpu: float = 0.0  # the server's share of a core before the agents stream
    threads_s: dict[str, float] = field(default_factory=dict)  # the server's CPU by thread
    wakes: dict[str, float] = field(default_factory=dict)  # its threads' wake-ups (thread_wakes)
    api_ms: list[float] = field(default_factory=list)  # GET /healthz round trips meanwhile
    reference_us: float = 0.0  # bench.reference's median round meanwhile

    def generator(self) -> str:
        """Whether the agents kept their schedule: below ~95 % of the offered rate the load
        generator, not c2, is the limit (latency is measured from each chunk's own stamp, so
        a late generator does not show as latency)."""
        chunks = self.rate * self.seconds * self.sessions
        emitted = chunks / max(self.emitted_s, 1e-9)
        offered = self.rate * self.sessions
        return (
            f"agents emitted {emitted:,.0f} chunks/s of {offered:,} offered"
            f" ({emitted / offered:.0%}; {self.emitted_s:.1f} s for {self.seconds:.0f} s of chunks)"
        )

    def api(self) -> str:
        """How long a request waited meanwhile: the loop that reads the agents answers it too,
        so a loop held by the agents' output shows here first."""
        ordered = sorted(self.api_ms) or [float("nan")]
        return (
            f"API meanwhile (GET /healthz every {PROBE_INTERVAL * 1000:.0f} ms): "
            f"p50 {statistics.median(ordered):.1f} ms  p99 {percentile(ordered, 0.99):.1f}  "
            f"max {ordered[-1]:.1f}"
        )

    def line(self) -> str:
        ordered = sorted(self.latencies_ms) or [float("nan")]
        per_frame = self.cpu_s / max(1, self.delivered) * 1e6
        return (
            f"S={self.sessions:>3} x {self.rate}/s x {self.seconds:.0f}s: "
            f"latency p50 {statistics.median(ordered):7.1f} ms  "
            f"p99 {percentile(ordered, 0.99):7.1f}  "
            f"max {ordered[-1]:7.1f}  (first quarter {self.early_ms:.1f}, last {self.late_ms:.1f})"
            f"\n        frames {self.delivered}/{self.offered} lost {self.lost}"
            f"{f' (streams unfinished: {self.incomplete})' if self.incomplete else ''}  "
            f"server CPU {per_frame:6.1f} us/frame ({self.system_s / max(self.cpu_s, 1e-9):.0%} "
            f"system), {self.cpu_s / self.wall_s:5.1%} of a core, "
            f"RSS {self.rss_mib:.0f} MiB\n        server by thread: "
            f"{thread_shares(self.threads_s, self.wall_s, self.wakes)}"
            f"\n        {self.generator()}"
            f"\n        {self.api()}"
            f"\n        machine reference meanwhile (bench.reference: a thread woken every"
            f" 10 ms for a commit of 10 rows): {self.reference_us:.0f} us of CPU a round;"
            f" server CPU per frame per us of it {per_frame / max(self.reference_us, 1e-9):.3f}"
            " (to compare runs of one load made in the machine's fast and slow hours)"
            f"\n        machine ({os.cpu_count()} cores): server {self.cpu_s / self.wall_s:.0%}, "
            f"agents {self.agents_cpu_s / self.wall_s:.0%}, "
            f"clients {self.clients_cpu_s / self.wall_s:.0%} of a core; "
            f"server idle with the agents live and the streams open {self.idle_cpu:.1%}"
        )


async def create_sessions(http: Client, cwd: Path, count: int) -> list[str]:
    gate = asyncio.Semaphore(8)

    async def one() -> str:
        async with gate:
            return str((await http.new_session(cwd))["id"])

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def live_sessions(http: Client, cwd: Path, count: int) -> list[str]:
    """`count` new sessions, each agent started and its first prompt answered (warm-up)."""
    ids = await create_sessions(http, cwd, count)
    for sid in ids:
        assert (await http.prompt(sid, "/blast 5")).status_code == 202
    await wait_idle(http, ids, 120)
    return ids


async def session_memory(server: C2Process, cwd: Path, count: int) -> tuple[float, float]:
    """KiB of c2's RSS per live session (each agent running and one prompt answered, no stream
    open), over two batches of `count` on a server that has done nothing else yet: a server
    that streamed before reuses the memory it freed, and the growth would understate. The
    first session pays what any first one does (imports), so it is not counted. The first
    batch still fills what grows once to a bound (the pools' threads, the databases' page
    caches, the log's ring) and varies from run to run with it; the second batch is what
    each further session costs, the figure the target is about."""
    assert server.proc is not None
    http = Client(server)
    try:
        ids = await live_sessions(http, cwd, 1)
        batches = []
        for _ in range(2):
            rss0 = rss_mib(server.proc.pid)
            ids += await live_sessions(http, cwd, count)
            batches.append((rss_mib(server.proc.pid) - rss0) * 1024 / count)
        for sid in ids:
            await http.http.delete(f"/v1/sessions/{sid}")
    finally:
        await http.aclose()
    return batches[0], batches[1]


async def wait_idle(http: Client, sessions: list[str], timeout: float) -> None:
    async def idle(sid: str) -> bool:
        return bool((await http.snapshot(sid))["activity"]["state"]["kind"] == "idle")

    deadline = time.monotonic() + timeout
    for sid in sessions:
        while not await idle(sid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"session {sid} did not become idle")
            await asyncio.sleep(0.05)


async def fleet(
    server: C2Process,
    cwd: Path,
    sessions: int,
    rate: int,
    seconds: float,
    clients: int,
    workers: int,
    profile: Path | None = None,
    session_clients: bool = True,
    nice_agents: int = 0,
) -> FleetResult:
    assert server.proc is not None
    pid = server.proc.pid
    http = Client(server)
    result = FleetResult(sessions, rate, seconds)
    try:
        ids = await live_sessions(http, cwd, sessions)
        if nice_agents:
            nice_children(pid, nice_agents)
        chunks = int(rate * seconds)
        paths = [("/v1/events", sessions)] * clients
        if session_clients:
            paths += [(f"/v1/events?session={s}", 1) for s in ids]
        pool = spawn_workers(server, paths, workers, timeout=seconds * 3 + 60)
        # What S live agents and 10 + S open streams cost with nothing flowing: any work that
        # grows with sessions rather than chunks (a timer, a poll) shows here.
        idle0 = cpu_seconds(pid)
        await asyncio.sleep(IDLE_SECONDS)
        result.idle_cpu = (cpu_seconds(pid) - idle0) / IDLE_SECONDS
        profiling = None if profile is None else Profile(pid, profile)
        (user0, system0), wall0 = cpu_split(pid), time.perf_counter()
        threads0, wakes0 = thread_cpu(pid), thread_wakes(pid)
        agents0 = children_cpu(pid)
        probe = asyncio.create_task(probe_api(server, result.api_ms))
        reference = await machine_reference(seconds)
        await asyncio.gather(*(http.prompt(s, f"/blast {chunks} {rate}") for s in ids))
        seen = await asyncio.to_thread(collect, pool)
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe  # a probe that failed (the server gone) fails the run here
        latencies, counts, result.incomplete = seen.latencies_ms, seen.counts, seen.incomplete
        user, system = cpu_split(pid)
        result.threads_s = since(thread_cpu(pid), threads0)
        result.wakes = since(thread_wakes(pid), wakes0)
        result.agents_cpu_s = children_cpu(pid) - agents0
        result.clients_cpu_s = seen.cpu_s
        result.emitted_s = seen.emitted_s
        result.wall_s = time.perf_counter() - wall0
        result.cpu_s, result.system_s = user + system - user0 - system0, system - system0
        if profiling is not None:
            await profiling.stop()
        result.rss_mib = rss_mib(pid)
        result.reference_us = float((await reference.communicate())[0])
        result.offered = chunks * sessions * (clients + session_clients)
        result.delivered = sum(counts)
        result.lost = result.offered - result.delivered
        result.latencies_ms = latencies
        # In emission order: a backlog that grows makes the last quarter the slowest.
        quarter = max(1, len(result.latencies_ms) // 4)
        result.early_ms = statistics.median(result.latencies_ms[:quarter] or [0.0])
        result.late_ms = statistics.median(result.latencies_ms[-quarter:] or [0.0])
        for sid in ids:
            await http.http.delete(f"/v1/sessions/{sid}")
    finally:
        await http.aclose()
    return result


async def machine_reference(seconds: float) -> asyncio.subprocess.Process:
    """`bench.reference` over the next `seconds`, in its own process (the server's CPU per
    frame moves with what a cold wake-up costs on this VM; this prints that cost for the
    same window). Its stdout is the median round in µs."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.reference",
        "--seconds",
        str(seconds),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )


def percentile(ordered: list[float], q: float) -> float:
    """The `q` quantile (0.99: the 99th percentile) of `ordered` (ascending, not empty)."""
    return ordered[max(0, int(len(ordered) * q) - 1)]


async def probe_api(server: C2Process, into: list[float]) -> None:
    """GET /healthz every PROBE_INTERVAL until cancelled, each round trip (ms) into `into`.
    Its own client: behind the run's prompts in a shared pool it would time the pool. No
    timeout: a request the server holds for seconds is a figure, not a failure."""
    async with httpx.AsyncClient(base_url=server.base_url, timeout=None) as probe:
        while True:
            started = time.perf_counter()
            await probe.get("/healthz")
            into.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(PROBE_INTERVAL)


class Profile:
    """The server's profile over one window, written to `report`: bench/profiling's sampler
    or yappi inside the server (started and stopped by signals), or py-spy from outside it
    (C2_BENCH_PROFILER=py-spy: bench/profiling/pyspy.py)."""

    def __init__(self, pid: int, report: Path) -> None:
        self.pid, self.report = pid, report
        self._raw = Path(f"{report}.raw")
        self._outside = pyspy.start(pid, self._raw) if OUTSIDE_PROFILER else None
        if self._outside is None:
            os.kill(pid, signal.SIGUSR1)

    async def stop(self) -> None:
        """Stop profiling and wait until the report is written."""
        if self._outside is not None:
            await asyncio.to_thread(pyspy.stop, self._outside, self._raw, self.report)
            return
        done = Path(f"{self.report}.done")
        done.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 60
        while not done.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the server's profile was not written")
            await asyncio.sleep(0.2)


async def flat_out(
    server: C2Process, cwd: Path, chunks: int, clients: int, profile: Path | None = None
) -> tuple[float, str]:
    """Chunks/s of one `/stamped` session, flat out, delivered to `clients` global streams,
    and where the cores went meanwhile (profiled into `profile` if given)."""
    assert server.proc is not None
    pid = server.proc.pid
    http = Client(server)
    try:
        sid = (await http.new_session(cwd))["id"]
        await http.prompt(sid, "/blast 5")
        await wait_idle(http, [sid], 60)
        # Clients that read frame by frame would take ~0.9 of a core at these rates (~3 us per
        # frame each): counting only, they leave the cores to c2.
        pool = spawn_workers(server, [("/v1/events", 1)] * clients, 2, timeout=300, count_only=True)
        profiling = None if profile is None else Profile(pid, profile)
        started = time.perf_counter()
        (user0, system0), agent0 = cpu_split(pid), children_cpu(pid)
        threads0 = thread_cpu(pid)
        await http.prompt(sid, f"/stamped {chunks}")
        seen = await asyncio.to_thread(collect, pool)
        elapsed = time.perf_counter() - started
        threads = thread_shares(since(thread_cpu(pid), threads0), elapsed, {})
        user, system = cpu_split(pid)
        server_s = user + system - user0 - system0
        cores = (
            f"server {server_s / elapsed:.0%} ({threads}; "
            f"{(system - system0) / max(server_s, 1e-9):.0%} of it system), "
            f"agent {(children_cpu(pid) - agent0) / elapsed:.0%}, "
            f"clients {seen.cpu_s / elapsed:.0%} of a core"
        )
        if profiling is not None:
            await profiling.stop()
        assert min(seen.counts) == chunks, seen.counts
        await http.http.delete(f"/v1/sessions/{sid}")
        return chunks / elapsed, cores
    finally:
        await http.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", default="20,50", help="fleet sizes, comma-separated")
    parser.add_argument("--rate", type=int, default=100, help="chunks/s per session")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=10, help="global-stream clients")
    parser.add_argument("--workers", type=int, default=2, help="client processes")
    parser.add_argument(
        "--no-session-clients",
        action="store_true",
        help="only the global-stream clients (with --clients 1: what taking the chunks in and "
        "recording them costs, nearly without fan-out)",
    )
    parser.add_argument(
        "--nice-agents",
        type=int,
        default=0,
        metavar="N",
        help="run the load-generating agents at niceness N (1-19) in the fleet runs, so c2 "
        "does not wait for a core behind them (the generator line shows what they kept up)",
    )
    # Long enough that the turn's start and end (a fixed ~0.1-0.2 s) do not weigh on the rate.
    parser.add_argument("--ceiling-chunks", type=int, default=100_000)
    parser.add_argument(
        "--flat-runs",
        type=int,
        default=3,
        help="flat-out runs, each between two bare-reader runs; the median ratio is the figure",
    )
    parser.add_argument(
        "--no-ceiling", action="store_true", help="skip the flat-out runs (quick fleet figures)"
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="profile the server during c2's flat-out run and the (last) fleet run, reports "
        "printed at the end (bench/profiling: a stack sampler inside the server with its "
        "collector timings, yappi with C2_BENCH_PROFILER=yappi, or py-spy from outside with "
        "C2_BENCH_PROFILER=py-spy); FILE holds the fleet run's (py-spy: FILE.flat-out the other)",
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="run c2 on this PostgreSQL (in a fresh schema, dropped afterwards) instead of "
        "SQLite in its home",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sessions.split(",")]
    print(TARGETS)
    with tempfile.TemporaryDirectory() as tmp, database(args.database_url) as url:
        cwd = Path(tmp) / "project"
        cwd.mkdir()
        env = {
            # Room for every fleet's agents and session_memory's, none of them stopped as idle.
            "C2_MAX_LIVE_AGENTS": str(max(*sizes, 2 * SESSION_MEMORY_COUNT + 1) + 8),
            "C2_MAX_STREAMS_PER_DEVICE": str(max(sizes) + args.clients + 8),
        }
        if url is not None:
            env["C2_DATABASE_URL"] = url
        profile = Path(args.profile).resolve() if args.profile else None
        # The profilers inside the server write one report (FILE), py-spy any number.
        flat_profile = Path(f"{profile}.flat-out") if profile and OUTSIDE_PROFILER else profile
        flat_report = ""
        if profile is not None and not OUTSIDE_PROFILER:
            env["C2_BENCH_PROFILE"] = str(profile)
            env["PYTHONPATH"] = os.pathsep.join((str(PROFILING), str(REPO)))
        server = C2Process(Path(tmp) / "home", env=env)
        server.start()
        try:
            first, further = await session_memory(server, cwd, SESSION_MEMORY_COUNT)
            print(
                f"c2 per live session (each agent running and one prompt answered, no stream"
                f" open; two batches of {SESSION_MEMORY_COUNT}): RSS +{further:.0f} KiB each"
                f" (target < {TARGET_SESSION_KIB} KiB); the first batch +{first:.0f} KiB each,"
                " with what fills once to a bound",
                flush=True,
            )
            if not args.no_ceiling:
                flat_report = await print_flat_out(server, cwd, args, flat_profile, Path(tmp))
            for size in sizes:
                result = await fleet(
                    server,
                    cwd,
                    size,
                    args.rate,
                    args.seconds,
                    args.clients,
                    args.workers,
                    profile,
                    session_clients=not args.no_session_clients,
                    nice_agents=args.nice_agents,
                )
                print(f"{result.line()}  (load average {os.getloadavg()[0]:.1f})", flush=True)
        finally:
            server.stop()
    if flat_report:
        print(f"-- c2 flat out --\n{flat_report}-- the fleet run --")
    if profile is not None:
        print_profile(profile)


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str | None]:
    """`url` (PostgreSQL) narrowed to a fresh schema for the run, or None: SQLite in c2's home."""
    if url is None:
        yield None
        return
    with pg_schema_url("c2_fleet", url) as schema_url:
        print(f"store: PostgreSQL ({url.rsplit('@', 1)[-1]}, a fresh schema)", flush=True)
        yield schema_url


async def print_flat_out(
    server: C2Process, cwd: Path, args: argparse.Namespace, profile: Path | None, tmp: Path
) -> str:
    """c2 flat out against the bare reader measured right before and after it, `--flat-runs`
    times (one run varies by ±10 points on a shared 2-core machine), with the median ratio;
    then the reader that also records each chunk. The profile's report of the first c2 run
    (empty without `--profile`)."""
    chunks, clients = args.ceiling_chunks, args.clients
    ratios: list[float] = []
    report = ""
    ceiling = 0.0
    for run in range(max(1, args.flat_runs)):
        bare = await bare_reader_rate(chunks, cwd)
        c2, cores = await flat_out(server, cwd, chunks, clients, profile if run == 0 else None)
        if run == 0 and profile is not None:  # read before the fleet run's report replaces it
            report = profile.read_text()
        bare_after = await bare_reader_rate(chunks, cwd)
        ceiling = (bare + bare_after) / 2
        ratios.append(c2 / ceiling)
        print(
            f"flat out: bare reader {bare:.0f} / {bare_after:.0f} chunks/s "
            f"(before/after), c2 to {clients} clients {c2:.0f} chunks/s "
            f"= {ratios[-1]:.0%} ({cores})",
            flush=True,
        )
    durable = await bare_reader_rate(chunks, cwd, tmp)
    print(
        f"flat out, median of {len(ratios)}: {statistics.median(ratios):.0%} of the bare reader "
        f"(runs {', '.join(f'{r:.0%}' for r in ratios)}; target >= 80%)\n"
        f"          a reader that only parses and records each chunk (two rows, SQLite, no "
        f"clients): {durable:.0f} chunks/s = {durable / ceiling:.0%} "
        "of the last bare reader"
    )
    return report


def print_profile(path: Path, top: int = 30) -> None:
    """The server's profile: per thread the top functions by own time, then inclusive."""
    print(path.read_text())
    if Path(f"{path}.pstat").exists():
        stats = pstats.Stats(f"{path}.pstat")
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        asyncio.run(run_worker(json.loads(sys.argv[2])))
    else:
        asyncio.run(main())
