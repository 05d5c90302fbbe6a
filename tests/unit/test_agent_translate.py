"""ACP session/update, permission, model and config-option translation (docs/protocol.md
§3.8, §8.4)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from c2.core.agents.agent_input import (
    MAX_FIELD_CHARS,
    MAX_TOTAL_CHARS,
    normalise_name,
    project_agent_input,
)
from c2.core.agents.translate import (
    TOOL_MEMORY_LIMIT,
    InvalidParamsError,
    UpdateTranslator,
    parse_config_options,
    parse_models,
    parse_stop_reason,
)
from c2.core.agents.updates import (
    ConfigOptionsUpdate,
    PlanUpdate,
    TextChunk,
    ThoughtChunk,
    ToolCallUpdate,
    UsageUpdate,
)
from c2.core.protocol.values import StopReason


def chunk(text: str, variant: str = "agent_message_chunk", **extra: Any) -> dict[str, Any]:
    return {"sessionUpdate": variant, "content": {"type": "text", "text": text}, **extra}


def test_translate_text_chunks_share_a_message_id_until_another_update() -> None:
    """Text chunks keep one generated id; a thought starts a new message."""
    t = UpdateTranslator()
    first, second = t.translate(chunk("a")), t.translate(chunk("b"))
    assert isinstance(first, TextChunk) and isinstance(second, TextChunk)
    assert first.message_id == second.message_id and first.message_id
    assert t.translate(chunk("hm", "agent_thought_chunk")) == ThoughtChunk(text="hm")
    third = t.translate(chunk("c"))
    assert isinstance(third, TextChunk) and third.message_id != first.message_id


def test_translate_new_prompt_starts_a_new_message() -> None:
    """start_message() (called per prompt) gives the next chunk a fresh id."""
    t = UpdateTranslator()
    first = t.translate(chunk("a"))
    t.start_message()
    second = t.translate(chunk("b"))
    assert isinstance(first, TextChunk) and isinstance(second, TextChunk)
    assert first.message_id != second.message_id


def test_translate_uses_the_acp_message_id_when_present() -> None:
    """An ACP messageId is used verbatim."""
    t = UpdateTranslator()
    assert t.translate(chunk("a", messageId="m-1")) == TextChunk(message_id="m-1", text="a")


def test_translate_usage_does_not_split_a_message() -> None:
    """Usage updates are metadata: the text before and after is one message."""
    t = UpdateTranslator()
    first = t.translate(chunk("a"))
    usage = t.translate({"sessionUpdate": "usage_update", "used": 5, "size": 10, "cost": None})
    second = t.translate(chunk("b"))
    assert usage == UsageUpdate(used=5, size=10)
    assert isinstance(first, TextChunk) and isinstance(second, TextChunk)
    assert first.message_id == second.message_id


@pytest.mark.parametrize(
    "update",
    [
        chunk("me", "user_message_chunk"),
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "data": "x"}},
        {"sessionUpdate": "available_commands_update", "availableCommands": []},
        {"sessionUpdate": "something_new", "x": 1},
        {"sessionUpdate": "usage_update", "used": "5", "size": 10},
        {"sessionUpdate": "tool_call", "title": "no id"},
        "not an object",
    ],
)
def test_translate_drops_unhandled_updates(update: object) -> None:
    """User chunks, non-text chunks, unknown variants and malformed updates are dropped."""
    assert UpdateTranslator().translate(update) is None


def test_translate_tool_call_defaults() -> None:
    """tool_call defaults: title "", status pending, no agent_input for ordinary tools."""
    t = UpdateTranslator()
    update = t.translate({"sessionUpdate": "tool_call", "toolCallId": "t1", "rawInput": {"a": 1}})
    assert update == ToolCallUpdate(
        id="t1", title="", status="pending", kind=None, agent_input=None
    )


def test_translate_tool_call_update_falls_back_to_remembered_title_and_kind() -> None:
    """tool_call_update: status in_progress, title/kind from the earlier tool_call."""
    t = UpdateTranslator()
    t.translate(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run", "kind": "execute"}
    )
    update = t.translate({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": " "})
    assert update == ToolCallUpdate(
        id="t1", title="Run", status="in_progress", kind="execute", agent_input=None
    )
    renamed = t.translate(
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": "Ran", "status": "done"}
    )
    assert isinstance(renamed, ToolCallUpdate) and (renamed.title, renamed.status) == (
        "Ran",
        "done",
    )
    assert t.remembered_title("t1") == "Ran"


def test_translate_tool_memory_is_bounded() -> None:
    """Only the most recent 256 tool ids are remembered."""
    t = UpdateTranslator()
    for i in range(TOOL_MEMORY_LIMIT + 1):
        t.translate({"sessionUpdate": "tool_call", "toolCallId": f"t{i}", "title": f"T{i}"})
    assert t.remembered_title("t0") is None
    assert t.remembered_title("t1") == "T1"
    update = t.translate({"sessionUpdate": "tool_call_update", "toolCallId": "t0"})
    assert isinstance(update, ToolCallUpdate) and update.title == ""


def test_translate_plan_keeps_entry_content_only() -> None:
    """plan entries become their content strings."""
    update = UpdateTranslator().translate(
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "a", "priority": "high", "status": "pending"},
                {"content": "b", "priority": "low", "status": "completed"},
            ],
        }
    )
    assert update == PlanUpdate(entries=["a", "b"])


def test_translate_config_option_update_filters_and_flattens() -> None:
    """config_option_update keeps select options (missing type = select), flattening groups."""
    update = UpdateTranslator().translate(
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {"id": "fast", "name": "Fast", "type": "boolean", "currentValue": True},
                {
                    "id": "effort",
                    "name": "Effort",
                    "category": "thought_level",
                    "currentValue": "high",
                    "options": [
                        {"group": "g1", "name": "G1", "options": [{"value": "low", "name": "Low"}]},
                        {"group": "g2", "name": "G2", "options": [{"value": "high", "name": "H"}]},
                    ],
                },
            ],
        }
    )
    assert isinstance(update, ConfigOptionsUpdate)
    [option] = update.options
    assert (option.id, option.category, option.current) == ("effort", "thought_level", "high")
    assert [c.id for c in option.choices] == ["low", "high"]


def test_parse_config_options_current_defaults_to_empty() -> None:
    """A non-string currentValue reads as ""; descriptions are kept."""
    [option] = parse_config_options(
        [{"id": "m", "name": "Mode", "type": "select", "currentValue": 3, "options": [
            {"value": "a", "name": "A", "description": "first"}]}]
    )  # fmt: skip
    assert option.current == "" and option.choices[0].description == "first"
    assert parse_config_options(None) == []


def test_parse_models_reads_available_and_current() -> None:
    """models: availableModels + currentModelId; absent or empty -> None."""
    models = parse_models(
        {
            "availableModels": [{"modelId": "m1", "name": "M1"}, {"modelId": "m2"}],
            "currentModelId": "m2",
        }
    )
    assert models is not None
    assert [(m.id, m.name) for m in models.available] == [("m1", "M1"), ("m2", "m2")]
    assert models.current == "m2"
    assert parse_models({"availableModels": []}) is None
    assert parse_models(None) is None


def test_parse_stop_reason_maps_unknown_to_end_turn() -> None:
    """Known stop reasons map to StopReason; anything else counts as end_turn."""
    assert parse_stop_reason({"stopReason": "cancelled"}) is StopReason.CANCELLED
    assert parse_stop_reason({"stopReason": "weird"}) is StopReason.END_TURN
    assert parse_stop_reason(None) is StopReason.END_TURN


def permission_params(**tool_call: Any) -> dict[str, Any]:
    return {
        "sessionId": "s",
        "toolCall": {"toolCallId": "t1", **tool_call},
        "options": [
            {"optionId": "a", "name": "Allow", "kind": "allow_once"},
            {"optionId": "r", "name": "Reject", "kind": "reject_always"},
        ],
    }


def test_permission_ask_title_fallbacks() -> None:
    """Title: toolCall.title if non-blank, else the remembered title, else "Tool call"."""
    t = UpdateTranslator()
    ask = t.permission_ask(permission_params(title="rm build/", kind="execute"))
    assert (ask.title, ask.kind, ask.tool_call_id) == ("rm build/", "execute", "t1")
    assert ask.options == [("a", "Allow", "allow_once"), ("r", "Reject", "reject_always")]
    assert t.permission_ask(permission_params(title="  ")).title == "Tool call"
    t.translate({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit x"})
    assert t.permission_ask(permission_params()).title == "Edit x"


@pytest.mark.parametrize(
    "params",
    [None, {"toolCall": {}, "options": []}, {"toolCall": {"toolCallId": "t"}, "options": [{}]}],
)
def test_permission_ask_rejects_malformed_params(params: object) -> None:
    """Malformed permission params raise InvalidParamsError (answered -32602)."""
    with pytest.raises(InvalidParamsError):
        UpdateTranslator().permission_ask(params)


def test_agent_input_keeps_allow_listed_fields_of_agent_launches() -> None:
    """An agent launch keeps only allow-listed string fields."""
    raw = {"subagent_type": "explorer", "prompt": "look", "secret_blob": "x", "count": 3}
    assert project_agent_input(raw, kind="other", title="Task") == {
        "subagent_type": "explorer",
        "prompt": "look",
    }


def test_agent_input_ignores_ordinary_tools() -> None:
    """Ordinary tool inputs are never retained."""
    assert project_agent_input({"command": "ls", "name": "x"}, kind="execute", title="ls") is None
    assert project_agent_input("not json", kind=None, title=None) is None


@pytest.mark.parametrize(
    ("raw", "kind", "title"),
    [
        ({"description": "d"}, None, "Spawn Subagent"),
        ({"description": "d"}, "delegate_task", None),
        ({"toolName": "mcp__tools__runWorkflow", "workflow": "w"}, None, None),
        ({"task_name": "t", "objective": "o"}, None, None),
        ({"arguments": json.dumps({"agentType": "coder", "message": "m"})}, None, None),
        ({"params": {"subagentType": "reviewer"}}, None, None),
    ],
)
def test_agent_input_detects_launch_signals(
    raw: dict[str, Any], kind: str | None, title: str | None
) -> None:
    """Signals: kind/title/tool names, agent type fields, task_name plus a body, nested args."""
    assert project_agent_input(raw, kind=kind, title=title)


def test_agent_input_task_name_alone_is_not_a_launch() -> None:
    """task_name without a message/prompt/task/objective is not a launch."""
    assert project_agent_input({"task_name": "t", "role": "r"}, kind=None, title=None) is None


def test_agent_input_bounds_field_and_total_size() -> None:
    """Each field is cut to 2048 chars, the total to 8192, blanks are dropped."""
    raw = {key: "y" * 5000 for key in ("message", "prompt", "task", "objective", "instructions")}
    raw.update(agent_type="a", title="   ")
    projected = project_agent_input(raw, kind=None, title=None)
    assert projected is not None and "title" not in projected
    assert all(len(v) <= MAX_FIELD_CHARS for v in projected.values())
    assert sum(len(v) for v in projected.values()) == MAX_TOTAL_CHARS
    assert len(projected["message"]) == MAX_FIELD_CHARS


def test_agent_input_name_normalisation() -> None:
    """camelCase and punctuation normalise to snake_case."""
    assert normalise_name("spawnSubagent") == "spawn_subagent"
    assert normalise_name("Run-Agent!") == "run_agent"
