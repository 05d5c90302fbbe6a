"""Two cluster members on one PostgreSQL (issue 18): cross-instance event latency and total
event throughput with two writers versus one.

Latency: an agent on member A emits `t=<wall ns>` chunks at a fixed rate (`/blast`, default
1,000/s); one client streams from A, one from B. Printed: agent → frame p50/p99/max on each,
and B minus A per event (the cost of crossing instances: A's commit, NOTIFY, B's log read,
B's fan-out), with the servers' own CPU per delivered frame. Throughput: agents flat out, on
A only (one writer), then on A and B at once (two writers), counting committed events per
second from a client of B that sees them all.

Needs PostgreSQL: `--database-url` or $C2_TEST_DATABASE_URL (a fresh schema is created and
dropped). Run: .venv/bin/python -m bench.cluster [--rate 1000] [--seconds 10] [--burst 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.fleet import cpu_seconds
from bench.sse_reader import RawSse
from tests.contract.pg import pg_schema_url
from tests.e2e.harness import C2Process, Client

TARGETS = "targets (issue 18): cross-instance p99 < 50 ms at 1,000 events/s"


def member(home: Path, url: str) -> C2Process:
    env = {"C2_DATABASE_URL": url, "C2_CLUSTER": "1", "C2_MAX_LIVE_AGENTS": "8"}
    return C2Process(home, env=env)


async def stamped(server: C2Process, path: str, expect: int, timeout: float) -> list[float]:
    """Agent → frame latencies (ms) of `expect` stamped chunks read on `path`."""
    sse = RawSse("127.0.0.1", server.port, path, server.bearer)
    await sse.open()
    latencies: list[float] = []
    try:
        async with asyncio.timeout(timeout):
            async for _seq, data in sse.frames():
                at = data.find('"text":"t=')
                if at < 0:
                    continue
                sent = int(data[at + 10 : data.index('"', at + 10)])
                latencies.append((time.time_ns() - sent) / 1e6)
                if len(latencies) >= expect:
                    break
    except TimeoutError:
        pass
    finally:
        await sse.close()
    return latencies


def summary(name: str, values: list[float]) -> str:
    if not values:
        return f"{name}: nothing received"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{name}: n={len(values)} p50={statistics.median(values):.1f} ms "
        f"p99={p99:.1f} ms max={ordered[-1]:.1f} ms"
    )


async def latency(a: C2Process, b: C2Process, workdir: Path, rate: int, seconds: int) -> None:
    total = rate * seconds
    client = Client(a)
    sid = (await client.new_session(workdir))["id"]
    path = f"/v1/events?session={sid}"
    cpu = (cpu_seconds(a.proc.pid), cpu_seconds(b.proc.pid))  # type: ignore[union-attr]
    readers = [
        asyncio.create_task(stamped(a, path, total, seconds * 3 + 30)),
        asyncio.create_task(stamped(b, path, total, seconds * 3 + 30)),
    ]
    await asyncio.sleep(0.5)  # both streams subscribed
    resp = await client.prompt(sid, f"/blast {total} {rate}")
    assert resp.status_code == 202, resp.text
    on_a, on_b = await asyncio.gather(*readers)
    used = (
        cpu_seconds(a.proc.pid) - cpu[0],  # type: ignore[union-attr]
        cpu_seconds(b.proc.pid) - cpu[1],  # type: ignore[union-attr]
    )
    await client.aclose()
    print(f"latency at {rate} events/s for {seconds} s (agent on A):")
    print("  " + summary("client of A", on_a))
    print("  " + summary("client of B", on_b))
    crossing = [b_ms - a_ms for a_ms, b_ms in zip(on_a, on_b, strict=False)]
    print("  " + summary("B minus A per event", crossing))
    frames = max(1, len(on_b))
    print(
        f"  server CPU per event: A {used[0] / frames * 1e6:.0f} us (commits, 1 stream), "
        f"B {used[1] / frames * 1e6:.0f} us (log reads, 1 stream)"
    )


async def burst(writers: list[C2Process], watcher: C2Process, workdir: Path, count: int) -> float:
    """Events/s committed while each of `writers` runs one agent flat out (`count` each)."""
    clients = [Client(w) for w in writers]
    sids = [(await c.new_session(workdir))["id"] for c in clients]
    expect = count * len(writers)
    sse = RawSse("127.0.0.1", watcher.port, "/v1/events", watcher.bearer)
    await sse.open()
    seen = 0
    first: float | None = None

    async def read() -> None:
        nonlocal seen, first
        async for _seq, data in sse.frames():
            if '"text":"t=' in data:
                first = first or time.monotonic()
                seen += 1
                if seen >= expect:
                    return

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.5)
    await asyncio.gather(
        *(c.prompt(s, f"/blast {count}") for c, s in zip(clients, sids, strict=True))
    )
    try:
        await asyncio.wait_for(reader, timeout=120)
    finally:
        await sse.close()
        for c in clients:
            await c.aclose()
    elapsed = time.monotonic() - (first or time.monotonic())
    return seen / max(elapsed, 1e-6)


async def main_async(args: argparse.Namespace) -> None:
    url = args.database_url or os.environ.get("C2_TEST_DATABASE_URL")
    if not url:
        sys.exit("bench.cluster needs --database-url or C2_TEST_DATABASE_URL (PostgreSQL)")
    with tempfile.TemporaryDirectory() as tmp, pg_schema_url("c2_bench", url) as schema_url:
        root = Path(tmp)
        workdir = root / "work"
        workdir.mkdir()
        a, b = member(root / "a", schema_url), member(root / "b", schema_url)
        a.start()
        b.bearer = a.bearer
        b.start()
        try:
            print(TARGETS)
            await latency(a, b, workdir, args.rate, args.seconds)
            one = await burst([a], b, workdir, args.burst)
            two = await burst([a, b], b, workdir, args.burst)
            print(f"throughput flat out: 1 writer {one:.0f} events/s, 2 writers {two:.0f} events/s")
        finally:
            b.stop()
            a.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url")
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--burst", type=int, default=20000)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
