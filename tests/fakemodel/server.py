"""A fake model API on 127.0.0.1 (port 0) for real coding agents under test.

Speaks the two wire formats the agents use: the Anthropic Messages API (`POST /v1/messages`,
streaming SSE or plain JSON, plus `count_tokens`) for Claude Code, and the OpenAI
chat-completions stream (`POST /v1/chat/completions`) for OpenCode's openai-compatible provider.
What it answers comes from markers in the latest user prompt (`tests.fakemodel.script`).
Standard library only; one thread per connection; every request is recorded in `requests`.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakemodel.script import Plan, ToolStep, plan_for

MODEL = "fake-model"


@dataclass(frozen=True)
class Recorded:
    """One request the fake model received."""

    path: str
    prompt: str
    tool_results: int
    stream: bool
    model: str = ""  # the model the agent asked for


def _text_blocks(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    )


def anthropic_prompt(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The latest real user prompt and how many tool results follow it."""
    results = 0
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            results += 1
            continue
        return _text_blocks(content), results
    return "", results


def openai_prompt(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The latest user message and how many tool results follow it."""
    results = 0
    for message in reversed(messages):
        if message.get("role") == "tool":
            results += 1
        elif message.get("role") == "user":
            return _text_blocks(message.get("content")), results
    return "", results


def claude_tool(step: ToolStep) -> tuple[str, dict[str, str]]:
    if step.tool == "mcp":  # Claude Code names MCP tools mcp__<server>__<tool>
        server, _sep, tool = step.arg.partition(":")
        return f"mcp__{server}__{tool}", {"text": step.content}
    if step.tool == "write":
        return "Write", {"file_path": step.arg, "content": step.content}
    if step.tool == "read":
        return "Read", {"file_path": step.arg}
    return "Bash", {"command": step.arg, "description": "Run a command"}


def opencode_tool(step: ToolStep) -> tuple[str, dict[str, str]]:
    if step.tool == "mcp":  # OpenCode names MCP tools <server>_<tool>
        server, _sep, tool = step.arg.partition(":")
        return f"{server}_{tool}", {"text": step.content}
    if step.tool == "write":
        return "write", {"filePath": step.arg, "content": step.content}
    if step.tool == "read":
        return "read", {"filePath": step.arg}
    return "bash", {"command": step.arg, "description": "Run a command"}


class _Handler(BaseHTTPRequestHandler):
    server: FakeModelHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: tests read `requests` instead

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def do_GET(self) -> None:
        self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "no"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "bad json"}})
            return
        path = self.path.split("?", 1)[0]
        if path.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": len(json.dumps(body)) // 4})
        elif path.endswith("/messages"):
            self._anthropic(body)
        elif path.endswith("/chat/completions"):
            self._openai(body)
        else:
            self._json(404, {"error": {"message": f"unknown path {path}"}})

    # -- Anthropic Messages ----------------------------------------------------------------

    def _anthropic(self, body: dict[str, Any]) -> None:
        prompt, results = anthropic_prompt(body.get("messages") or [])
        stream = bool(body.get("stream"))
        model = str(body.get("model") or "")
        self.server.record(Recorded(self.path, prompt, results, stream, model))
        plan = plan_for(prompt, results, offers_tools=bool(body.get("tools")))
        if plan.http_status != 200:
            error = {"type": "api_error", "message": "fake model outage"}
            self._json(plan.http_status, {"type": "error", "error": error})
            return
        text = "".join(plan.text_chunks)
        tool = claude_tool(plan.tool) if plan.tool else None
        tool_id = f"toolu_{uuid.uuid4().hex[:20]}"
        stop = "tool_use" if tool else "end_turn"
        usage = {"input_tokens": 100 + len(prompt) // 4, "output_tokens": len(plan.text_chunks)}
        if not stream:
            content: list[dict[str, Any]] = [{"type": "text", "text": text}]
            if tool:
                use = {"type": "tool_use", "id": tool_id, "name": tool[0], "input": tool[1]}
                content.append(use)
            message = {
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model") or MODEL,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
            self._json(200, message)
            return
        self._start_stream()
        start: dict[str, Any] = {
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
        }
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start}),
            _block_start(0, {"type": "text", "text": ""}),
        ]
        if not self._send_sse(events):
            return
        deltas = _with_empties(plan)
        for i, chunk in enumerate(deltas):
            delta = {"type": "text_delta", "text": chunk}
            if not self._send_sse([_block_delta(0, delta)]):
                return
            if plan.delay and i + 1 < len(deltas):
                time.sleep(plan.delay)
        events = [_block_stop(0)]
        if tool:
            block = {"type": "tool_use", "id": tool_id, "name": tool[0], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(tool[1])}
            events += [_block_start(1, block), _block_delta(1, delta), _block_stop(1)]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self._send_sse(events)

    # -- OpenAI chat completions -----------------------------------------------------------

    def _openai(self, body: dict[str, Any]) -> None:
        prompt, results = openai_prompt(body.get("messages") or [])
        stream = bool(body.get("stream"))
        model = str(body.get("model") or "")
        self.server.record(Recorded(self.path, prompt, results, stream, model))
        plan = plan_for(prompt, results, offers_tools=bool(body.get("tools")))
        if plan.http_status != 200:
            self._json(plan.http_status, {"error": {"message": "fake model outage"}})
            return
        cid = f"chatcmpl-{uuid.uuid4().hex[:20]}"
        tool = opencode_tool(plan.tool) if plan.tool else None
        finish = "tool_calls" if tool else "stop"
        usage = {
            "prompt_tokens": 100 + len(prompt) // 4,
            "completion_tokens": len(plan.text_chunks),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        call = (
            {
                "index": 0,
                "id": f"call_{uuid.uuid4().hex[:20]}",
                "type": "function",
                "function": {"name": tool[0], "arguments": json.dumps(tool[1])},
            }
            if tool
            else None
        )
        if not stream:
            message: dict[str, Any] = {"role": "assistant", "content": "".join(plan.text_chunks)}
            if call:
                message["tool_calls"] = [call]
            choice = {"index": 0, "message": message, "finish_reason": finish}
            reply = {"id": cid, "object": "chat.completion", "model": MODEL}
            self._json(200, {**reply, "choices": [choice], "usage": usage})
            return
        self._start_stream()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [choice],
            }

        if not self._send_data(chunk({"role": "assistant", "content": ""})):
            return
        deltas = _with_empties(plan)
        for i, text in enumerate(deltas):
            if not self._send_data(chunk({"content": text})):
                return
            if plan.delay and i + 1 < len(deltas):
                time.sleep(plan.delay)
        if call and not self._send_data(chunk({"tool_calls": [call]})):
            return
        if not self._send_data(chunk({}, finish)):
            return
        tail = {"id": cid, "object": "chat.completion.chunk", "model": MODEL, "choices": []}
        if self._send_data({**tail, "usage": usage}):
            self._write(b"data: [DONE]\n\n")

    # -- wire helpers ----------------------------------------------------------------------

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

    def _send_sse(self, events: list[tuple[str, dict[str, Any]]]) -> bool:
        data = "".join(f"event: {name}\ndata: {json.dumps(ev)}\n\n" for name, ev in events)
        return self._write(data.encode())

    def _send_data(self, payload: dict[str, Any]) -> bool:
        return self._write(f"data: {json.dumps(payload)}\n\n".encode())

    def _write(self, data: bytes) -> bool:
        """False when the agent hung up (it cancelled the request)."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True


def _block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = "content_block_start"
    return name, {"type": name, "index": index, "content_block": block}


def _block_delta(index: int, delta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = "content_block_delta"
    return name, {"type": name, "index": index, "delta": delta}


def _block_stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def _with_empties(plan: Plan) -> list[str]:
    if not plan.empty_deltas:
        return plan.text_chunks
    out = [""]
    for text in plan.text_chunks:
        out += [text, ""]
    return out


class FakeModelHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()

    def record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)


class FakeModel:
    """The fake model server running in a background thread; `base_url` ends in `/v1`."""

    def __init__(self) -> None:
        self._server = FakeModelHTTPServer()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-model", daemon=True
        )

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[Recorded]:
        with self._server._lock:
            return list(self._server.requests)

    def start(self) -> FakeModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
