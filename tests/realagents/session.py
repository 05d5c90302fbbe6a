"""Driving one c2 session of a real agent from a test: prompt, read its events, answer.

Real agents are slow to start and to think on a shared 2-core machine, so every wait here is
bounded but generous (`AGENT_TIMEOUT`); nothing is timed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from tests.e2e.harness import Client, EventReader

AGENT_TIMEOUT = 90.0


def processes_in(folder: Path) -> list[int]:
    """Pids of live processes whose working directory is `folder` or below it (the agent
    and whatever it spawned run there)."""
    found: list[int] = []
    root = str(folder)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd == root or cwd.startswith(root + os.sep)):
            found.append(int(entry))
    return found


@dataclass
class AgentSession:
    """One c2 session of a real agent; `stream` sees every event of the server."""

    client: Client
    stream: EventReader
    id: str
    workdir: Path
    snapshot: dict[str, Any]

    @classmethod
    async def create(
        cls, client: Client, stream: EventReader, provider: str, workdir: Path, **fields: Any
    ) -> AgentSession:
        body = {"provider": provider, "cwd": str(workdir), "use_worktree": False, **fields}
        resp = await client.http.post("/v1/sessions", json=body, timeout=AGENT_TIMEOUT)
        assert resp.status_code == 201, resp.text
        snap: dict[str, Any] = resp.json()
        return cls(client, stream, snap["id"], workdir, snap)

    def events(self) -> list[dict[str, Any]]:
        return [e for e in self.stream.events if e.get("session") == self.id]

    async def prompt(self, text: str) -> None:
        resp = await self.client.prompt(self.id, text)
        assert resp.status_code == 202, resp.text

    async def until(
        self, name: str, timeout: float = AGENT_TIMEOUT, **match: Any
    ) -> dict[str, Any]:
        """The next event of this session named `name` (with `match`ing fields)."""
        return await self.stream.until(
            lambda e: (
                e.get("session") == self.id
                and e["event"] == name
                and all(e.get(k) == v for k, v in match.items())
            ),
            timeout,
        )

    async def turn_end(self, timeout: float = AGENT_TIMEOUT) -> dict[str, Any]:
        """The turn's closing event: `turn_ended`, or a terminal `error`."""
        return await self.stream.until(
            lambda e: (
                e.get("session") == self.id
                and (e["event"] == "turn_ended" or (e["event"] == "error" and e.get("terminal")))
            ),
            timeout,
        )

    async def answer(self, request: dict[str, Any], kind_prefix: str | None) -> None:
        """Answer a `permission_request` with its first option whose id or label starts with
        `kind_prefix` (None cancels)."""
        option = None
        if kind_prefix is not None:
            option = next(
                oid
                for oid, label in request["options"]
                if oid.lower().startswith(kind_prefix) or label.lower().startswith(kind_prefix)
            )
        resp = await self.client.answer(self.id, request["request_id"], option)
        assert resp.status_code == 200, resp.text

    async def set_policy(self, mode: str, sandbox: str = "workspace_write") -> None:
        resp = await self.client.http.put(
            f"/v1/sessions/{self.id}/execution-policy", json={"mode": mode, "sandbox": sandbox}
        )
        assert resp.status_code == 200, resp.text

    async def cancel(self) -> None:
        resp = await self.client.http.post(f"/v1/sessions/{self.id}/cancel", json={})
        assert resp.is_success and resp.json()["cancelled"] is True, resp.text

    async def transcript(self) -> dict[str, Any]:
        resp = await self.client.http.get(f"/v1/sessions/{self.id}/transcript")
        assert resp.status_code == 200, resp.text
        data: dict[str, Any] = resp.json()
        return data

    async def delete(self) -> None:
        resp = await self.client.http.delete(f"/v1/sessions/{self.id}", timeout=AGENT_TIMEOUT)
        assert resp.status_code == 204, resp.text

    async def wait_no_process(self, timeout: float = 20.0) -> None:
        """Until nothing runs in the session's folder any more."""
        with anyio.fail_after(timeout):
            while processes_in(self.workdir):  # noqa: ASYNC110 - state outside this process
                await anyio.sleep(0.05)
