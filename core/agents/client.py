"""The ACP client side of one agent subprocess: `AgentProcess` (docs/protocol.md §9.1).

Spawns the agent in its own process group, speaks JSON-RPC through the SDK's `Connection`,
delivers translated updates to the engine's `AgentHandler` in order, and guarantees that a
dying agent fails the in-flight request promptly (its whole process group ended at once), that
`close()` leaves no process behind even when cancelled, and that a `ProcessRegistry` hears of
every spawned group and of its end (so a crashed c2's successor can end what it left).

Over 300 lines: one object's whole life (spawn, initialize, requests, the update pump,
exit, close); its guarantees above hold only across all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from typing import Any

from acp.connection import Connection
from acp.exceptions import RequestError

from c2.core.agents.framing import NdjsonStdio
from c2.core.agents.pipes import PipeTicker
from c2.core.agents.port import LaunchSpec, ProcessRegistry
from c2.core.agents.stdio import (
    AgentChild,
    StderrTail,
    signal_group,
    spawn,
    terminate_group,
)
from c2.core.agents.translate import (
    InvalidParamsError,
    UpdateTranslator,
    parse_auth_methods,
    parse_config_options,
    parse_stop_reason,
    parse_turn_usage,
    session_info,
)
from c2.core.agents.updates import (
    AcpSessionInfo,
    AgentError,
    AgentHandler,
    AgentUpdate,
    ConfigOptionsUpdate,
    ModeUpdate,
    PermissionAsk,
    PlanUpdate,
    TextChunk,
    ThoughtChunk,
    ToolCallUpdate,
    UsageUpdate,
)
from c2.core.protocol.state import AuthMethodInfo, ConfigOption
from c2.core.protocol.values import StopReason

__all__ = [
    "AcpSessionInfo",
    "AgentError",
    "AgentHandler",
    "AgentProcess",
    "AgentUpdate",
    "ConfigOptionsUpdate",
    "LaunchSpec",
    "ModeUpdate",
    "PermissionAsk",
    "PlanUpdate",
    "ProcessRegistry",
    "TextChunk",
    "ThoughtChunk",
    "ToolCallUpdate",
    "UsageUpdate",
]

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
INITIALIZE_TIMEOUT = 30.0
EXIT_DRAIN_GRACE = 0.5  # after exit, how long trailing output may take to arrive
CANCEL_SEND_TIMEOUT = 5.0
CLOSE_SESSION_TIMEOUT = 0.5  # session/close is a courtesy before ending the process
STDERR_SETTLE = 0.1  # after a failed request, how long its stderr may take to arrive
AUTH_REQUIRED = -32000  # ACP's "authentication required" JSON-RPC error code
# Updates waiting for a handler that made them wait (its writer backlogged) at which the
# agent's stdout stops being read, and the level at which reading resumes: the agent is held
# back rather than c2's memory growing with what it says.
MAX_QUEUED_UPDATES = 1024
RESUME_QUEUED_UPDATES = 256
CLIENT_CAPABILITIES: dict[str, Any] = {
    # fs is not offered (docs/protocol.md §9.1).
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
}


class AgentProcess:
    """One live agent subprocess and its ACP connection. Build with `AgentProcess.start`."""

    def __init__(
        self,
        child: AgentChild,
        handler: AgentHandler,
        registry: ProcessRegistry | None = None,
    ) -> None:
        self._child = child  # its `exited` is set when the process is reaped
        self._handler = handler
        self._registry = registry
        self.pid: int = child.pid
        self.supports_load_session = False
        self.supports_resume = False
        self.supports_close_session = False
        self.supports_fork = False
        self.mcp_http = False
        self.mcp_sse = False
        self.auth_methods: tuple[AuthMethodInfo, ...] = ()
        self._translator = UpdateTranslator()
        self._updates: asyncio.Queue[AgentUpdate | asyncio.Future[None]] = asyncio.Queue()
        # The pump is inside the handler's on_update: a new update must queue behind it.
        self._pumping = False
        self._stderr = StderrTail()
        self._stdio = NdjsonStdio(child.stdin, self._take_update)
        child.stdout_pipe.attach(self._stdio)
        self._conn = Connection(self._dispatch, self._stdio)
        self._settled = asyncio.Event()  # exit observed and trailing output drained
        self._closing = False
        self._closed = asyncio.Event()
        self._pump_task = asyncio.create_task(self._pump(), name=f"agent-{self.pid}-updates")
        self._tasks = [
            self._pump_task,
            asyncio.create_task(self._stderr.drain(child.stderr), name=f"agent-{self.pid}-err"),
            asyncio.create_task(self._watch_exit(), name=f"agent-{self.pid}-exit"),
        ]

    @classmethod
    async def start(
        cls,
        spec: LaunchSpec,
        handler: AgentHandler,
        *,
        initialize_timeout: float = INITIALIZE_TIMEOUT,
        registry: ProcessRegistry | None = None,
        pipes: PipeTicker | None = None,
    ) -> AgentProcess:
        """Spawn the agent and run ACP `initialize`; raises AgentError on either failing.
        With `pipes`, its stdout is read on that tick while it trickles (core/agents/pipes.py)."""
        if not await asyncio.to_thread(os.path.isdir, spec.cwd):
            raise AgentError(f"working directory not found: {spec.cwd}")
        try:
            child = await spawn(spec.command, spec.args, spec.env, spec.cwd, pipes)
        except FileNotFoundError:
            raise AgentError(f"command not found: {spec.command}") from None
        except PermissionError:
            raise AgentError(f"command not executable: {spec.command}") from None
        except OSError as exc:
            raise AgentError(f"couldn't start {spec.command}: {exc.strerror or exc}") from None
        agent = cls(child, handler, registry)
        try:
            await agent._announce()
            try:
                async with asyncio.timeout(initialize_timeout):
                    await agent._initialize()
            except TimeoutError:
                message = f"initialize failed: no answer within {initialize_timeout:g} s"
                raise AgentError(message) from None
        except BaseException:
            await agent.close(grace=0.5)
            raise
        return agent

    async def _initialize(self) -> None:
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": CLIENT_CAPABILITIES,
            "clientInfo": {"name": "c2", "version": "0.1.0"},
        }
        result = await self._request("initialize", params, step="initialize")
        body = result if isinstance(result, dict) else {}
        caps = body.get("agentCapabilities")
        caps = caps if isinstance(caps, dict) else {}
        # Must be boolean true; "yes" and friends do not count (docs/protocol.md §9.1).
        self.supports_load_session = caps.get("loadSession") is True
        # sessionCapabilities.{resume,close}: `{}` means supported, absent/null means not.
        session_caps = caps.get("sessionCapabilities")
        session_caps = session_caps if isinstance(session_caps, dict) else {}
        self.supports_resume = isinstance(session_caps.get("resume"), dict)
        self.supports_close_session = isinstance(session_caps.get("close"), dict)
        self.supports_fork = isinstance(session_caps.get("fork"), dict)  # unstable in ACP
        mcp = caps.get("mcpCapabilities")
        mcp = mcp if isinstance(mcp, dict) else {}
        self.mcp_http, self.mcp_sse = mcp.get("http") is True, mcp.get("sse") is True
        self.auth_methods = parse_auth_methods(body.get("authMethods"))

    # -- ACP requests -------------------------------------------------------------------------

    async def new_session(
        self, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        """`session/new` in `cwd` with `mcp_servers` (ACP wire shape)."""
        params = {"cwd": cwd, "mcpServers": mcp_servers or []}
        result = await self._request("session/new", params, step="session/new")
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise AgentError("session/new failed: the agent returned no sessionId")
        return session_info(session_id, result)

    async def load_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        """`session/load`; the replayed history is not delivered, except usage updates."""
        params = {"sessionId": acp_session_id, "cwd": cwd, "mcpServers": mcp_servers or []}
        try:
            result = await self._request("session/load", params, step="session/load")
        finally:
            self._stdio.forget_loads()
        self._translator.start_message()
        return session_info(acp_session_id, result)

    async def resume_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        """`session/resume` (advertised by `sessionCapabilities.resume`): no history replay."""
        params = {"sessionId": acp_session_id, "cwd": cwd, "mcpServers": mcp_servers or []}
        result = await self._request("session/resume", params, step="session/resume")
        self._translator.start_message()
        return session_info(acp_session_id, result)

    async def fork_session(
        self, acp_session_id: str, cwd: str, mcp_servers: list[dict[str, Any]] | None = None
    ) -> AcpSessionInfo:
        """`session/fork` (advertised by `sessionCapabilities.fork`): a new ACP session that
        continues from `acp_session_id`'s conversation, working in `cwd`."""
        params = {"sessionId": acp_session_id, "cwd": cwd, "mcpServers": mcp_servers or []}
        result = await self._request("session/fork", params, step="session/fork")
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise AgentError("session/fork failed: the agent returned no sessionId")
        self._translator.start_message()
        return session_info(session_id, result)

    async def set_mode(self, acp_session_id: str, mode_id: str) -> None:
        """`session/set_mode`."""
        params = {"sessionId": acp_session_id, "modeId": mode_id}
        await self._request("session/set_mode", params, step="session/set_mode")

    async def prompt(self, acp_session_id: str, text: str) -> StopReason:
        """Run one turn; returns after every update that preceded the answer was delivered."""
        self._translator.start_message()
        params = {"sessionId": acp_session_id, "prompt": [{"type": "text", "text": text}]}
        try:
            result = await self._request("session/prompt", params, step="prompt")
        except AgentError:
            await self._delivered()
            raise
        usage = parse_turn_usage(result)
        if usage is not None:  # after every update of the turn, like the answer itself
            self._updates.put_nowait(usage)
        await self._delivered()
        return parse_stop_reason(result)

    async def cancel(self, acp_session_id: str) -> None:
        """Send `session/cancel`; never raises (the agent may already be gone)."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CANCEL_SEND_TIMEOUT):
                await self._conn.send_notification("session/cancel", {"sessionId": acp_session_id})

    async def set_model(self, acp_session_id: str, model_id: str) -> None:
        """`session/set_model`."""
        params = {"sessionId": acp_session_id, "modelId": model_id}
        await self._request("session/set_model", params, step="session/set_model")

    async def set_config_option(
        self, acp_session_id: str, config_id: str, value: str
    ) -> list[ConfigOption]:
        """`session/set_config_option`; returns the agent's new (select-only) option set."""
        params = {"sessionId": acp_session_id, "configId": config_id, "value": value}
        result = await self._request(
            "session/set_config_option", params, step="session/set_config_option"
        )
        return parse_config_options(result.get("configOptions") if isinstance(result, dict) else [])

    @property
    def alive(self) -> bool:
        """True while the process runs and its connection is open."""
        return not self._closing and self._child.returncode is None and not self._stdio.eof.is_set()

    async def close(self, grace: float = 2.0, *, acp_session_id: str | None = None) -> None:
        """End the agent: `session/close` for `acp_session_id` where the agent supports it,
        close stdin, wait `grace`, SIGTERM then SIGKILL the whole process group. Idempotent.

        Cancelled midway, it SIGKILLs the group before unwinding: never a process left behind.
        """
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        try:
            if acp_session_id is not None and self.supports_close_session and self.alive_process:
                await self._close_session(acp_session_id)
            await self._conn.close()  # fails outstanding requests, closes the agent's stdin
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self._child.exited.wait()
            # Even after the leader left, its children may still be running in the group.
            await terminate_group(self.pid, self._child.exited, grace)
        except BaseException:
            signal_group(self.pid, signal.SIGKILL)
            raise
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._child.stdout_pipe.close()
            self._closed.set()
        await self._forget()

    @property
    def alive_process(self) -> bool:
        """True while the leader process has not exited (even while closing)."""
        return self._child.returncode is None and not self._child.exited.is_set()

    async def _close_session(self, acp_session_id: str) -> None:
        """`session/close`, bounded; a refusal or silence only means we escalate sooner."""
        try:
            async with asyncio.timeout(CLOSE_SESSION_TIMEOUT):
                await self._conn.send_request("session/close", {"sessionId": acp_session_id})
        except (TimeoutError, RequestError, OSError) as exc:
            logger.debug("session/close to agent %d: %r", self.pid, exc)

    async def _announce(self) -> None:
        if self._registry is None:
            return
        try:
            await self._registry.spawned(self.pid)
        except Exception:
            logger.exception("could not record agent process %d", self.pid)

    async def _forget(self) -> None:
        if self._registry is None:
            return
        try:
            await self._registry.gone(self.pid)
        except Exception:
            logger.exception("could not forget agent process %d", self.pid)

    # -- internals ----------------------------------------------------------------------------

    async def _request(self, method: str, params: dict[str, Any], *, step: str) -> Any:
        """One ACP request; failures become AgentError("<step> failed: …") with the stderr the
        agent wrote meanwhile and, for ACP's auth-required error, its authMethods."""
        mark = self._stderr.received
        try:
            return await self._conn.send_request(method, params)
        except RequestError as exc:
            tail = await self._stderr_since(mark)
            auth = exc.code == AUTH_REQUIRED
            raise AgentError(
                f"{step} failed: {_rpc_error_message(exc)}",
                auth_required=auth,
                auth_methods=self.auth_methods if auth else (),
                stderr_tail=tail,
            ) from None
        except OSError:  # ConnectionError: the stream closed under the request
            lost = await self._lost_message()
            tail = self._stderr.since(mark)
            raise AgentError(f"{step} failed: {lost}", stderr_tail=tail) from None

    async def _stderr_since(self, mark: int) -> str:
        # stderr and stdout are separate pipes: an explanation written just before the error
        # answer may still be in flight. Wait briefly, only when nothing arrived yet.
        if self._stderr.received == mark and not self._stderr.done.is_set():
            self._stderr.grew.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STDERR_SETTLE):
                    await self._stderr.grew.wait()
        return self._stderr.since(mark)

    async def _lost_message(self) -> str:
        if not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2 * EXIT_DRAIN_GRACE):
                    await self._settled.wait()
        code = self._child.returncode
        if self._closing or code is None:
            return "acp connection closed"
        if code < 0:
            try:
                message = f"agent exited ({signal.Signals(-code).name})"
            except ValueError:
                message = f"agent exited (signal {-code})"
        else:
            message = f"agent exited (code {code})"
        tail = self._stderr.last_line()
        return f"{message}: {tail}" if tail else message

    async def _watch_exit(self) -> None:
        await self._child.exited.wait()
        orphaned = not self._closing
        if orphaned:
            # The leader is gone: whatever it started goes with it, at once (close() would
            # only come with the next prompt or the session's deletion). Its output already
            # in the pipes is still read below.
            signal_group(self.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EXIT_DRAIN_GRACE):
                await self._stdio.eof.wait()
                await self._stderr.done.wait()
        self._settled.set()
        if not self._closing:  # nobody asked it to stop: a crash, logged with its last words
            tail = self._stderr.since(0)
            logger.warning(
                "agent %d exited unexpectedly with %s; %s",
                self.pid,
                self._child.returncode,
                f"the end of its stderr:\n{tail}" if tail else "it wrote nothing to stderr",
            )
        # A grandchild may hold stdout open, so EOF alone can't be relied on to fail requests.
        await self._conn.close()
        if orphaned:
            await self._forget()

    def _take_update(self, update: object, replay: bool) -> None:
        # Runs as the agent's stdout is read, in wire order (see NdjsonStdio).
        translated = self._translator.translate(update)
        if translated is None or (replay and not isinstance(translated, UsageUpdate)):
            return
        if not self._pumping and self._updates.empty():
            try:
                if self._handler.take_update(translated):
                    return  # handled in place, nothing queued before it
            except Exception:
                logger.exception("agent update handler failed")
                return
        self._updates.put_nowait(translated)
        if self._updates.qsize() >= MAX_QUEUED_UPDATES:
            self._child.stdout_pipe.pause()

    async def _pump(self) -> None:
        try:
            while True:
                item = await self._updates.get()
                if isinstance(item, asyncio.Future):
                    if not item.done():
                        item.set_result(None)
                    continue
                self._pumping = True
                try:
                    await self._handler.on_update(item)
                except Exception:
                    logger.exception("agent update handler failed")
                finally:
                    self._pumping = False
                if self._updates.qsize() <= RESUME_QUEUED_UPDATES:
                    self._child.stdout_pipe.resume()
        finally:
            while not self._updates.empty():
                item = self._updates.get_nowait()
                if isinstance(item, asyncio.Future) and not item.done():
                    item.set_result(None)

    async def _delivered(self) -> None:
        """Wait until every update queued so far has been handed to the handler."""
        if self._pump_task.done():
            return
        marker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._updates.put_nowait(marker)
        await asyncio.wait([marker, self._pump_task], return_when=asyncio.FIRST_COMPLETED)

    async def _dispatch(self, method: str, params: Any, is_notification: bool) -> Any:
        if is_notification:
            return None  # session/update is taken at the transport; nothing else is expected
        if method != "session/request_permission":
            raise RequestError(-32601, f"method not found: {method}", {"method": method})
        try:
            ask = self._translator.permission_ask(params)
        except InvalidParamsError as exc:
            raise RequestError(-32602, f"invalid params: {exc}") from None
        await self._delivered()  # the engine sees the lead-up before the question
        try:
            choice = await self._handler.on_permission(ask)
        except Exception:
            logger.exception("permission handler failed; answering cancelled")
            choice = None
        if choice is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": choice}}


def _rpc_error_message(exc: RequestError) -> str:
    """The agent's own words, without JSON-RPC framing ("rpc error -32603: …")."""
    message = str(exc).strip() or f"error {exc.code}"
    details = exc.data.get("details") if isinstance(exc.data, dict) else None
    if isinstance(details, str) and details.strip() and details.strip() != str(exc):
        message += f" ({details.strip()[:500]})"
    return message
