"""The scripted demo ACP agent behind `{"custom":"echo"}`: `python -P -m c2.core.agents.demo_agent`.

Echoes each prompt back with usage, a thought, a plan and a tool call, so `c2 serve` does real
work with no third-party agent. Lines starting with `/name` run the `do_name` directive instead
(here only `/permission`; tests/agents/scripted_agent.py adds more). Only ACP frames go to stdout.

Over 300 lines: a whole agent in one file, started as a script (`python -P -m`) with nothing
beside it but the agent side of ACP (core/agents/agent_side.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

import c2.core.agents.lean_sdk  # noqa: F401  (before the SDK: see there)

# isort: split
import acp
from acp.exceptions import RequestError
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    UsageUpdate,
)
from acp.utils import serialize_params

from c2.core.agents.agent_side import AgentPeer, serve

CONTEXT_WINDOW = 200_000
MAX_ECHO_CHUNKS = 64
MAX_HISTORY = 200  # entries kept for session/load replay
MODELS: tuple[tuple[str, str, str], ...] = (
    ("echo-fast", "Echo fast", "Echoes immediately"),
    ("echo-smart", "Echo smart", "Echoes, but thinks about it first"),
)
VERBOSITY: tuple[tuple[str, str], ...] = (
    ("terse", "Terse"),
    ("normal", "Normal"),
    ("verbose", "Verbose"),
)
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass
class DemoSession:
    """One agent-side session: settings and the history replayed by session/load."""

    id: str
    cwd: str
    model: str = MODELS[0][0]
    config: dict[str, str] = field(default_factory=lambda: {"verbosity": "normal"})
    history: list[tuple[str, str]] = field(default_factory=list)  # (role, text)
    turns: int = 0


@dataclass
class Turn:
    """One running prompt: its cancel flag and what was said so far."""

    session: DemoSession
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    said: list[str] = field(default_factory=list)
    tools_seen: set[str] = field(default_factory=set)
    last_tool_id: str | None = None


class DemoAgent:
    """ACP agent methods (called by the SDK's agent router) plus the turn script."""

    config_ids: ClassVar[tuple[str, ...]] = ("verbosity",)

    def __init__(self, peer: AgentPeer, *, load_session: bool = True) -> None:
        self.peer = peer
        self.load_session_enabled = load_session
        state_dir = os.environ.get("DEMO_AGENT_STATE_DIR")
        self.state_dir = Path(state_dir) if state_dir else None
        self.sessions: dict[str, DemoSession] = {}
        self.turns: dict[str, Turn] = {}
        self.tools_seen: dict[str, set[str]] = {}  # tool call ids announced, per session
        self.delay = int(os.environ.get("DEMO_AGENT_DELAY_MS", "0") or 0) / 1000

    def received(self, method: str, params: Any) -> None:
        """Hook: every inbound request/notification, before it is handled."""

    # -- ACP agent methods --------------------------------------------------------------------

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        """Advertise protocol 1 and (optionally) loadSession."""
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=self.load_session_enabled),
            agent_info=Implementation(name="c2-demo-agent", version="0.1.0"),
        )

    async def new_session(self, cwd: str, **_: Any) -> dict[str, Any]:
        """A fresh session with models and config options (a dict: the SDK drops `models`)."""
        session = DemoSession(id=uuid.uuid4().hex, cwd=cwd)
        self.sessions[session.id] = session
        self.save(session)
        return {"sessionId": session.id, **self.session_state(session)}

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> dict[str, Any]:
        """Replay a known session's history as updates, then report usage."""
        if not self.load_session_enabled:
            raise RequestError.method_not_found("session/load")
        session = self.sessions.get(session_id) or self.restore(session_id)
        if session is None:
            raise RequestError(-32002, f"session not found: {session_id}")
        session.cwd = cwd
        for role, text in session.history:
            kind = "user_message_chunk" if role == "user" else "agent_message_chunk"
            content = {"type": "text", "text": text}
            await self.peer.update(session.id, {"sessionUpdate": kind, "content": content})
        await self.report_usage(session)
        return self.session_state(session)

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> dict[str, Any]:
        """Change one select option; answers the whole new option set."""
        session = self.session(session_id)
        allowed = {
            choice
            for option in self.config_options(session)
            if option["id"] == config_id
            for choice in _choice_values(option["options"])
        }
        if config_id not in self.config_ids or value not in allowed:
            raise RequestError(-32602, f"invalid value for {config_id}: {value!r}")
        session.config[config_id] = str(value)
        self.save(session)
        return {"configOptions": self.config_options(session)}

    async def set_model(self, params: Any) -> dict[str, Any]:
        """`session/set_model` (an unstable ACP method the SDK router does not route)."""
        if not isinstance(params, dict) or not isinstance(params.get("modelId"), str):
            raise RequestError(-32602, "invalid params: modelId is required")
        session = self.session(params.get("sessionId"))
        if params["modelId"] not in {m[0] for m in MODELS}:
            raise RequestError(-32602, f"unknown model: {params['modelId']}")
        session.model = params["modelId"]
        self.save(session)
        return {}

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> dict[str, Any]:
        """Run one turn and record it in the session history."""
        session = self.session(session_id)
        text = "".join(getattr(block, "text", "") for block in prompt)
        turn = Turn(session, tools_seen=self.tools_seen.setdefault(session_id, set()))
        self.turns[session_id] = turn
        session.turns += 1
        try:
            stop = await self.run_turn(turn, text)
        finally:
            self.turns.pop(session_id, None)
            session.history += [("user", text), ("agent", "".join(turn.said))]
            del session.history[:-MAX_HISTORY]
            self.save(session)
        return {"stopReason": stop}  # a dict, so scripts may return any stop reason

    async def cancel(self, session_id: str, **_: Any) -> None:
        """Flag the session's running turn as cancelled."""
        if turn := self.turns.get(session_id):
            turn.cancelled.set()

    # -- the turn -----------------------------------------------------------------------------

    def directive(self, line: str) -> tuple[Callable[[Turn, str], Any], str] | None:
        """(handler, argument) when `line` is `/name arg` and `do_name` exists."""
        if not line.startswith("/"):
            return None
        name, _, arg = line[1:].partition(" ")
        handler = getattr(self, "do_" + name.replace("-", "_"), None) if name else None
        return (handler, arg.strip()) if callable(handler) else None

    async def run_turn(self, turn: Turn, text: str) -> str:
        """Directive lines run in order (other lines are ignored); no directive: echo."""
        script = [d for line in text.splitlines() if (d := self.directive(line.strip()))]
        if not script:
            return await self.echo(turn, text)
        for handler, arg in script:
            stop = await handler(turn, arg)
            if turn.cancelled.is_set():
                return "cancelled"
            if stop is not None:
                return cast(str, stop)
        return "end_turn"

    async def echo(self, turn: Turn, text: str) -> str:
        """The demo turn: usage, thought, plan, a read tool call, then the text in chunks."""
        session = turn.session
        await self.report_usage(session, extra=text)
        if session.config.get("verbosity") != "terse":
            await self.think(turn, f"Echoing {len(text)} characters with {session.model}.")
            await self.plan(turn, ["Read the prompt", "Echo it back"])
            tool_id = f"read-{session.turns}"
            await self.tool(turn, tool_id, kind="read", status="pending", title="Read the prompt")
            await self.tool(turn, tool_id, status="completed")
        words = _WORDS.findall(text)
        per = max(1, math.ceil(len(words) / MAX_ECHO_CHUNKS))
        for i in range(0, len(words), per):
            if turn.cancelled.is_set():
                return "cancelled"
            await self.say(turn, "".join(words[i : i + per]))
            await self.pause()
        if session.config.get("verbosity") == "verbose":
            await self.think(turn, f"Echoed {len(words)} words in {len(turn.said)} chunks.")
        return "cancelled" if turn.cancelled.is_set() else "end_turn"

    async def do_permission(self, turn: Turn, arg: str) -> None:
        """`/permission <kind|none> [title]`: ask, wait, say the optionId or "cancelled"."""
        kind, _, title = arg.partition(" ")
        title = title.strip()
        # Without a title, ask about the turn's last tool call (the client recalls its title).
        tool_id = turn.last_tool_id if not title and turn.last_tool_id else _new_id("perm")
        tool_call: dict[str, Any] = {"toolCallId": tool_id}
        if title:
            tool_call["title"] = title
        if kind and kind != "none":
            tool_call["kind"] = kind
        await self.say(turn, await self.peer.ask(turn.session.id, tool_call))

    # -- building blocks ----------------------------------------------------------------------

    async def say(self, turn: Turn, text: str) -> None:
        """One agent_message_chunk."""
        turn.said.append(text)
        await self.peer.update(turn.session.id, acp.update_agent_message_text(text))

    async def think(self, turn: Turn, text: str) -> None:
        """One agent_thought_chunk."""
        await self.peer.update(turn.session.id, acp.update_agent_thought_text(text))

    async def plan(self, turn: Turn, entries: list[str]) -> None:
        """A plan update with pending entries."""
        await self.peer.update(
            turn.session.id, acp.update_plan([acp.plan_entry(e) for e in entries])
        )

    async def tool(
        self,
        turn: Turn,
        tool_id: str,
        *,
        kind: str | None = None,
        status: str | None = None,
        title: str | None = None,
        raw_input: Any = None,
    ) -> None:
        """`tool_call` the first time an id is seen in the session, `tool_call_update` after."""
        variant = "tool_call_update" if tool_id in turn.tools_seen else "tool_call"
        turn.tools_seen.add(tool_id)
        turn.last_tool_id = tool_id
        fields = {"kind": kind, "status": status, "title": title, "rawInput": raw_input}
        update = {"sessionUpdate": variant, "toolCallId": tool_id}
        update.update({k: v for k, v in fields.items() if v is not None})
        await self.peer.update(turn.session.id, update)

    async def report_usage(self, session: DemoSession, extra: str = "") -> None:
        """A usage_update estimating tokens as characters / 4."""
        used = (sum(len(text) for _, text in session.history) + len(extra)) // 4
        usage = UsageUpdate(session_update="usage_update", used=used, size=CONTEXT_WINDOW)
        await self.peer.update(session.id, usage)

    async def pause(self) -> None:
        """The configured delay between streamed chunks (DEMO_AGENT_DELAY_MS)."""
        await asyncio.sleep(self.delay)

    # -- sessions -----------------------------------------------------------------------------

    def session(self, session_id: object) -> DemoSession:
        """A known session, else an invalid-params error."""
        if not isinstance(session_id, str) or session_id not in self.sessions:
            raise RequestError(-32602, f"unknown session: {session_id}")
        return self.sessions[session_id]

    def session_state(self, session: DemoSession) -> dict[str, Any]:
        """The `models` and `configOptions` fields of a session/new or load result."""
        models = [{"modelId": m, "name": n, "description": d} for m, n, d in MODELS]
        return {
            "models": {"availableModels": models, "currentModelId": session.model},
            "configOptions": self.config_options(session),
        }

    def config_options(self, session: DemoSession) -> list[dict[str, Any]]:
        """The session's config options as ACP JSON."""
        option = SessionConfigOptionSelect(
            id="verbosity",
            name="Verbosity",
            type="select",
            current_value=session.config.get("verbosity", "normal"),
            options=[SessionConfigSelectOption(value=v, name=n) for v, n in VERBOSITY],
        )
        return [serialize_params(option)]

    def save(self, session: DemoSession) -> None:
        """Persist the session when DEMO_AGENT_STATE_DIR is set."""
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            (self.state_dir / f"{session.id}.json").write_text(json.dumps(asdict(session)))

    def restore(self, session_id: str) -> DemoSession | None:
        """Load a persisted session, if there is one."""
        if self.state_dir is None or not _SAFE_ID.match(session_id):
            return None
        try:
            data = json.loads((self.state_dir / f"{session_id}.json").read_text())
            data["history"] = [tuple(item) for item in data["history"]]
            session = DemoSession(**data)
        except (OSError, ValueError, TypeError, KeyError):
            return None
        self.sessions[session.id] = session
        return session


def _choice_values(choices: list[dict[str, Any]]) -> list[str]:
    """Values of a select option's choices, flat or grouped."""
    flat = [c for item in choices for c in (item["options"] if "group" in item else [item])]
    return [c["value"] for c in flat]


def _new_id(prefix: str) -> str:
    """A short unique id like "perm-1a2b3c4d"."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def main(make_agent: Callable[[AgentPeer], DemoAgent] = DemoAgent) -> None:
    """Entry point: log to stderr only, serve on stdio."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(serve(make_agent))


if __name__ == "__main__":
    main()
