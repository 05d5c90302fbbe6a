"""Scripted ACP test agent: the demo agent plus directives for tests, one per prompt line.

Run as `python -m tests.agents.scripted_agent` (use `launch_spec()`). Directives:
/text s, /chunks N, /stamped N [rate], /blast N [rate], /think s, /plan a|b|c,
/tool id kind status title, /agent-tool id, /permission kind|none [title], /permissions N kind,
/fail [msg], /wedge [msg] (this and every later prompt fail), /hang [reason], /ignore-cancel,
/crash [stderr text], /bigline N,
/flood (chunks until cancelled, pid logged), /pid,
/usage used size, /spend in out cost|- [currency], /stop reason, /sleep ms, /user s,
/config-update, /raw {update json}, /request method, /mode id (a current_mode_update),
/stderr-fail text (text on stderr, then an internal error), /write path text,
/delete path, /rename src dst, /binary path N, /bigfile path KiB (file changes in the cwd).
Env: SCRIPTED_AGENT_LOAD=0|1,
SCRIPTED_AGENT_LOG=path (JSON line per inbound message), SCRIPTED_AGENT_SPAWN_CHILD=1 (a
sleeping grandchild holding stdout; pid in the log),
SCRIPTED_AGENT_STUBBORN=1 (ignores SIGTERM and stdin EOF), SCRIPTED_AGENT_SESSION_CLOSE=1
(advertises `sessionCapabilities.close`; the request is logged and answered),
SCRIPTED_AGENT_MODES=1 (Claude Code's session modes), SCRIPTED_AGENT_ALWAYS=1 (permission
requests also offer `always`, an ACP allow_always option), SCRIPTED_AGENT_RESUME=1 (advertises
session/resume and session/close), SCRIPTED_AGENT_MCP=http,sse (mcpCapabilities),
SCRIPTED_AGENT_MODEL_OPTION=1 (the model only as a config option, like OpenCode),
SCRIPTED_AGENT_AUTH=new|prompt (authMethods; that step answers "authentication required"),
SCRIPTED_AGENT_EXIT_ON_NEW=text (text on stderr, exit on session/new), SCRIPTED_AGENT_FORK=1
(advertises `sessionCapabilities.fork`; session/fork copies a persisted session's history).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import c2.core.agents.lean_sdk  # noqa: F401  (before the SDK: see there)

# isort: split
import acp
from acp.exceptions import RequestError

from c2.core.agents.agent_side import AgentPeer
from c2.core.agents.client import LaunchSpec
from c2.core.agents.demo_agent import MODELS, DemoAgent, DemoSession, Turn, main

REPO_ROOT = Path(__file__).resolve().parents[2]
MODES = (
    ("default", "Default", "Ask before edits and commands"),
    ("acceptEdits", "Accept Edits", "Edit files without asking"),
    ("plan", "Plan Mode", "Analyse only; change nothing"),
    ("bypassPermissions", "Bypass Permissions", "Do anything without asking"),
)
AUTH_METHODS = [
    {"id": "claude-login", "name": "Log in with Claude", "description": "Run `claude /login`"},
]
AGENT_LAUNCH_INPUT = {
    "subagent_type": "explorer",
    "description": "Explore the repository",
    "prompt": "Map the modules under core/",
    "secret_blob": "x" * 64,
}


def launch_spec(
    cwd: str | Path,
    *,
    load: bool = True,
    log: Path | None = None,
    spawn_child: bool = False,
    env: dict[str, str] | None = None,
) -> LaunchSpec:
    """How to start this agent as a real subprocess."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SCRIPTED_AGENT_LOAD": str(int(load))}
    if log is not None:
        full_env["SCRIPTED_AGENT_LOG"] = str(log)
    if spawn_child:
        full_env["SCRIPTED_AGENT_SPAWN_CHILD"] = "1"
    full_env.update(env or {})
    return LaunchSpec(sys.executable, ["-m", "tests.agents.scripted_agent"], full_env, str(cwd))


def read_log(path: Path) -> list[dict[str, Any]]:
    """The JSON lines the agent logged (empty if none yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ScriptedAgent(DemoAgent):
    """DemoAgent with test directives, a grouped and a boolean config option, and a log."""

    config_ids = (*DemoAgent.config_ids, "effort", "model")

    def __init__(self, peer: AgentPeer) -> None:
        super().__init__(peer, load_session=os.environ.get("SCRIPTED_AGENT_LOAD", "1") == "1")
        self.spent: dict[str, float] = {}  # cumulative cost reported, per session (/spend)
        self.turn_usage: dict[str, dict[str, int]] = {}  # the running turn's usage (/spend)
        self.log_path = os.environ.get("SCRIPTED_AGENT_LOG")
        self.with_modes = os.environ.get("SCRIPTED_AGENT_MODES") == "1"
        self.with_resume = os.environ.get("SCRIPTED_AGENT_RESUME") == "1"
        self.model_option = os.environ.get("SCRIPTED_AGENT_MODEL_OPTION") == "1"
        self.auth = os.environ.get("SCRIPTED_AGENT_AUTH", "")
        self.wedged = ""  # /wedge: every prompt fails, as Claude Code's once its child died
        self.mcp = set(filter(None, os.environ.get("SCRIPTED_AGENT_MCP", "").split(",")))
        peer.allow_always = os.environ.get("SCRIPTED_AGENT_ALWAYS") == "1"
        if os.environ.get("SCRIPTED_AGENT_SPAWN_CHILD") == "1":
            child = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL
            )
            self.log({"event": "child", "pid": child.pid, "agent_pid": os.getpid()})

    def log(self, entry: dict[str, Any]) -> None:
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")

    def received(self, method: str, params: Any) -> None:
        body = params if isinstance(params, dict) else {}
        entry: dict[str, Any] = {"method": method, "sessionId": body.get("sessionId")}
        if method == "session/prompt":
            blocks = body.get("prompt") or []
            entry["text"] = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        elif method != "session/update":
            entry["params"] = body
        self.log(entry)

    # -- ACP methods beyond the demo agent's --------------------------------------------------

    async def initialize(self, protocol_version: int, **_: Any) -> dict[str, Any]:  # type: ignore[override]
        """The demo's answer plus the capabilities and auth methods the env asks for."""
        caps: dict[str, Any] = {
            "loadSession": self.load_session_enabled,
            "mcpCapabilities": {"http": "http" in self.mcp, "sse": "sse" in self.mcp},
        }
        if self.with_resume:
            caps["sessionCapabilities"] = {"resume": {}, "close": {}}
        elif os.environ.get("SCRIPTED_AGENT_SESSION_CLOSE") == "1":
            caps["sessionCapabilities"] = {"close": {}}
        if os.environ.get("SCRIPTED_AGENT_FORK") == "1":
            caps.setdefault("sessionCapabilities", {})["fork"] = {}
        return {
            "protocolVersion": 1,
            "agentCapabilities": caps,
            "agentInfo": {"name": "c2-scripted-agent", "version": "0.1.0"},
            "authMethods": AUTH_METHODS if self.auth else [],
        }

    async def new_session(self, cwd: str, **kwargs: Any) -> dict[str, Any]:
        if message := os.environ.get("SCRIPTED_AGENT_EXIT_ON_NEW"):
            sys.stderr.write(f"{message}\n")
            sys.stderr.flush()
            os._exit(1)
        if self.auth == "new":
            sys.stderr.write("not logged in: no credentials found\n")
            sys.stderr.flush()
            raise RequestError.auth_required()
        result = await super().new_session(cwd, **kwargs)
        self.log({"event": "new_session", "sessionId": result["sessionId"], "cwd": cwd})
        return result

    async def resume_session(self, cwd: str, session_id: str, **_: Any) -> dict[str, Any]:
        """`session/resume`: reattach without replaying history."""
        if not self.with_resume:
            raise RequestError.method_not_found("session/resume")
        session = self.sessions.get(session_id) or self.restore(session_id)
        if session is None:
            raise RequestError(-32002, f"session not found: {session_id}")
        session.cwd = cwd
        return self.session_state(session)

    async def fork_session(self, cwd: str, session_id: str, **_: Any) -> dict[str, Any]:
        """`session/fork` (SCRIPTED_AGENT_FORK=1): a new session with a copy of the history of
        `session_id` (persisted: DEMO_AGENT_STATE_DIR), working in `cwd`."""
        if os.environ.get("SCRIPTED_AGENT_FORK") != "1":
            raise RequestError.method_not_found("session/fork")
        parent = self.sessions.get(session_id) or self.restore(session_id)
        if parent is None:
            raise RequestError(-32002, f"session not found: {session_id}")
        child = DemoSession(id=uuid.uuid4().hex, cwd=cwd, history=list(parent.history))
        self.sessions[child.id] = child
        self.save(child)
        entry = {"event": "fork", "from": session_id, "sessionId": child.id, "cwd": cwd}
        self.log({**entry, "history": len(child.history)})
        return {"sessionId": child.id, **self.session_state(child)}

    async def close_session(self, session_id: str, **_: Any) -> dict[str, Any]:
        self.sessions.pop(session_id, None)
        return {}

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> dict[str, Any]:
        session = self.session(session_id)
        if not self.with_modes or mode_id not in {m[0] for m in MODES}:
            raise RequestError(-32602, f"unknown mode: {mode_id}")
        session.config["mode"] = mode_id
        self.save(session)
        return {}

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> dict[str, Any]:
        """The demo turn; its response carries `usage` when the turn ran `/spend`."""
        if self.auth == "prompt":
            raise RequestError.auth_required()
        if self.wedged:
            raise RequestError(-32603, self.wedged)
        self.turn_usage.pop(session_id, None)
        response = await super().prompt(session_id, prompt, **kwargs)
        usage = self.turn_usage.pop(session_id, None)
        return response if usage is None else {**response, "usage": usage}

    def session_state(self, session: DemoSession) -> dict[str, Any]:
        state = super().session_state(session)
        if self.model_option:
            del state["models"]
        if self.with_modes:
            modes = [{"id": i, "name": n, "description": d} for i, n, d in MODES]
            current = session.config.get("mode", "default")
            state["modes"] = {"availableModes": modes, "currentModeId": current}
        return state

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> dict[str, Any]:
        if config_id == "model" and self.model_option:
            session = self.session(session_id)
            if value not in {m[0] for m in MODELS}:
                raise RequestError(-32602, f"invalid value for model: {value!r}")
            session.model = str(value)
            self.save(session)
            return {"configOptions": self.config_options(session)}
        return await super().set_config_option(config_id, session_id, value, **kwargs)

    def config_options(self, session: DemoSession) -> list[dict[str, Any]]:
        model = {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": session.model,
            "options": [{"value": m, "name": n, "description": d} for m, n, d in MODELS],
        }
        effort = {
            "id": "effort",
            "name": "Effort",
            "category": "thought_level",
            "type": "select",
            "currentValue": session.config.get("effort", "medium"),
            "options": [
                {"group": "cheap", "name": "Cheap", "options": [{"value": "low", "name": "Low"}]},
                {
                    "group": "costly",
                    "name": "Costly",
                    "options": [
                        {"value": "medium", "name": "Medium"},
                        {"value": "high", "name": "High", "description": "Slow"},
                    ],
                },
            ],
        }
        fast = {"id": "fast", "name": "Fast mode", "type": "boolean", "currentValue": False}
        models = [model] if self.model_option else []
        return [*models, *super().config_options(session), effort, fast]

    # -- directives (`/name arg` runs `do_name`) ----------------------------------------------

    async def do_text(self, turn: Turn, arg: str) -> None:
        await self.say(turn, arg)

    async def do_chunks(self, turn: Turn, arg: str) -> None:
        for i in range(int(arg)):
            await self.say(turn, f"chunk-{i} ")

    async def do_stamped(self, turn: Turn, arg: str) -> None:
        """`/stamped N [per_second]`: N chunks `t=<wall clock ns>`, paced or flat out (bench)."""
        count, _, rate = arg.partition(" ")
        interval = 1 / float(rate) if rate else 0.0
        started = time.monotonic()
        for i in range(int(count)):
            if interval:
                await asyncio.sleep(max(0.0, started + i * interval - time.monotonic()))
            await self.say(turn, f"t={time.time_ns()}")

    async def do_blast(self, turn: Turn, arg: str) -> None:
        """`/blast N [per_second]`: like /stamped, but pre-encoded lines written in batches, so
        the agent is not what limits a fleet bench (one write per due batch, at most 64)."""
        count, _, rate = arg.partition(" ")
        total, per_second = int(count), float(rate or 0)
        session = json.dumps(turn.session.id)
        head = (
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + session + ","
            '"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"t='
        ).encode()
        tail = b'"}}}}\n'
        sent, started = 0, time.monotonic()
        while sent < total and not turn.cancelled.is_set():
            due = total - sent
            if per_second:
                due = min(due, int((time.monotonic() - started) * per_second) + 1 - sent)
            batch = min(due, 64)
            if batch > 0:
                await self.peer.write_raw(
                    b"".join(head + str(time.time_ns()).encode() + tail for _ in range(batch))
                )
                sent += batch
            if per_second:
                await asyncio.sleep(max(0.0, started + sent / per_second - time.monotonic()))

    async def do_think(self, turn: Turn, arg: str) -> None:
        await self.think(turn, arg)

    async def do_plan(self, turn: Turn, arg: str) -> None:
        await self.plan(turn, arg.split("|"))

    async def do_tool(self, turn: Turn, arg: str) -> None:
        tool_id, kind, status, *title = arg.split(" ", 3)
        await self.tool(
            turn,
            tool_id,
            kind=None if kind == "none" else kind,
            status=None if status == "none" else status,
            title=title[0] if title else None,
        )

    async def do_agent_tool(self, turn: Turn, arg: str) -> None:
        await self.tool(
            turn, arg, kind="other", status="pending", title="Task", raw_input=AGENT_LAUNCH_INPUT
        )

    async def do_permissions(self, turn: Turn, arg: str) -> None:
        count, _, kind = arg.partition(" ")
        calls = [
            {"toolCallId": f"perm-{i}", "title": f"Permission {i}", "kind": kind or "execute"}
            for i in range(int(count))
        ]
        outcomes = await asyncio.gather(*(self.peer.ask(turn.session.id, c) for c in calls))
        for outcome in outcomes:
            await self.say(turn, f"{outcome}\n")

    async def do_fail(self, turn: Turn, arg: str) -> None:
        raise RequestError(-32603, arg or "boom")

    async def do_wedge(self, turn: Turn, arg: str) -> None:
        self.wedged = arg or "Session did not end in result"
        raise RequestError(-32603, self.wedged)

    async def do_hang(self, turn: Turn, arg: str) -> str:
        """`/hang [reason]`: wait for a cancel, then stop with `reason` (default cancelled);
        `/hang end_turn` answers a cancel the way OpenCode does."""
        await turn.cancelled.wait()
        if arg:
            turn.cancelled.clear()  # so the turn really ends with `reason`
            return arg
        return "cancelled"

    async def do_ignore_cancel(self, turn: Turn, arg: str) -> None:
        await asyncio.get_running_loop().create_future()  # never resolves

    async def do_crash(self, turn: Turn, arg: str) -> None:
        if arg:  # last words, as a crashing agent leaves them on stderr
            sys.stderr.write(f"{arg}\n")
            sys.stderr.flush()
        await self.say(turn, "crashing")
        await self.peer.flush()
        os._exit(3)

    async def do_flood(self, turn: Turn, arg: str) -> str:
        """`/flood [delay_ms]`: 4 KiB chunks as fast as stdout takes them, until cancelled, so
        a pipe nobody reads fills and the agent blocks writing. Logs its progress per 64 KiB."""
        self.log({"event": "flood", "agent_pid": os.getpid(), "written": 0})
        if arg:
            await asyncio.sleep(int(arg) / 1000)
        chunk = acp.update_agent_message_text("f" * 4096)
        written = 0
        while not turn.cancelled.is_set():
            await self.peer.update(turn.session.id, chunk)
            written += 1
            if written % 16 == 0:
                self.log({"event": "flood", "agent_pid": os.getpid(), "written": written})
        return "cancelled"

    # File changes in the session's cwd (paths relative to it), for checkpoint tests.

    def _file(self, turn: Turn, name: str) -> Path:
        return Path(turn.session.cwd) / name

    async def do_write(self, turn: Turn, arg: str) -> None:
        r"""`/write path text`: write `text` (`\n` becomes a newline) to `path`."""
        name, _, text = arg.partition(" ")
        target = self._file(turn, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("\\n", "\n"), encoding="utf-8")

    async def do_delete(self, turn: Turn, arg: str) -> None:
        self._file(turn, arg).unlink()

    async def do_rename(self, turn: Turn, arg: str) -> None:
        source, _, target = arg.partition(" ")
        self._file(turn, source).rename(self._file(turn, target))

    async def do_binary(self, turn: Turn, arg: str) -> None:
        """`/binary path N`: N bytes of a fixed binary pattern (NULs included)."""
        name, _, size = arg.partition(" ")
        self._file(turn, name).write_bytes(bytes(i % 256 for i in range(int(size))))

    async def do_bigfile(self, turn: Turn, arg: str) -> None:
        """`/bigfile path KiB`: a text file of that many KiB of numbered lines."""
        name, _, kib = arg.partition(" ")
        lines = (f"line {i:08d} of a big file\n" for i in range(int(kib) * 1024 // 32 + 1))
        self._file(turn, name).write_text("".join(lines), encoding="utf-8")

    async def do_pid(self, turn: Turn, arg: str) -> None:
        self.log({"event": "pid", "agent_pid": os.getpid()})
        await self.say(turn, f"pid={os.getpid()}")

    async def do_bigline(self, turn: Turn, arg: str) -> None:
        await self.say(turn, "x" * int(arg))

    async def do_usage(self, turn: Turn, arg: str) -> None:
        used, size = (int(v) for v in arg.split())
        update = {"sessionUpdate": "usage_update", "used": used, "size": size}
        await self.peer.update(turn.session.id, update)

    async def do_spend(self, turn: Turn, arg: str) -> None:
        """`/spend IN OUT COST|- [CURRENCY]`: a `usage_update` whose cost is the session's
        cumulative cost grown by COST (none for `-`), and IN/OUT tokens (total IN + OUT) added
        to the `usage` of this turn's prompt response."""
        inputs, outputs, cost, *currency = arg.split()
        sid = turn.session.id
        update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": 0, "size": 200_000}
        if cost != "-":
            self.spent[sid] = self.spent.get(sid, 0.0) + float(cost)
            update["cost"] = {"amount": self.spent[sid], "currency": (currency or ["USD"])[0]}
        usage = self.turn_usage.setdefault(
            sid, {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
        )
        usage["inputTokens"] += int(inputs)
        usage["outputTokens"] += int(outputs)
        usage["totalTokens"] += int(inputs) + int(outputs)
        update["used"] = usage["totalTokens"]
        await self.peer.update(sid, update)

    async def do_stop(self, turn: Turn, arg: str) -> str:
        return arg

    async def do_sleep(self, turn: Turn, arg: str) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(turn.cancelled.wait(), int(arg) / 1000)

    async def do_user(self, turn: Turn, arg: str) -> None:
        content = {"type": "text", "text": arg}
        await self.peer.update(
            turn.session.id, {"sessionUpdate": "user_message_chunk", "content": content}
        )

    async def do_config_update(self, turn: Turn, arg: str) -> None:
        options = self.config_options(turn.session)
        await self.peer.update(
            turn.session.id, {"sessionUpdate": "config_option_update", "configOptions": options}
        )

    async def do_mode(self, turn: Turn, arg: str) -> None:
        turn.session.config["mode"] = arg
        update = {"sessionUpdate": "current_mode_update", "currentModeId": arg}
        await self.peer.update(turn.session.id, update)

    async def do_stderr_fail(self, turn: Turn, arg: str) -> None:
        sys.stderr.write(f"{arg}\n")
        sys.stderr.flush()
        raise RequestError.internal_error({"details": "the agent gave up"})

    async def do_model(self, turn: Turn, arg: str) -> None:
        """`/model`: say the model this session really uses."""
        await self.say(turn, f"model={turn.session.model}")

    async def do_raw(self, turn: Turn, arg: str) -> None:
        await self.peer.update(turn.session.id, json.loads(arg))

    async def do_request(self, turn: Turn, arg: str) -> None:
        """`/request method`: call the client, say "error <code>: <message>" or "ok"."""
        params = {"sessionId": turn.session.id, "path": "/etc/hostname", "content": ""}
        try:
            await self.peer.call(arg, params)
        except RequestError as exc:
            await self.say(turn, f"error {exc.code}: {exc}")
        else:
            await self.say(turn, "ok")


if __name__ == "__main__":
    stubborn = os.environ.get("SCRIPTED_AGENT_STUBBORN") == "1"
    if stubborn:  # ignore SIGTERM and outlive stdin: only SIGKILL ends it
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    main(ScriptedAgent)
    if stubborn:
        time.sleep(600)
