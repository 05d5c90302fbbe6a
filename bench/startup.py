"""`c2 serve` start-up (issue 17): time to ready and idle memory, as a user starts it.

The real command in a subprocess (the tests' `C2Process`: `python -m c2.api.cli serve`,
SQLite in a temp home), timed from the exec to the first 200 from `/readyz` (probed every
5 ms): once on a fresh home (the migrations run) and --runs times on that existing home; then
the idle server's RSS and its CPU time spent starting (its own rusage, stable on a busy
machine where wall time is not).

Run: .venv/bin/python -m bench.startup [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.fleet import cpu_seconds, rss_mib
from tests.e2e.harness import C2Process

TARGETS = "targets (issue 17): ready < 1.5 s on an existing home (median), idle RSS < 100 MB"
POLL = 0.005  # /readyz probe interval, s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="starts on the existing home")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="c2-bench-startup-") as tmp:
        server = C2Process(Path(tmp) / "home")
        server.start(poll=POLL)
        fresh = server.ready_seconds
        server.stop()
        times, cpu, rss = [], [], []
        for _ in range(args.runs):
            server.start(poll=POLL)
            assert server.proc is not None
            times.append(server.ready_seconds)
            cpu.append(cpu_seconds(server.proc.pid))
            time.sleep(1)  # idle memory: after start-up's garbage is collected
            rss.append(rss_mib(server.proc.pid))
            server.stop()
    print(f"fresh home: ready in {fresh:.2f} s (migrations included)")
    print(
        f"existing home, {args.runs} starts: ready median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}); CPU to ready median "
        f"{statistics.median(cpu):.2f} s; idle RSS median {statistics.median(rss):.0f} MB; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(TARGETS)


if __name__ == "__main__":
    main()
