"""MCP server entries: ACP wire-shape validation, the provider/session merge, projections."""

from __future__ import annotations

from typing import Any

import pytest

from c2.api.errors import status_of
from c2.core.errors import InvalidMcpServerError, McpUnsupportedError
from c2.core.mcp_servers import (
    merge_mcp_servers,
    parse_mcp_servers,
    require_supported,
)

STDIO = {"name": "fs", "command": "/bin/cat", "args": ["-u"], "env": [{"name": "K", "value": "v"}]}
HTTP = {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": []}


def test_mcp_servers_round_trip_in_acp_shape() -> None:
    """Valid stdio and http entries come back out exactly as ACP's wire shape."""
    servers = parse_mcp_servers([STDIO, HTTP])
    assert [s.acp() for s in servers] == [STDIO, HTTP]
    assert [s.summary().model_dump() for s in servers] == [
        {"name": "fs", "type": "stdio"},
        {"name": "web", "type": "http"},
    ]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([{"command": "/bin/cat"}], "name is required"),
        ([STDIO, STDIO], "duplicate name 'fs'"),
        ([STDIO | {"command": "cat"}], "absolute path"),
        ([{"type": "ws", "name": "x", "url": "http://h"}], "type must be stdio, http or sse"),
        ([STDIO | {"env": [{"name": "K"}]}], "string name and value"),
        ([HTTP | {"url": "file:///etc"}], "http(s) URL"),
        ("nope", "must be a list"),
    ],
)
def test_mcp_servers_invalid_entries_are_named(entries: Any, message: str) -> None:
    """Each malformed entry is InvalidMcpServerError (422) naming the problem, no value echoed."""
    with pytest.raises(InvalidMcpServerError) as info:
        parse_mcp_servers(entries)
    assert message in info.value.message and status_of(info.value) == 422
    assert "'v'" not in info.value.message


def test_mcp_servers_merge_session_wins_by_name() -> None:
    """The session's entry replaces the provider's of the same name; order is kept."""
    provider = parse_mcp_servers([STDIO, HTTP])
    session = parse_mcp_servers([STDIO | {"args": ["session"]}, STDIO | {"name": "more"}])
    merged = merge_mcp_servers(provider, session)
    assert [s.name for s in merged] == ["fs", "web", "more"]
    assert merged[0].args == ("session",)


def test_mcp_servers_transport_must_be_advertised() -> None:
    """http/sse servers need the agent's mcpCapabilities; stdio always goes."""
    servers = parse_mcp_servers([STDIO, HTTP])
    require_supported(servers, http=True, sse=False)
    with pytest.raises(McpUnsupportedError) as info:
        require_supported(servers, http=False, sse=True)
    assert info.value.code == "mcp_unsupported" and "web" in info.value.message
