"""`c2 serve` start-up (issue 17): time to ready and idle memory, as a user starts it.

The real command in a subprocess (the tests' `C2Process`: `python -m c2.api.cli serve`,
SQLite in a temp home), timed from the exec to the first 200 from `/readyz` (probed every
5 ms): once on a fresh home (the migrations run) and --runs times on that existing home; then
the idle server's RSS and its CPU time spent starting (its own rusage, stable on a busy
machine where wall time is not). Last, the first uses after a start that load code or build
something once (the web client's page, an event stream, an agent session, the OpenAPI document,
the VAPID key), each against a second one: how long it took, and the longest a `/healthz` probed
every 5 ms from another process waited meanwhile (how long the event loop, so every stream and
request, was held).

Run: .venv/bin/python -m bench.startup [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.fleet import cpu_seconds, rss_mib
from tests.e2e.harness import C2Process

TARGETS = "targets (issue 17): ready < 1.5 s on an existing home (median), idle RSS < 100 MB"
POLL = 0.005  # /readyz probe interval, s (and /healthz's: LoopProbe)


# The probe runs in a process of its own: in this one, its round trips would also wait for this
# process's GIL, held by the very client code whose first use is being timed.
PROBE = """
import sys, time, httpx
with httpx.Client(base_url=sys.argv[1]) as http:
    while True:
        started = time.monotonic()
        http.get("/healthz")
        done = time.monotonic()
        print(done, (done - started) * 1000, flush=True)
        time.sleep(float(sys.argv[2]))
"""


class LoopProbe:
    """GET /healthz every POLL from a process of its own; `longest()` is the longest round trip
    that ended since the last `clear()`, in ms: how long the server's event loop was held
    meanwhile. (The probe stamps its round trips with the system's monotonic clock, which this
    process shares.)"""

    def __init__(self, server: C2Process) -> None:
        self._url = server.base_url
        self._waits: list[tuple[float, float]] = []  # (ended, ms)
        self._since = 0.0
        self._proc: subprocess.Popen[str] | None = None
        self._reader = threading.Thread(target=self._read)

    def __enter__(self) -> LoopProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, self._url, str(POLL)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reader.start()
        time.sleep(0.5)  # the probe's interpreter starts and its first round trips are in
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        self._proc.terminate()
        self._proc.wait()
        self._reader.join()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            ended, ms = line.split()
            self._waits.append((float(ended), float(ms)))

    def clear(self) -> None:
        self._since = time.monotonic()

    def longest(self) -> float:
        return max(ms for ended, ms in self._waits if ended >= self._since)


def _timed(
    probe: LoopProbe, http: httpx.Client, use: Callable[[httpx.Client], object]
) -> tuple[float, float]:
    """(ms `use` took, the loop's longest wait meanwhile and in the 0.5 s after it)."""
    probe.clear()
    started = time.perf_counter()
    use(http)
    took = (time.perf_counter() - started) * 1000
    time.sleep(0.5)  # whatever it started runs on; the probe goes on timing the loop
    return took, probe.longest()


def first_uses(server: C2Process, workdir: Path) -> list[tuple[str, float, float, float, float]]:
    """The first uses after a start that load code or build something once, each done twice:
    (what, ms the first took, the loop's longest wait meanwhile, the same two for the second).
    A session's create + first prompt pays the agent client's import on the first."""
    headers = {"Authorization": f"Bearer {server.bearer}"}
    made = 0

    def session(http: httpx.Client) -> None:
        nonlocal made
        made += 1
        cwd = workdir / f"first-{made}"
        cwd.mkdir()
        body = {"provider": {"custom": "scripted"}, "cwd": str(cwd), "use_worktree": False}
        sid = http.post("/v1/sessions", json=body).raise_for_status().json()["id"]
        prompt = {"doc": [{"type": "text", "text": "hello"}]}
        http.post(f"/v1/sessions/{sid}/prompt", json=prompt).raise_for_status()

    def stream(http: httpx.Client) -> None:
        with http.stream("GET", "/v1/events") as frames:
            frames.raise_for_status()
            for line in frames.iter_lines():
                if not line:
                    return  # the end of the first frame

    uses: list[tuple[str, Callable[[httpx.Client], object]]] = [
        ("GET / (the web client)", lambda http: http.get("/").raise_for_status()),
        ("an event stream's first frame", stream),
        ("a session and its first prompt", session),
        ("GET /openapi.json", lambda http: http.get("/openapi.json").raise_for_status()),
        ("GET /v1/push/vapid-public-key", lambda http: http.get("/v1/push/vapid-public-key")),
    ]
    figures = []
    with (
        LoopProbe(server) as probe,
        httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as http,
    ):
        for what, use in uses:
            first, second = (_timed(probe, http, use) for _ in range(2))
            figures.append((what, *first, *second))
    return figures


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
        server.start(poll=POLL)
        try:
            uses = first_uses(server, Path(tmp))
        finally:
            server.stop()
    print(f"fresh home: ready in {fresh:.2f} s (migrations included)")
    print(
        f"existing home, {args.runs} starts: ready median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}); CPU to ready median "
        f"{statistics.median(cpu):.2f} s; idle RSS median {statistics.median(rss):.0f} MB; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(TARGETS)
    print("first uses after a start (each twice): ms taken, and the loop's longest wait meanwhile")
    for what, took, wait, again, again_wait in uses:
        print(
            f"  {what:<32} first {took:5.0f} ms, loop held {wait:4.0f} ms;"
            f" second {again:5.0f} ms, loop held {again_wait:4.0f} ms"
        )


if __name__ == "__main__":
    main()
