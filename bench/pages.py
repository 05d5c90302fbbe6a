"""Bounded by design (issue 17): the session list and a huge turn's transcript, by size.

The real app on real uvicorn (127.0.0.1, SQLite in a temp home) in this process, as in
bench/events.py; everything is seeded through the app's own Store (repositories, writer
thread, search index), then read over HTTP with one keep-alive client:

- `GET /v1/sessions` (first page) and a new stream's welcome frame, with 100 sessions and
  with --sessions (100,000) sessions stored: p50/p99 time and bytes;
- `GET /v1/sessions/{id}/transcript` of a session whose one turn streamed --chunks (100,000)
  text chunks: the newest page's bytes and p50, and every page walked back to the start.

Run: .venv/bin/python -m bench.pages [--sessions 100000] [--chunks 100000] [--reads 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx

from bench.events import SEED_BATCH, Server
from bench.transcript import timed
from c2.core.protocol.state import PromptPart, TextPart
from c2.core.session import SessionRecord
from c2.core.session_list import DEFAULT_LIMIT
from c2.core.store.database import UnitOfWork
from c2.core.transcript import PAGE_BYTES

TARGET_LIST_MS = 10.0  # issue 17: first page p50 with 100,000 sessions


def welcome(server: Server, http: httpx.Client) -> int:
    """Open a stream, read its welcome frame, close; the frame's bytes."""
    with http.stream("GET", "/v1/events") as resp:
        frame = b""
        for raw in resp.iter_raw():
            frame += raw
            if b"\n\n" in frame:
                return frame.index(b"\n\n")
    raise RuntimeError("the stream ended before its welcome frame")


def session_list(server: Server, http: httpx.Client, reads: int) -> dict[str, float]:
    first = http.get("/v1/sessions")
    assert first.status_code == 200 and len(first.json()["sessions"]) <= DEFAULT_LIMIT
    p50, p99 = timed(lambda: http.get("/v1/sessions").raise_for_status(), reads)
    w50, w99 = timed(lambda: welcome(server, http), max(20, reads // 4))
    return {
        "list p50": p50,
        "list p99": p99,
        "list bytes": len(first.content),
        "welcome p50": w50,
        "welcome p99": w99,
        "welcome bytes": welcome(server, http),
    }


def seed_turn(server: Server, chunks: int) -> str:
    """One session whose one turn streamed `chunks` text chunks; its id."""
    sid = "bench-long-turn"
    store = server.services.store
    record = SessionRecord(id=sid, provider="custom:echo", cwd="/tmp", title="long turn")
    server.run(store.write(lambda uow: uow.sessions.insert(record)))
    server.run(
        store.write(lambda uow: uow.parts.append(sid, "user", PromptPart(text="go", display="go")))
    )
    for low in range(0, chunks, SEED_BATCH):

        def append(uow: UnitOfWork, low: int = low) -> None:
            for n in range(low, min(chunks, low + SEED_BATCH)):
                uow.parts.append(sid, "agent", TextPart(text=f"token {n} of the long answer "))

        server.run(store.write(append))
    server.run(store.write(lambda uow: uow.search.turn_ended(sid)))
    return sid


def transcript(http: httpx.Client, sid: str, reads: int) -> dict[str, float]:
    path = f"/v1/sessions/{sid}/transcript"
    newest = http.get(path)
    assert newest.status_code == 200, newest.text
    p50, p99 = timed(lambda: http.get(path).raise_for_status(), reads)
    started = time.perf_counter()
    pages, total, before = 0, 0, None
    while True:
        resp = http.get(path, params={} if before is None else {"before": before})
        pages += 1
        total += len(resp.content)
        before = resp.json()["next_before"]
        if before is None:
            break
    walk = time.perf_counter() - started
    return {
        "newest bytes": len(newest.content),
        "newest entries": len(newest.json()["entries"]),
        "newest p50": p50,
        "newest p99": p99,
        "pages": pages,
        "all pages bytes": total,
        "all pages s": walk,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="c2-bench-pages-") as tmp:
        server = Server(Path(tmp))
        try:
            headers = {"Authorization": f"Bearer {server.bearer}"}
            base = f"http://127.0.0.1:{server.port}"
            with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
                small = 100
                server.seed_sessions(small)
                few = session_list(server, http, args.reads)
                started = time.perf_counter()
                server.seed_sessions(args.sessions, already=small)
                print(f"seeded {args.sessions:,} sessions in {time.perf_counter() - started:.0f} s")
                many = session_list(server, http, args.reads)
                started = time.perf_counter()
                sid = seed_turn(server, args.chunks)
                print(
                    f"seeded a {args.chunks:,}-chunk turn in {time.perf_counter() - started:.0f} s"
                )
                turn = transcript(http, sid, max(20, args.reads // 4))
        finally:
            server.stop()
    print(f"\n{'GET /v1/sessions (first page)':<34}{small:>12,}{args.sessions:>14,}")
    for name in few:
        unit = "" if "bytes" in name else " ms"
        print(f"{name + unit:<34}{few[name]:>12,.2f}{many[name]:>14,.2f}")
    ratio = many["list p50"] / few["list p50"]
    print(
        f"first page p50 with {args.sessions:,} sessions: {many['list p50']:.2f} ms"
        f" (target < {TARGET_LIST_MS:.0f} ms); /{small} ratio {ratio:.2f} (target < 2)"
    )
    print(
        f"welcome frame with {args.sessions:,} sessions: {many['welcome bytes']:,.0f} bytes"
        f" (bounded: {DEFAULT_LIMIT} sessions; before issue 17 every session, 4.6 MB at 10,000)"
    )
    print(f"\nTranscript of one turn of {args.chunks:,} chunks")
    for name, value in turn.items():
        unit = " ms" if name.endswith(("p50", "p99")) else ""
        print(f"  {name + unit:<24}{value:>14,.2f}")
    print(
        f"newest page {turn['newest bytes']:,.0f} bytes (target <= PAGE_BYTES {PAGE_BYTES:,});"
        f" before issue 17 one 7.4 MB page in ~2 s"
    )


if __name__ == "__main__":
    main()
