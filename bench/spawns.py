"""Agent starts in a growing server (issue 17): how long each new session's agent start holds
the event loop, so every stream and request, as the server's memory grows with live sessions.

The real command in a subprocess (the tests' `C2Process`, SQLite in a temp home). Sessions are
created one at a time, each with its scripted agent started and one prompt answered, until
--sessions are live; meanwhile a `/healthz` probed every 5 ms from another process times the
loop (bench/startup.py's `LoopProbe`). For each session: the longest wait the probe saw from
its create until it was idle. The first --skip are left out (they pay one-time imports and
pools). Printed: those waits' median, p90 and max, with the server's RSS before and after,
and the probe's longest round trip over a second of nothing (the floor of those waits).

Run: .venv/bin/python -m bench.spawns [--sessions 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench.fleet import live_sessions, percentile, rss_mib
from bench.startup import POLL, LoopProbe
from tests.e2e.harness import C2Process, Client

TARGET = "target: a new session's agent start holds the loop for no more than a request does"


async def measure(server: C2Process, cwd: Path, sessions: int) -> tuple[float, list[float]]:
    """The loop's longest wait (ms) over a second of nothing, and while each session was
    created and its prompt answered."""
    http = Client(server)
    waits: list[float] = []
    try:
        with LoopProbe(server) as probe:
            probe.clear()
            await asyncio.sleep(1)
            idle = probe.longest()
            for _ in range(sessions):
                probe.clear()
                await live_sessions(http, cwd, 1)
                await asyncio.sleep(0.05)  # the probe's round trip in flight comes back
                waits.append(probe.longest())
    finally:
        await http.aclose()
    return idle, waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--skip", type=int, default=3, help="first sessions left out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="c2-bench-spawns-") as tmp:
        env = {"C2_MAX_LIVE_AGENTS": str(args.sessions + 8)}
        server = C2Process(Path(tmp) / "home", env=env)
        server.start(poll=POLL)
        assert server.proc is not None
        try:
            time.sleep(1)
            rss0 = rss_mib(server.proc.pid)
            idle, waits = asyncio.run(measure(server, Path(tmp), args.sessions))
            waits = waits[args.skip :]
            rss1 = rss_mib(server.proc.pid)
        finally:
            server.stop()
    p90 = percentile(sorted(waits), 0.9)
    print(
        f"{len(waits)} agent starts (sessions {args.skip + 1}-{args.sessions}), the loop's longest "
        f"wait during each: median {statistics.median(waits):.1f} ms, p90 {p90:.1f}, "
        f"max {max(waits):.1f}; server RSS {rss0:.0f} -> {rss1:.0f} MiB"
    )
    print(
        f"{TARGET} (probe: GET /healthz every {POLL * 1000:.0f} ms; its longest round trip "
        f"over a second of nothing: {idle:.1f} ms)"
    )


if __name__ == "__main__":
    main()
