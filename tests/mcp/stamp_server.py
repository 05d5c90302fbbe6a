"""A tiny stdio MCP server for tests: one tool, `stamp`, that proves it really ran.

`python tests/mcp/stamp_server.py` (no imports from the repository). `stamp {"text"}` appends
the text to `$STAMP_FILE` (when set) and answers `stamped:<text>:<$STAMP_SECRET>`, so a test
sees both the side effect and that the env c2 kept for the server reached it.
Speaks MCP's JSON-RPC, one message per line, on stdin/stdout.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TOOL = {
    "name": "stamp",
    "description": "Record a stamp and echo it back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2024-11-05"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "c2-stamp", "version": "0.1.0"},
        }
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        if path := os.environ.get("STAMP_FILE"):
            with open(path, "a", encoding="utf-8") as f:
                f.write(text + "\n")
        reply = f"stamped:{text}:{os.environ.get('STAMP_SECRET', '')}"
        return {"content": [{"type": "text", "text": reply}], "isError": False}
    if method == "ping":
        return {}
    return None


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request:
            continue  # notifications (initialized, cancelled)
        result = answer(request)
        if result is None:
            error = {"code": -32601, "message": f"method not found: {request.get('method')}"}
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"], "error": error}
        else:
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
