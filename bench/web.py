"""Web client budgets (issue 12), measured in Debian's Chromium against a real c2 (prints figures).

Run: `.venv/bin/python -m bench.web [--turns 1000] [--chunks 300]` after `make web`.

1. Initial JS + CSS, gzipped (budget < 150 KB).
2. Live chunk latency: the scripted agent streams `t=<ns>` chunks; an init script stamps each
   chunk when the page's fetch stream decodes the SSE bytes carrying it, a MutationObserver
   when it appears in the conversation's DOM; p50/p95 of the difference (budget p95 < 50 ms).
3. A 1,000-turn session: turns are bulk-written into the stopped server's SQLite store (as
   bench/transcript.py does), then the page loads the newest page, pages in every older one
   ("Load earlier messages"), scrolls the whole conversation top to bottom while animation
   frame gaps are recorded, and measures live chunk latency again with all 1,000 turns shown.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect, sync_playwright

from tests.e2e.harness import REPO, SCRIPTED, C2Process

DIST = REPO / "api" / "web_dist"
CHROMIUM = "/usr/bin/chromium"

# Records when each `t=<ns>` stamp arrives as SSE bytes and when it reaches the DOM.
PROBE = """
(() => {
  const arrived = new Map(), shown = new Map();
  window.__probe = { arrived, shown };
  const decode = TextDecoder.prototype.decode;
  TextDecoder.prototype.decode = function (...args) {
    const text = decode.apply(this, args);
    if (text.includes('"agent_text"')) {
      const now = performance.now();
      for (const m of text.matchAll(/t=(\\d+)/g)) if (!arrived.has(m[1])) arrived.set(m[1], now);
    }
    return text;
  };
  new MutationObserver(() => {
    const now = performance.now();
    const last = document.querySelector(
      'section[aria-label="Conversation"] article:last-of-type');
    if (!last) return;
    for (const m of (last.textContent || '').matchAll(/t=(\\d+)/g)) {
      if (!shown.has(m[1])) shown.set(m[1], now);
    }
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();
"""


# Clicks "Load earlier messages" until it is gone; per click, ms until the new turns are in the
# DOM and a frame has run, and the ms of the transcript fetch itself (resource timing).
PAGE_IN = """async () => {
  const turns = () =>
    document.querySelectorAll('section[aria-label="Conversation"] article').length;
  const button = () => [...document.querySelectorAll('button')]
    .find((b) => b.textContent === 'Load earlier messages');
  const out = [];
  for (let b = button(); b; b = button()) {
    const shown = turns();
    const started = performance.now();
    const grown = new Promise((resolve) => {
      const watch = new MutationObserver(() => {
        if (turns() !== shown) { watch.disconnect(); resolve(); }
      });
      watch.observe(document.body, { childList: true, subtree: true });
    });
    b.click();
    await grown;
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
    const fetches = performance.getEntriesByType('resource')
      .filter((e) => e.name.includes('/transcript'));
    out.push([performance.now() - started, fetches.at(-1).duration]);
  }
  return out;
}"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def asset_sizes() -> tuple[int, int]:
    """(raw, gzipped) bytes of the JS and CSS that index.html loads."""
    index = (DIST / "index.html").read_text(encoding="utf-8")
    raw = gz = 0
    for name in re.findall(r'(?:src|href)="/assets/([^"]+\.(?:js|css))"', index):
        data = (DIST / "assets" / name).read_bytes()
        raw += len(data)
        gz += len(gzip.compress(data, compresslevel=9))
    return raw, gz


def pair_url(server: C2Process) -> str:
    argv = [sys.executable, "-m", "c2.api.cli", "pair-url", "--home", str(server.home)]
    done = subprocess.run(
        [*argv, "--port", str(server.port)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    return done.stdout.strip().splitlines()[-1]


def chunk_latency(page: Page, chunks: int, rate: int) -> list[float]:
    """Send `/stamped`, wait for the turn to end, return per-chunk frame→DOM milliseconds."""
    page.evaluate("window.__probe.arrived.clear(); window.__probe.shown.clear()")
    page.get_by_role("textbox", name="Message").fill(f"/stamped {chunks} {rate}")
    page.get_by_role("button", name="Send").click()
    # Poll the probe (a role query over a 1,000-turn DOM is slow enough to miss the turn; the
    # page's CSP forbids the string eval that wait_for_function would use).
    deadline = time.monotonic() + 300
    while page.evaluate("window.__probe.shown.size") < chunks:
        assert time.monotonic() < deadline, "the stamped turn did not finish"
        page.wait_for_timeout(100)
    page.wait_for_timeout(300)
    pairs = page.evaluate(
        "[...window.__probe.arrived].filter(([k]) => window.__probe.shown.has(k))"
        ".map(([k, t]) => window.__probe.shown.get(k) - t)"
    )
    return [float(v) for v in pairs]


def bulk_turns(home: Path, session: str, turns: int) -> None:
    """Append `turns` complete turns to `session` in the (stopped) server's store."""
    conn = sqlite3.connect(home / "c2.db", isolation_level=None)
    top = conn.execute("SELECT MAX(seq) FROM parts WHERE session_id = ?", (session,)).fetchone()
    seq = (top[0] if top[0] is not None else -1) + 1
    rows: list[tuple[str, int, str, str]] = []
    for n in range(turns):
        text = f"Turn {n}: please look at module {n} and explain it."
        parts: list[tuple[str, dict[str, Any]]] = [
            ("user", {"kind": "prompt", "text": text, "display": text}),
            ("agent", {"kind": "reasoning", "text": "Reading the module first."}),
            ("agent", {"kind": "tool_call", "id": f"c{n}", "title": "Read", "status": "completed"}),
            ("agent", {"kind": "plan", "entries": ["Read", "Explain"]}),
        ]
        for chunk in range(5):
            words = f"Chunk {chunk} of answer {n}: **module {n}** does `thing {chunk}`. "
            parts.append(("agent", {"kind": "text", "text": words}))
        for role, part in parts:
            rows.append((session, seq, role, json.dumps(part)))
            seq += 1
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO parts (session_id, seq, role, part_json) VALUES (?, ?, ?, ?)", rows
    )
    conn.execute("COMMIT")
    conn.close()


IDLE_FRAMES = """async () => {
  const gaps = [];
  let last = performance.now();
  for (let i = 0; i < 120; i++) {
    await new Promise((resolve) => requestAnimationFrame(resolve));
    const now = performance.now();
    gaps.push(now - last);
    last = now;
  }
  return gaps;
}"""


def scroll_frames(page: Page) -> list[float]:
    """Animation-frame gaps (ms) while the conversation scrolls from top to bottom."""
    return [
        float(v)
        for v in page.evaluate(
            """async () => {
          const el = document.querySelector('.scroller');
          el.scrollTop = 0;
          await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
          const gaps = [];
          let last = performance.now();
          while (el.scrollTop + el.clientHeight < el.scrollHeight - 2) {
            el.scrollTop += 600;
            await new Promise(r => requestAnimationFrame(r));
            const now = performance.now();
            gaps.push(now - last);
            last = now;
          }
          return gaps;
        }"""
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--rate", type=int, default=50, help="chunks per second")
    args = parser.parse_args()
    if not (DIST / "index.html").exists():
        sys.exit("build the client first: make web")
    raw, gz = asset_sizes()
    print(f"initial JS+CSS: {raw / 1024:.1f} KB raw, {gz / 1024:.1f} KB gzipped (budget 150 KB)")

    home = Path(tempfile.mkdtemp(prefix="c2-bench-web-"))
    server = C2Process(home)
    server.start()
    headers = {"Authorization": f"Bearer {server.bearer}"}
    try:
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as http:
            body = {"provider": SCRIPTED, "cwd": str(home), "use_worktree": False}
            live_id = http.post("/v1/sessions", json=body).json()["id"]
            big_id = http.post("/v1/sessions", json=body).json()["id"]
        url = pair_url(server)
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM)
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.add_init_script(PROBE)
            page = context.new_page()
            page.goto(url)
            expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
            page.goto(f"{server.base_url}/#/s/{live_id}")
            expect(page.get_by_role("region", name="Conversation")).to_be_visible()
            lat = chunk_latency(page, args.chunks, args.rate)
            print(
                f"live chunk SSE frame → DOM ({len(lat)} chunks at {args.rate}/s): "
                f"p50 {statistics.median(lat):.1f} ms, p95 {pct(lat, 0.95):.1f} ms, "
                f"max {max(lat):.1f} ms (budget p95 50 ms)"
            )
            page.close()

            server.stop()
            bulk_turns(home, big_id, args.turns)
            server.start()
            page = context.new_page()
            started = time.perf_counter()
            page.goto(f"{server.base_url}/#/s/{big_id}")
            articles = page.get_by_role("region", name="Conversation").get_by_role("article")
            expect(articles.last).to_contain_text(f"answer {args.turns - 1}", timeout=60_000)
            first = (time.perf_counter() - started) * 1000
            timings = page.evaluate(PAGE_IN)
            page_ins = [float(t) for t, _ in timings]
            fetches = [float(f) for _, f in timings]
            total = articles.count()
            idle = [float(v) for v in page.evaluate(IDLE_FRAMES)]
            gaps = scroll_frames(page)
            print(
                f"{total}-turn session: newest page shown in {first:.0f} ms; "
                f"{len(page_ins)} older pages paged in, p50 {statistics.median(page_ins):.0f} ms, "
                f"p95 {pct(page_ins, 0.95):.0f} ms each (of which the HTTP read: p50 "
                f"{statistics.median(fetches):.0f} ms)"
            )
            print(
                f"scrolling all {total} turns: {len(gaps)} frames, frame gap p50 "
                f"{statistics.median(gaps):.1f} ms, p95 {pct(gaps, 0.95):.1f} ms, "
                f"max {max(gaps):.1f} ms (the same page idle, for scale: p50 "
                f"{statistics.median(idle):.1f} ms, p95 {pct(idle, 0.95):.1f} ms)"
            )
            lat = chunk_latency(page, min(args.chunks, 100), args.rate)
            print(
                f"live chunk → DOM with {total} turns shown: p50 {statistics.median(lat):.1f} ms, "
                f"p95 {pct(lat, 0.95):.1f} ms"
            )
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
