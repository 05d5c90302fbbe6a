"""MCP servers handed to a session's agent (ACP `mcpServers`): validation of ACP's wire shape,
the provider/session merge, and the two projections (the full ACP form sent to the agent and
kept in the store, the `{name, type}` summary shown to clients).

Env values and headers are secrets: they only ever leave c2 towards the agent. Error messages
name a server by position and name, never echo a value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

from c2.core.errors import InvalidMcpServerError, McpUnsupportedError
from c2.core.protocol.state import McpServerSummary

McpTransport = Literal["stdio", "http", "sse"]
MAX_SERVERS = 32
_MAX_TEXT = 4096
_MAX_ITEMS = 128
_STDIO_KEYS = frozenset({"type", "name", "command", "args", "env"})
_REMOTE_KEYS = frozenset({"type", "name", "url", "headers"})


@dataclass(frozen=True)
class McpServer:
    """One MCP server. `pairs` are env variables (stdio) or headers (http/sse)."""

    name: str
    type: McpTransport
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    pairs: tuple[tuple[str, str], ...] = ()

    def acp(self) -> dict[str, Any]:
        """ACP wire form (with secrets): what `session/new|load|resume` carry, what is stored."""
        pairs = [{"name": n, "value": v} for n, v in self.pairs]
        if self.type == "stdio":
            args = list(self.args)
            return {"name": self.name, "command": self.command, "args": args, "env": pairs}
        return {"type": self.type, "name": self.name, "url": self.url, "headers": pairs}

    def summary(self) -> McpServerSummary:
        """What clients see: name and transport only."""
        return McpServerSummary(name=self.name, type=self.type)


def parse_mcp_servers(raw: object, *, where: str = "mcp_servers") -> tuple[McpServer, ...]:
    """Validate a list in ACP's wire shape; raises InvalidMcpServerError naming the entry."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidMcpServerError(f"{where} must be a list")
    if len(raw) > MAX_SERVERS:
        raise InvalidMcpServerError(f"{where}: at most {MAX_SERVERS} servers")
    servers: list[McpServer] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        server = _parse_one(item, f"{where}[{index}]")
        if server.name in seen:
            raise InvalidMcpServerError(f"{where}[{index}]: duplicate name {server.name!r}")
        seen.add(server.name)
        servers.append(server)
    return tuple(servers)


def merge_mcp_servers(
    provider: Sequence[McpServer], session: Sequence[McpServer]
) -> tuple[McpServer, ...]:
    """The provider's servers overlaid by the session's (the session's entry wins by name)."""
    merged = {server.name: server for server in provider}
    merged.update((server.name, server) for server in session)
    return tuple(merged.values())


def require_supported(servers: Iterable[McpServer], *, http: bool, sse: bool) -> None:
    """Refuse a transport the agent did not advertise (`mcpCapabilities.http` / `.sse`)."""
    for server in servers:
        if (server.type == "http" and not http) or (server.type == "sse" and not sse):
            raise McpUnsupportedError(
                f"this agent does not support {server.type} MCP servers "
                f"(server {server.name!r}); use a stdio server"
            )


def dump_mcp_servers(servers: Sequence[McpServer]) -> list[dict[str, Any]]:
    """The servers in ACP's wire shape (secrets included: for the agent and the store)."""
    return [server.acp() for server in servers]


def _parse_one(item: object, where: str) -> McpServer:
    if not isinstance(item, dict):
        raise InvalidMcpServerError(f"{where} must be an object")
    kind = item.get("type", "stdio")
    if kind not in ("stdio", "http", "sse"):
        raise InvalidMcpServerError(f"{where}.type must be stdio, http or sse")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        raise InvalidMcpServerError(f"{where}.name is required (1-128 characters)")
    unknown = sorted(set(item) - (_STDIO_KEYS if kind == "stdio" else _REMOTE_KEYS) - {"_meta"})
    if unknown:
        raise InvalidMcpServerError(f"{where} ({name!r}): unknown field {unknown[0]!r}")
    if kind == "stdio":
        command = item.get("command")
        if not isinstance(command, str) or not command or len(command) > _MAX_TEXT:
            raise InvalidMcpServerError(f"{where} ({name!r}): command is required")
        if not PurePosixPath(command).is_absolute() or "\x00" in command:
            raise InvalidMcpServerError(f"{where} ({name!r}): command must be an absolute path")
        args = item.get("args", [])
        if not isinstance(args, list) or len(args) > _MAX_ITEMS:
            raise InvalidMcpServerError(f"{where} ({name!r}): args must be a list of strings")
        if not all(isinstance(a, str) and len(a) <= _MAX_TEXT for a in args):
            raise InvalidMcpServerError(f"{where} ({name!r}): args must be a list of strings")
        pairs = _pairs(item.get("env", []), f"{where} ({name!r}): env")
        return McpServer(name=name, type="stdio", command=command, args=tuple(args), pairs=pairs)
    url = item.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidMcpServerError(f"{where} ({name!r}): url must be an http(s) URL")
    if len(url) > _MAX_TEXT:
        raise InvalidMcpServerError(f"{where} ({name!r}): url is too long")
    pairs = _pairs(item.get("headers", []), f"{where} ({name!r}): headers")
    return McpServer(name=name, type=kind, url=url, pairs=pairs)


def _pairs(raw: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, list) or len(raw) > _MAX_ITEMS:
        raise InvalidMcpServerError(f"{where} must be a list of {{name, value}}")
    pairs: list[tuple[str, str]] = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise InvalidMcpServerError(f"{where} must be a list of {{name, value}}")
        name, value = entry.get("name"), entry.get("value")
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise InvalidMcpServerError(f"{where} entries need a string name and value")
        if len(name) > 256 or len(value) > _MAX_TEXT:
            raise InvalidMcpServerError(f"{where} entry {name[:64]!r} is too long")
        pairs.append((name, value))
    return tuple(pairs)
