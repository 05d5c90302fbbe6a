"""The `tool_call.agent_input` projection (docs/protocol.md §3.8).

Keeps a small allow-listed, size-bounded set of descriptive string fields, and only when the
tool call looks like an agent or workflow launch; never an arbitrary tool payload.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_FIELD_CHARS = 2048
MAX_TOTAL_CHARS = 8192

KEPT_KEYS: tuple[str, ...] = (
    "agent_type",
    "agentType",
    "subagent_type",
    "subagentType",
    "task_name",
    "taskName",
    "role",
    "title",
    "name",
    "description",
    "message",
    "prompt",
    "task",
    "objective",
    "instructions",
    "workflow",
    "tool",
    "tool_name",
    "toolName",
    "operation",
)
_NESTED_KEYS = ("arguments", "args", "input", "params")
_TOOLISH_KEYS = ("tool", "tool_name", "toolName", "name")
_AGENT_TYPE_KEYS = ("agent_type", "agentType", "subagent_type", "subagentType")
_TASK_NAME_KEYS = ("task_name", "taskName")
_TASK_BODY_KEYS = ("message", "prompt", "task", "objective")
_SIGNALS = frozenset(
    {
        "agent",
        "delegate",
        "delegate_task",
        "run_agent",
        "run_subagent",
        "run_workflow",
        "spawn_agent",
        "spawn_subagent",
        "start_agent",
        "start_subagent",
        "subagent",
        "workflow",
    }
)
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalise_name(value: str) -> str:
    """camelCase / punctuation to snake_case: "spawnSubagent" -> "spawn_subagent"."""
    snake = _CAMEL_BOUNDARY.sub("_", value.strip()).lower()
    return _NON_ALNUM.sub("_", snake).strip("_")


def _is_signal(value: object) -> bool:
    if not isinstance(value, str):
        return False
    name = normalise_name(value)
    return any(name == s or name.endswith(f"_{s}") for s in _SIGNALS)


def _as_object(value: object) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _non_blank(fields: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return any(isinstance(fields.get(k), str) and fields[k].strip() for k in keys)


def project_agent_input(
    raw_input: object, *, kind: str | None, title: str | None
) -> dict[str, str] | None:
    """The bounded allow-listed fields of an agent/workflow launch's rawInput, else None."""
    top = _as_object(raw_input)
    if top is None:
        return None
    fields = dict(top)
    for key in _NESTED_KEYS:
        nested = _as_object(top.get(key))
        if nested is not None:
            for name, value in nested.items():
                fields.setdefault(name, value)

    looks_like_launch = (
        _is_signal(kind)
        or _is_signal(title)
        or any(_is_signal(fields.get(k)) for k in _TOOLISH_KEYS)
        or _non_blank(fields, _AGENT_TYPE_KEYS)
        or (_non_blank(fields, _TASK_NAME_KEYS) and _non_blank(fields, _TASK_BODY_KEYS))
    )
    if not looks_like_launch:
        return None

    kept: dict[str, str] = {}
    budget = MAX_TOTAL_CHARS
    for key in KEPT_KEYS:
        value = fields.get(key)
        if not isinstance(value, str) or not value.strip():
            continue
        value = value[: min(MAX_FIELD_CHARS, budget)]
        kept[key] = value
        budget -= len(value)
        if budget <= 0:
            break
    return kept or None
