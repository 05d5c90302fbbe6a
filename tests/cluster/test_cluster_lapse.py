"""A member that stalls past its lease (issue 18): SIGSTOP of A while its turns run, B takes
them over and adopts one, SIGCONT of A. A commits nothing of the old turns (its writes are
fenced by its lease until it has dropped what was taken over), its agents of those sessions
are ended, and it joins again and serves its own sessions as before."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.cluster.conftest import LEASE_SECONDS, Pair
from tests.cluster.test_cluster_lease import _id, _interrupted
from tests.e2e.harness import Client, EventReader, poll_until
from tests.e2e.test_turns import wait_gone

pytestmark = pytest.mark.postgres
STAMPED = "/pid\n/stamped 100000 20"  # its pid, then a chunk `t=…` 20 times a second


def _listed(pair: Pair, instance: str) -> bool:
    resp = httpx.get(
        f"{pair.b.base_url}/v1/instances",
        headers={"Authorization": f"Bearer {pair.b.bearer}"},
        timeout=10,
    )
    return instance in [i["id"] for i in resp.json()["instances"]]


def _pids(pair: Pair) -> list[int]:
    return [int(e["agent_pid"]) for e in pair.a.agent_log_lines() if e.get("event") == "pid"]


def _after_interruption(events: list[dict[str, Any]], session: str) -> list[dict[str, Any]]:
    """`session`'s events after its interruption, by name and, for the old turn's output,
    what they carry: an `old chunk` is a `t=…` chunk of A's /stamped turn."""
    after: list[dict[str, Any]] | None = None
    for e in events:
        if e.get("session") != session:
            continue
        if _interrupted(e):
            after, told = [], False
        elif after is not None:
            if not after and not told and _interruption_error(e):
                told = True  # the takeover's own terminal error goes with its activity change
                continue
            after.append(e)
    return after or []


def _interruption_error(event: dict[str, Any]) -> bool:
    return (
        event["event"] == "error" and event.get("message") == "C2 stopped before the turn finished"
    )


def _old_output(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What only A's old turn could have written: its chunks, or a terminal error."""
    return [
        e
        for e in events
        if (e["event"] == "agent_text" and str(e.get("text", "")).startswith("t="))
        or (e["event"] == "error" and e.get("terminal"))
    ]


async def test_a_member_stalled_past_its_lease_drops_what_was_taken_over(
    pair: Pair, tmp_path: Path
) -> None:
    a, b = Client(pair.a), Client(pair.b)
    assert pair.a.proc is not None
    a_id = _id(pair.a.home)
    stopped = False
    try:
        adopted = (await a.new_session(tmp_path))["id"]
        kept = (await a.new_session(tmp_path))["id"]
        async with EventReader(b) as stream:
            await stream.frame()
            for sid in (adopted, kept):
                assert (await a.prompt(sid, STAMPED)).status_code == 202
            with anyio.fail_after(30):
                while {adopted, kept} - {
                    e["session"]
                    for e in stream.events
                    if e["event"] == "agent_text" and e.get("text", "").startswith("t=")
                }:
                    await stream.frame()
            await poll_until(lambda: len(_pids(pair)) == 2, timeout=10)
            agents = _pids(pair)

            os.kill(pair.a.proc.pid, signal.SIGSTOP)
            stopped = True
            with anyio.fail_after(LEASE_SECONDS * 10):
                while {adopted, kept} - {e["session"] for e in stream.events if _interrupted(e)}:
                    await stream.frame(timeout=LEASE_SECONDS * 10)
            # B adopts one of them and runs a turn of its own there.
            assert (await b.prompt(adopted, "/text adopted by B")).status_code == 202
            assert (await b.snapshot(adopted))["owner"] == _id(pair.b.home)
            await stream.until_event("turn_ended", session=adopted)

            os.kill(pair.a.proc.pid, signal.SIGCONT)
            stopped = False
            await poll_until(lambda: _listed(pair, a_id), timeout=LEASE_SECONDS * 10)
            # A's agents of both sessions are ended (the kept one is revived on demand).
            await wait_gone(*agents, timeout=15)
            # A serves its own session again: the next prompt revives its agent there.
            assert (await b.prompt(kept, "/text back on A")).status_code == 202
            await stream.until_event("turn_ended", session=kept)
            assert (await b.snapshot(kept))["owner"] == a_id
            events = list(stream.events)
        for sid in (adopted, kept):
            after = _after_interruption(events, sid)
            assert _old_output(after) == []
            # One turn ended after the interruption: the new one (B's, or A's after rejoining).
            assert [e["event"] for e in after].count("turn_ended") == 1
        transcript = (await b.http.get(f"/v1/sessions/{adopted}/transcript")).json()["entries"]
        texts = [e["part"].get("text", "") for e in transcript if e["role"] == "agent"]
        assert texts[-1] == "adopted by B"
    finally:
        if stopped:
            os.kill(pair.a.proc.pid, signal.SIGCONT)
        await a.aclose()
        await b.aclose()
