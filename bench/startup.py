"""`c2 serve` start-up (issue 17): time to ready and idle memory, as a user starts it.

The real command in a subprocess (`python -m c2.api.cli serve`, SQLite in a temp home), timed
from the exec to the first 200 from `/readyz` (polled every 5 ms): once on a fresh home (the
migrations run) and --runs times on that existing home; then the idle server's RSS and its CPU
time spent starting (its own rusage, stable on a busy machine where wall time is not).

Run: .venv/bin/python -m bench.startup [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.fleet import cpu_seconds, rss_mib
from tests.ports import free_port

TARGETS = "targets (issue 17): ready < 1.5 s on an existing home (median), idle RSS < 100 MB"
REPO = Path(__file__).resolve().parents[1]


class Started:
    """One `c2 serve` run: its process, and how long it took to answer /readyz."""

    def __init__(self, home: Path) -> None:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("C2_")}
        began = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "c2.api.cli", "serve", "--home", str(home), "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = began + 60
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=1) as http:
            while time.perf_counter() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if http.get("/readyz").status_code == 200:
                        break
                if self.proc.poll() is not None:
                    raise SystemExit(f"c2 serve exited with {self.proc.returncode}")
                time.sleep(0.005)
            else:
                raise SystemExit("c2 serve did not become ready in 60 s")
        self.seconds = time.perf_counter() - began

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="starts on the existing home")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="c2-bench-startup-") as tmp:
        home = Path(tmp) / "home"
        fresh = Started(home)
        fresh.stop()
        times, cpu, rss = [], [], []
        for _ in range(args.runs):
            run = Started(home)
            times.append(run.seconds)
            cpu.append(cpu_seconds(run.proc.pid))
            time.sleep(1)  # idle memory: after start-up's garbage is collected
            rss.append(rss_mib(run.proc.pid))
            run.stop()
    print(f"fresh home: ready in {fresh.seconds:.2f} s (migrations included)")
    print(
        f"existing home, {args.runs} starts: ready median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}); CPU to ready median "
        f"{statistics.median(cpu):.2f} s; idle RSS median {statistics.median(rss):.0f} MB; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(TARGETS)


if __name__ == "__main__":
    main()
