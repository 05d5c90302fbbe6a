"""Frames a real server sends on `GET /v1/events` validate against the published schemas.

Every frame kind and every protocol event kind is produced by driving the scripted agent
through a real `c2 serve`, then checked against `StreamFrame` of the OpenAPI document.
"""

from __future__ import annotations

import sqlite3
import sys
import typing
from pathlib import Path
from typing import Any

import jsonschema_rs

from c2.api.app import create_app
from c2.api.frames import StreamFrame
from c2.api.openapi import document
from c2.core.protocol.events import Event
from tests.conftest import make_settings
from tests.e2e.harness import REPO, C2Process, Client, EventReader
from tests.gitrepos import git, make_repo
from tests.notify.receivers import Receiver

MODES_PROVIDER = f"""
[providers.modes]
command = "{sys.executable}"
args = ["-m", "tests.agents.scripted_agent"]
env = {{ PYTHONPATH = "{REPO}", SCRIPTED_AGENT_MODES = "1" }}
"""


def _frame_validator(tmp_path: Path) -> Any:
    doc = document(create_app(make_settings(tmp_path / "doc")))
    stream = doc["paths"]["/v1/events"]["get"]["responses"]["200"]["content"]
    ref = stream["text/event-stream"]["schema"]["$ref"]
    return jsonschema_rs.Draft202012Validator({"$ref": ref, "components": doc["components"]})


def _members(union: Any) -> tuple[Any, ...]:
    if typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    return typing.get_args(union)


def _event_kinds() -> set[str]:
    return {m.model_fields["event"].default for m in _members(Event)}


def _frame_kinds() -> set[str]:
    members = _members(StreamFrame.model_fields["root"].annotation)
    return {typing.get_args(m.model_fields["kind"].annotation)[0] for m in members}


async def test_stream_frames_match_the_published_schemas(tmp_path: Path):
    """Every frame and event kind a real server sends validates against StreamFrame."""
    validator = _frame_validator(tmp_path)
    # Webhook retries a hundred times faster: ten failed deliveries disable one in ~5 s.
    fresh_c2 = C2Process(tmp_path / "home", env={"C2_WEBHOOK_BACKOFF_SCALE": "0.01"})
    with (fresh_c2.home / "providers.toml").open("a", encoding="utf-8") as toml:
        toml.write(MODES_PROVIDER)
    fresh_c2.start()
    work = tmp_path / "project"
    work.mkdir()
    git(work, "init", "--quiet")  # a git folder: turns carry checkpoints, rewind works
    client = Client(fresh_c2)
    frames: list[dict[str, Any]] = []
    receiver = Receiver()
    try:
        async with EventReader(client) as stream:
            await stream.frame()
            # A webhook whose receiver always fails is disabled: `webhook_disabled`.
            receiver.__enter__()
            receiver.failing = True
            hook = {"url": receiver.url, "events": ["session_created"], "secret": "s"}
            resp = await client.http.post("/v1/webhooks", json=hook)
            assert resp.status_code == 201, resp.text
            sid = (await client.new_session(work))["id"]
            await client.prompt(
                sid,
                "/think hmm\n/plan a|b\n/tool t1 read completed Read it\n/usage 10 100\n"
                "/config-update\n/text hello\n/spend 5 5 0.01 USD\n/permission execute Run it",
            )
            request = await stream.until_event("permission_request")
            await client.answer(sid, request["request_id"], "allow")
            await stream.until_event("turn_ended")
            rewind = {"to_turn": 1, "force": True, "request_id": "rw-schema"}
            resp = await client.http.post(f"/v1/sessions/{sid}/rewind", json=rewind)
            assert resp.status_code == 200, resp.text
            await stream.until_event("session_rewound")
            repo = make_repo(tmp_path)
            body = {"provider": {"custom": "scripted"}, "cwd": str(repo.cwd), "use_worktree": True}
            resp = await client.http.post("/v1/sessions", json=body)
            assert resp.status_code == 201, resp.text
            resp = await client.http.delete(f"/v1/sessions/{resp.json()['id']}/worktree")
            assert resp.status_code == 200, resp.text
            await stream.until_event("worktree_discarded")
            # A budget already exceeded when it is set is announced at once.
            budget = {"max_cost": 0, "action": "warn"}
            resp = await client.http.put(f"/v1/sessions/{sid}/budget", json=budget)
            assert resp.status_code == 200, resp.text
            await stream.until_event("budget_exceeded")
            policy = {"mode": "yolo", "sandbox": "workspace_write"}
            resp = await client.http.put(f"/v1/sessions/{sid}/execution-policy", json=policy)
            assert resp.status_code == 200, resp.text
            # Queued, it starts at once (queue_changed) and its failure pauses the queue.
            queued = {"doc": [{"type": "text", "text": "/fail kaboom"}]}
            resp = await client.http.post(f"/v1/sessions/{sid}/queue", json=queued)
            assert resp.status_code == 201, resp.text
            await stream.until_event("error")  # a failed turn ends with it (no turn_ended)
            await stream.until_event("queue_paused")
            resp = await client.http.post(f"/v1/sessions/{sid}/queue/resume", json={})
            assert resp.status_code == 200, resp.text
            await stream.until_event("queue_resumed")
            # An agent with session modes (Claude Code's) reports them: the `modes` event.
            await client.new_session(work, provider={"custom": "modes"})
            await stream.until_event("modes")
            resp = await client.http.delete(f"/v1/sessions/{sid}")
            assert resp.status_code == 204, resp.text
            await stream.until_event("session_deleted")
            if "webhook_disabled" not in stream.names():
                await stream.until_event("webhook_disabled", timeout=60)
            frames += stream.frames
            last = stream.ids[-1]
        async with EventReader(client, after=last + 1000) as ahead:
            frames.append(await ahead.frame())
            frames.append(await ahead.frame())
        with sqlite3.connect(fresh_c2.home / "c2.db") as db:
            db.execute("DROP TABLE sessions")
        async with EventReader(client) as broken:
            frames.append(await broken.frame())
    finally:
        await client.aclose()
        fresh_c2.stop()
        receiver.__exit__()
    for frame in frames:
        errors = [e.message for e in validator.iter_errors(frame)]
        assert errors == [], (frame, errors)
    assert {f["kind"] for f in frames} == _frame_kinds()
    assert {f["event"]["event"] for f in frames if f["kind"] == "event"} == _event_kinds()
