"""Every bench script imports and answers --help: a rename in one bench (or in the code they
import) must fail here, not when someone next runs `make bench`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.profiling.pyspy import summarize
from bench.reference import cold_rounds
from bench.sse_reader import RawSse

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(
    path.stem
    for path in (ROOT / "bench").glob("*.py")
    if path.stem != "__init__" and "__main__" in path.read_text(encoding="utf-8")
)


def test_the_bench_folder_has_scripts() -> None:
    assert {"events", "fleet", "startup", "cluster"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_imports_and_explains_itself(script: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"bench.{script}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def test_the_machine_reference_takes_at_most_one_round_per_tick() -> None:
    """bench.reference's rounds are paced: each waits out its interval before it commits (a
    cold wake-up, as the store's writer has), so a window holds at most one round per tick,
    and each round reports the CPU its commit took."""
    rounds = cold_rounds(0.2, interval=0.02)
    assert 1 <= len(rounds) <= 10
    assert all(cpu > 0 for cpu in rounds)


def _count(reads: list[bytes]) -> tuple[int, int]:
    """(chunks counted, welcomes seen) of RawSse.count over a body arriving as `reads`."""
    reader = RawSse("127.0.0.1", 0, "/", "")

    async def body() -> AsyncIterator[bytes]:
        for data in reads:
            yield data

    reader._body = body  # type: ignore[method-assign]
    welcomes: list[bool] = []
    found = asyncio.run(
        reader.count(b'"text":"t=', b'"turn_ended"', 1, lambda: welcomes.append(True))
    )
    return found, len(welcomes)


def test_the_counting_client_counts_each_chunk_once_however_reads_split_it() -> None:
    """bench.fleet's flat-out clients count bytes, not frames: a chunk split across two reads
    (at any byte) counts once, the welcome frame's bytes are skipped, and counting stops at the
    last awaited turn end."""
    welcome = b'data: {"kind":"sessions","note":{"text":"t=0"}}\n\n'  # a marker: skipped
    chunk = b'id: 7\ndata: {"kind":"event","event":{"text":"t=123"}}\n\n'
    end = b'data: {"event":"turn_ended"}\n\n'
    body = welcome + chunk * 3 + end + chunk  # the chunk after the turn's end is not counted
    for cut in range(1, len(body)):
        assert _count([body[:cut], body[cut:]]) == (3, 1), cut


def test_the_py_spy_summary_counts_own_and_inclusive_samples_per_thread() -> None:
    """py-spy's raw output (one collapsed stack and its count per line, the thread first) is
    read per thread, busiest first: own samples go to the leaf, inclusive ones once to every
    function on the stack, even one that recurses; a stack cut short at the root still counts."""
    raw = "\n".join(
        [
            "thread (7): MainThread;run (a.py:1);parse (b.py:2) 6",
            "thread (7): MainThread;run (a.py:1);run (a.py:9);write (c.py:3) 2",
            "thread (7): MainThread;write (c.py:3) 2",
            "thread (8): c2-db-writer;commit (d.py:4) 3",
            "not a stack line",
        ]
    )
    report = summarize(raw).splitlines()
    assert report[0] == "== thread MainThread: 10 samples (0.0 s busy)"
    assert "  self  60.0%  parse" in report and "  self  40.0%  write" in report
    assert "  incl  80.0%  run" in report and "  incl  40.0%  write" in report
    assert report.index("== thread c2-db-writer: 3 samples (0.0 s busy)") > report.index(
        "  incl  80.0%  run"
    )
