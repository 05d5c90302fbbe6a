"""End-to-end agent-chunk throughput and latency: agent stdout → committed → SSE clients.

Prints, for 1 and 10 SSE clients, chunks/s delivered to every client (each chunk committed
to the transcript and the event log before delivery) and per-chunk latency p50/p99 (the
agent stamps each chunk with its wall clock when it writes it), beside the raw ACP ceiling:
the same agent driven by c2's ACP client with no store and no streams.

Run: .venv/bin/python -m bench.turns [--chunks 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench.sse_reader import RawSse
from c2.core.agents.client import AgentProcess
from c2.core.agents.updates import AgentUpdate, PermissionAsk, TextChunk
from tests.agents.scripted_agent import launch_spec
from tests.e2e.harness import C2Process, Client


class CountingHandler:
    def __init__(self) -> None:
        self.chunks = 0

    def take_update(self, update: AgentUpdate) -> bool:
        if isinstance(update, TextChunk):
            self.chunks += 1
        return True

    async def on_update(self, update: AgentUpdate) -> None:
        self.take_update(update)

    async def on_permission(self, ask: PermissionAsk) -> str | None:
        return None


async def raw_ceiling(chunks: int, cwd: Path) -> float:
    """Chunks/s of the bare agent through c2's ACP client, nothing persisted."""
    handler = CountingHandler()
    agent = await AgentProcess.start(launch_spec(cwd), handler)
    try:
        session = (await agent.new_session(str(cwd))).acp_session_id
        await agent.prompt(session, "/stamped 100")  # warm-up
        handler.chunks = 0
        started = time.perf_counter()
        await agent.prompt(session, f"/stamped {chunks}")
        elapsed = time.perf_counter() - started
        assert handler.chunks == chunks, handler.chunks
        return chunks / elapsed
    finally:
        await agent.close()


async def through_c2(
    server: C2Process, clients: int, chunks: int, cwd: Path, rate: int | None = None
) -> dict[str, float]:
    """Saturation throughput (rate None: the agent writes flat out) or latency at `rate`."""
    http = Client(server)
    sid = (await http.new_session(cwd))["id"]
    streams = [
        RawSse("127.0.0.1", server.port, f"/v1/events?session={sid}", server.bearer)
        for _ in range(clients)
    ]
    latencies: list[float] = []

    async def consume(stream: RawSse, frames: AsyncIterator[tuple[int | None, str]]) -> float:
        # String scanning, not JSON: the client must not be the bottleneck it measures.
        async for _seq, data in frames:
            stamp = data.find('"text":"t=')
            if stamp >= 0:
                digits = data[stamp + 10 : data.index('"', stamp + 10)]
                latencies.append(time.time_ns() - int(digits))
            elif '"turn_ended"' in data:
                return time.perf_counter()
        raise RuntimeError("stream ended early")

    try:
        iterators = []
        for stream in streams:
            await stream.open()
            frames = stream.frames()
            await anext(frames)  # the welcome `sessions` frame
            iterators.append(frames)
        await http.prompt(sid, "/stamped 100")  # warm-up: agent started, session created
        await asyncio.gather(*(consume(s, f) for s, f in zip(streams, iterators, strict=True)))
        latencies.clear()
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(consume(s, f)) for s, f in zip(streams, iterators, strict=True)
        ]
        resp = await http.prompt(sid, f"/stamped {chunks} {rate or ''}".strip())
        assert resp.status_code == 202, resp.text
        finished = max(await asyncio.gather(*tasks))
    finally:
        for stream in streams:
            await stream.close()
        await http.aclose()
    assert len(latencies) == chunks * clients, len(latencies)
    ordered = sorted(latencies)
    return {
        "chunks_per_s": chunks / (finished - started),
        "p50_ms": statistics.median(ordered) / 1e6,
        "p99_ms": ordered[int(len(ordered) * 0.99) - 1] / 1e6,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--rate", type=int, default=1000, help="paced chunks/s for latency")
    parser.add_argument("--repeat", type=int, default=3, help="runs per throughput figure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp) / "project"
        cwd.mkdir()
        home = Path(tmp) / "home"
        home.mkdir()
        # Two cores shared by agent, server and client make single runs noisy: every
        # throughput figure is the median of `--repeat` runs.
        ceiling = statistics.median(
            [await raw_ceiling(args.chunks, cwd) for _ in range(args.repeat)]
        )
        print(f"raw ACP ceiling (no c2):  {ceiling:10.0f} chunks/s")
        server = C2Process(home)
        server.start()
        try:
            for clients in (1, 10):
                rate = statistics.median(
                    [
                        (await through_c2(server, clients, args.chunks, cwd))["chunks_per_s"]
                        for _ in range(args.repeat)
                    ]
                )
                print(
                    f"c2, {clients:>2} SSE client(s), flat out: {rate:8.0f} chunks/s"
                    f" ({rate / ceiling:5.1%} of ceiling)"
                )
            # Latency is only meaningful below saturation: past it, it measures the backlog.
            for clients in (1, 10):
                r = await through_c2(server, clients, args.rate * 2, cwd, rate=args.rate)
                print(
                    f"c2, {clients:>2} SSE client(s), {args.rate} chunks/s offered: "
                    f"latency p50 {r['p50_ms']:6.2f} ms  p99 {r['p99_ms']:6.2f} ms"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
