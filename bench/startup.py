"""`c2 serve` start-up (issue 17): time to ready and idle memory, as a user starts it.

The real command in a subprocess (the tests' `C2Process`: `python -m c2.api.cli serve`,
SQLite in a temp home), timed from the exec to the first 200 from `/readyz` (probed every
5 ms): once on a fresh home (the migrations run) and --runs times on that existing home; then
the idle server's RSS and its CPU time spent starting (its own rusage, stable on a busy
machine where wall time is not). Last, the first uses after a start that load code or build
something once (the web client's page, an agent session, the OpenAPI document, the VAPID key),
each against a second one: how long it took, and the longest a `/healthz` probed every 5 ms
waited meanwhile (how long the event loop, so every stream and request, was held).

Run: .venv/bin/python -m bench.startup [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
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


class LoopProbe:
    """GET /healthz every POLL on a thread of its own; `longest()` is the longest round trip
    since the last `clear()`, in ms: how long the server's event loop was held meanwhile."""

    def __init__(self, server: C2Process) -> None:
        self._url = server.base_url
        self._waits: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> LoopProbe:
        self._thread.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(base_url=self._url) as http:
            while not self._stop.is_set():
                started = time.perf_counter()
                http.get("/healthz")
                self._waits.append((time.perf_counter() - started) * 1000)
                time.sleep(POLL)

    def clear(self) -> None:
        self._waits.clear()

    def longest(self) -> float:
        return max(self._waits)


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

    uses: list[tuple[str, Callable[[httpx.Client], object]]] = [
        ("GET / (the web client)", lambda http: http.get("/").raise_for_status()),
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
