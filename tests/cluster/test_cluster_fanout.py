"""One log, live on every member (issue 18, part 3): streams on A and B deliver identical
sequences whichever member committed; Last-Event-ID resumes on any member; revoking a device
on A ends its stream on B."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.cluster.conftest import Pair, pair_device
from tests.e2e.harness import Client, EventReader


async def _welcome(stream: EventReader) -> int:
    frame = await stream.frame()
    assert frame["kind"] == "sessions"
    return int(frame["through"])


async def _until_ended(stream: EventReader, sessions: set[str]) -> None:
    """Read until every one of `sessions` had a turn_ended on `stream`."""
    with anyio.fail_after(30):
        while not sessions <= {e["session"] for e in stream.events if e["event"] == "turn_ended"}:
            await stream.frame()


def _after(stream: EventReader, seq: int) -> list[tuple[int, dict[str, Any]]]:
    return [(i, e) for i, e in zip(stream.ids, stream.events, strict=True) if i > seq]


async def test_both_members_stream_identical_sequences(pair: Pair, tmp_path: Path) -> None:
    a, b = Client(pair.a), Client(pair.b)
    try:
        async with EventReader(a) as on_a, EventReader(b) as on_b:
            start = max(await _welcome(on_a), await _welcome(on_b))
            # Work on both members at once: their commits interleave in the one log.
            made_a = (await a.new_session(tmp_path))["id"]
            made_b = (await b.new_session(tmp_path))["id"]
            async with anyio.create_task_group() as group:
                group.start_soon(a.prompt, made_a, "/chunks 40")
                group.start_soon(b.prompt, made_b, "/chunks 40")
            for stream in (on_a, on_b):
                await _until_ended(stream, {made_a, made_b})
            last = min(on_a.ids[-1], on_b.ids[-1])
            for stream in (on_a, on_b):  # read each up to the same position
                while stream.ids[-1] < last:
                    await stream.frame()
            seen_a = [x for x in _after(on_a, start) if x[0] <= last]
            seen_b = [x for x in _after(on_b, start) if x[0] <= last]
            assert seen_a == seen_b
            ids = [i for i, _ in seen_a]
            assert ids == list(range(ids[0], ids[0] + len(ids)))  # contiguous, increasing
            sessions = {e.get("session") for _, e in seen_a}
            assert {made_a, made_b} <= sessions

        # Resume on B from the middle of what A committed: the rest, identical.
        middle = ids[len(ids) // 2]
        async with EventReader(b, after=middle) as resumed:
            while not resumed.ids or resumed.ids[-1] < last:
                await resumed.frame()
            assert [x for x in _after(resumed, middle) if x[0] <= last] == [
                x for x in seen_a if x[0] > middle
            ]
    finally:
        await a.aclose()
        await b.aclose()


async def test_revoking_a_device_on_a_ends_its_stream_on_b(pair: Pair) -> None:
    device_id, bearer = pair_device(pair.a, "phone")
    phone = httpx.AsyncClient(
        base_url=pair.b.base_url, headers={"Authorization": f"Bearer {bearer}"}, timeout=30
    )
    admin = Client(pair.a)
    try:
        async with phone.stream("GET", "/v1/events", timeout=None) as resp:
            assert resp.status_code == 200
            lines = resp.aiter_lines()
            async for line in lines:  # the welcome frame: the stream is live
                if line.startswith("data:"):
                    break
            revoked = await admin.http.delete(f"/v1/devices/{device_id}")
            assert revoked.status_code == 204
            with anyio.fail_after(5):  # the mechanism takes milliseconds; 2 s is the promise
                async for line in lines:
                    assert not line.startswith("data:"), line
        denied = await phone.get("/v1/sessions")
        assert denied.status_code == 401
    finally:
        await phone.aclose()
        await admin.aclose()


pytestmark = [pytest.mark.postgres, pytest.mark.long_lease]
