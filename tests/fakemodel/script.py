"""What the fake model answers: a plan read from markers in the latest user prompt.

Markers (anywhere in the prompt text; everything else is ignored):

- `[[say:TEXT]]`           reply with TEXT (default reply: `Hello from the fake model.`)
- `[[write:PATH:CONTENT]]` call the agent's file-write tool (PATH absolute)
- `[[bash:COMMAND]]`       call the agent's shell tool
- `[[read:PATH]]`          call the agent's file-read tool
- `[[mcp:SERVER:TOOL:TEXT]]` call MCP server SERVER's tool TOOL with `{"text": TEXT}`
- `[[slow]]`               stream the reply as 300 small chunks 50 ms apart (15 s)
- `[[pace:MS]]`            stream the reply's chunks MS milliseconds apart
- `[[http500]]`            answer HTTP 500 (a model API outage)
- `[[empty]]`              surround the reply's text with empty text deltas

Tool markers run in order, one per model request: the n-th request after the prompt (counted by
the tool results the conversation already holds) calls the n-th tool; once every tool has a
result, the model replies with text and ends its turn. Requests that offer no tools (titles,
summaries) always get a short plain reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MARKER = re.compile(
    r"\[\[(say|write|bash|read|mcp|slow|pace|http500|empty)(?::(.*?))?\]\]", re.DOTALL
)
DEFAULT_REPLY = "Hello from the fake model."
SIDE_REPLY = "Fake title"
SLOW_CHUNKS = 300
SLOW_DELAY = 0.05


@dataclass(frozen=True)
class ToolStep:
    """One tool call the model makes: `write`, `bash` or `read` with its arguments."""

    tool: str
    arg: str
    content: str = ""


@dataclass
class Plan:
    """The model's answer to one request."""

    text_chunks: list[str] = field(default_factory=list)
    tool: ToolStep | None = None
    delay: float = 0.0
    http_status: int = 200
    empty_deltas: bool = False


def markers(prompt: str) -> list[tuple[str, str]]:
    """The (name, argument) markers of a prompt, in order."""
    return [(m.group(1), m.group(2) or "") for m in MARKER.finditer(prompt)]


def plan_for(prompt: str, tool_results: int, *, offers_tools: bool) -> Plan:
    """The answer to a request whose latest prompt is `prompt`, with `tool_results` tool
    results after it."""
    found = markers(prompt)
    names = {name for name, _arg in found}
    if "http500" in names:
        return Plan(http_status=500)
    if not offers_tools:
        return Plan(text_chunks=[SIDE_REPLY])
    steps: list[ToolStep] = []
    for name, arg in found:
        if name == "write":
            path, _sep, content = arg.partition(":")
            steps.append(ToolStep("write", path, content))
        elif name in ("bash", "read"):
            steps.append(ToolStep(name, arg))
        elif name == "mcp":
            server, _sep, rest = arg.partition(":")
            tool, _sep, text = rest.partition(":")
            steps.append(ToolStep("mcp", f"{server}:{tool}", text))
    if tool_results < len(steps):
        step = steps[tool_results]
        return Plan(text_chunks=[f"Running {step.tool}. "], tool=step)
    say = next((arg for name, arg in found if name == "say"), DEFAULT_REPLY)
    if "slow" in names:
        return Plan(text_chunks=[f"{i} " for i in range(SLOW_CHUNKS)], delay=SLOW_DELAY)
    pace = next((arg for name, arg in found if name == "pace"), "0")
    return Plan(
        text_chunks=_chunks(say), delay=float(pace or 0) / 1000, empty_deltas="empty" in names
    )


def _chunks(text: str) -> list[str]:
    """Split after each space so the reply streams as several deltas."""
    parts = re.findall(r"\S+\s*|\s+", text)
    return parts or [text]
