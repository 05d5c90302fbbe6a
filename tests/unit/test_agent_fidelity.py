"""Permission kinds, one-shot automatic answers and data fidelity of agent updates (issue 10)."""

from __future__ import annotations

from typing import Any

import pytest

from c2.core.agents.translate import (
    MAX_CONTENT_CHARS,
    MAX_CONTENT_FIELD_CHARS,
    UpdateTranslator,
    infer_kind,
    parse_turn_usage,
)
from c2.core.agents.updates import ToolCallUpdate, TurnUsage, UsageUpdate
from c2.core.permissions import Decision, automatic_answer, is_stricter
from c2.core.protocol.events import Cost
from c2.core.protocol.values import ExecutionPolicy, PermissionMode, SandboxPolicy

CLAUDE_OPTIONS = [
    ("allow_always", "Always Allow", "allow_always"),
    ("allow", "Allow", "allow_once"),
    ("reject", "Reject", "reject_once"),
]


def ask(tool_call: dict[str, Any]) -> dict[str, Any]:
    options = [{"optionId": o, "name": n, "kind": k} for o, n, k in CLAUDE_OPTIONS]
    return {"sessionId": "s", "toolCall": tool_call, "options": options}


def test_permission_kind_comes_from_the_tool_call_with_that_id() -> None:
    """A kind-less request takes the kind the earlier tool_call for its id reported."""
    translator = UpdateTranslator()
    translator.translate(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Write", "kind": "edit"}
    )
    request = ask({"toolCallId": "t1", "title": "Write /x", "rawInput": {"file_path": "/x"}})
    assert translator.permission_ask(request).kind == "edit"


@pytest.mark.parametrize(
    ("title", "raw_input", "kind"),
    [
        ("`ls -la`", {"command": "ls -la"}, "execute"),
        ("Write /a", {"file_path": "/a", "content": "x"}, "edit"),
        ("Edit `/a`", {"file_path": "/a", "old_string": "x", "new_string": "y"}, "edit"),
        ("Read /a", {"file_path": "/a"}, "read"),
        ("grep", {"pattern": "x"}, "search"),
        ("Fetch https://x", None, "fetch"),
        ("Do something", {"plan": "..."}, None),
    ],
)
def test_permission_kind_inferred_from_title_or_raw_input(
    title: str, raw_input: object, kind: str | None
) -> None:
    """With no kind anywhere, the request's raw input, then its title, decide."""
    assert infer_kind(title, raw_input) == kind
    request = ask({"toolCallId": "new", "title": title, "rawInput": raw_input})
    assert UpdateTranslator().permission_ask(request).kind == kind


def test_permission_kind_of_the_request_wins() -> None:
    """A kind on the request itself is used as is."""
    translator = UpdateTranslator()
    translator.translate({"sessionUpdate": "tool_call", "toolCallId": "t", "kind": "edit"})
    request = ask({"toolCallId": "t", "kind": "execute"})
    assert translator.permission_ask(request).kind == "execute"


def test_automatic_answers_are_one_shot() -> None:
    """Allow picks allow_once (never allow_always); deny picks reject_once."""
    assert automatic_answer(Decision.ALLOW, CLAUDE_OPTIONS) == "allow"
    assert automatic_answer(Decision.DENY, CLAUDE_OPTIONS) == "reject"
    only_always = [("a", "Always", "allow_always"), ("r", "Never", "reject_always")]
    assert automatic_answer(Decision.ALLOW, only_always) is None
    assert automatic_answer(Decision.DENY, only_always) == "r"


def test_policy_stricter_on_either_axis() -> None:
    """A lower mode or a lower sandbox is stricter; the same or looser is not."""
    yolo = ExecutionPolicy(mode=PermissionMode.YOLO, sandbox=SandboxPolicy.WORKSPACE_WRITE)
    ask_ = ExecutionPolicy(mode=PermissionMode.ASK, sandbox=SandboxPolicy.WORKSPACE_WRITE)
    ro = ExecutionPolicy(mode=PermissionMode.YOLO, sandbox=SandboxPolicy.READ_ONLY)
    assert is_stricter(yolo, ask_) and is_stricter(yolo, ro)
    assert not is_stricter(ask_, yolo) and not is_stricter(yolo, yolo)


@pytest.mark.parametrize("variant", ["agent_message_chunk", "agent_thought_chunk"])
def test_empty_chunks_are_dropped(variant: str) -> None:
    """An empty text or thought chunk is neither stored nor emitted."""
    update = {"sessionUpdate": variant, "content": {"type": "text", "text": ""}}
    assert UpdateTranslator().translate(update) is None


def test_tool_call_content_and_locations_are_kept_bounded() -> None:
    """Diffs, text output and locations survive translation, cut to the size bounds."""
    big = "x" * (MAX_CONTENT_FIELD_CHARS + 10)
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t",
        "status": "failed",
        "content": [
            {"type": "diff", "path": "/a", "oldText": None, "newText": "hello"},
            {"type": "content", "content": {"type": "text", "text": "refused by user"}},
            {"type": "terminal", "terminalId": "term-1"},
            {"type": "content", "content": {"type": "image", "data": "…"}},
        ]
        + [{"type": "content", "content": {"type": "text", "text": big}}] * 8,
        "locations": [{"path": "/a", "line": 3}, {"path": ""}],
    }
    out = UpdateTranslator().translate(update)
    assert isinstance(out, ToolCallUpdate) and out.content is not None
    diff, refusal, term, *rest = out.content
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == ("diff", "/a", None, "hello")
    assert (refusal.text, term.terminal_id) == ("refused by user", "term-1")
    assert rest[0].truncated and len(rest[0].text or "") == MAX_CONTENT_FIELD_CHARS
    assert sum(len(i.text or "") for i in out.content) <= MAX_CONTENT_CHARS + 20
    assert [(loc.path, loc.line) for loc in out.locations or []] == [("/a", 3)]
    plain = UpdateTranslator().translate({"sessionUpdate": "tool_call_update", "toolCallId": "t"})
    assert isinstance(plain, ToolCallUpdate) and plain.content is None and plain.locations is None


def test_usage_keeps_cost_and_prompt_usage() -> None:
    """usage_update keeps its cost; a prompt response's usage keeps every reported count."""
    update = {"sessionUpdate": "usage_update", "used": 10, "size": 100}
    priced = {**update, "cost": {"amount": 0.25, "currency": "USD"}}
    assert UpdateTranslator().translate(update) == UsageUpdate(used=10, size=100)
    assert UpdateTranslator().translate(priced) == UsageUpdate(
        10, 100, Cost(amount=0.25, currency="USD")
    )
    result = {
        "stopReason": "end_turn",
        "usage": {"inputTokens": 7, "outputTokens": 3, "totalTokens": 12, "thoughtTokens": 2},
    }
    assert parse_turn_usage(result) == TurnUsage(7, 3, 12, thought_tokens=2)
    assert parse_turn_usage({"stopReason": "end_turn"}) is None
