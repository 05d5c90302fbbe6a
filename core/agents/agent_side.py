"""The agent side of ACP over this process's stdio, for agents written in c2 (the demo agent).

Wires the SDK's agent router to stdio, adds `session/set_model` (an unstable ACP method the
router does not route), and gives the agent an `AgentPeer` to talk back to the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, cast

import acp
from acp.agent.router import build_agent_router
from acp.connection import Connection
from acp.interfaces import Agent
from acp.schema import RequestPermissionResponse
from acp.utils import serialize_params
from pydantic import BaseModel

from c2.core.agents.framing import LINE_LIMIT


class ServedAgent(Protocol):
    """What `serve` needs beyond the SDK's Agent methods."""

    def received(self, method: str, params: Any) -> None:
        """Hook: every inbound request/notification, before it is handled."""

    async def set_model(self, params: Any) -> dict[str, Any]:
        """Handle `session/set_model` params."""


class AgentPeer:
    """The agent's outbound half: session updates and permission requests to the client."""

    def __init__(self, conn: Connection, writer: asyncio.StreamWriter) -> None:
        self._conn = conn
        self._writer = writer
        # Also offer "always allow" (ACP `allow_always`), as Claude Code does: a standing grant
        # inside the agent that a stricter policy must make c2 restart it for (tests set it).
        self.allow_always = False

    async def update(self, session_id: str, update: BaseModel | dict[str, Any]) -> None:
        """Send one `session/update` notification."""
        body = serialize_params(update) if isinstance(update, BaseModel) else update
        await self._conn.send_notification(
            "session/update", {"sessionId": session_id, "update": body}
        )

    async def ask(self, session_id: str, tool_call: dict[str, Any]) -> str:
        """`session/request_permission` with allow/reject; returns the optionId or "cancelled"."""
        options = [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        if self.allow_always:
            options.insert(
                1, {"optionId": "always", "name": "Always allow", "kind": "allow_always"}
            )
        params = {"sessionId": session_id, "toolCall": tool_call, "options": options}
        raw = await self.call("session/request_permission", params)
        outcome = RequestPermissionResponse.model_validate(raw).outcome
        return outcome.option_id if outcome.outcome == "selected" else "cancelled"

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """Any agent-to-client request; raises RequestError with the client's error."""
        return await self._conn.send_request(method, params)

    async def write_raw(self, lines: bytes) -> None:
        """Write already-encoded JSON-RPC lines: a load generator's chunks cost no encoding."""
        self._writer.write(lines)
        await self._writer.drain()

    async def flush(self) -> None:
        """Wait until everything written so far has left the process."""
        # No event signals an empty write buffer; poll it.
        while self._writer.transport.get_write_buffer_size():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


async def serve(make_agent: Callable[[AgentPeer], ServedAgent]) -> None:
    """Run an agent on this process's stdio until the client closes stdin."""
    reader, writer = await acp.stdio_streams(limit=LINE_LIMIT)
    holder: list[tuple[ServedAgent, Callable[..., Any]]] = []

    async def dispatch(method: str, params: Any, is_notification: bool) -> Any:
        agent, router = holder[0]
        agent.received(method, params)
        if method == "session/set_model" and not is_notification:
            return await agent.set_model(params)
        return await router(method, params, is_notification)

    conn = Connection(dispatch, writer, reader, listening=False)
    agent = make_agent(AgentPeer(conn, writer))
    # Unstable methods (session/resume, session/close) route to an agent that implements them.
    holder.append((agent, build_agent_router(cast(Agent, agent), use_unstable_protocol=True)))
    try:
        await conn.main_loop()
    finally:
        await conn.close()
