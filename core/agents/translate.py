"""ACP JSON (as received) to domain values: session updates, permission asks, models, options.

Works on raw decoded JSON rather than SDK models so that fields the SDK schema drops (session
`models`) or coerces (`loadSession: "yes"`) are read exactly as docs/protocol.md §3.8, §8.4, §9.1
describe. Pure: no I/O; per-connection state lives in `UpdateTranslator`.

Over 300 lines: one small parser per ACP shape (updates, tool content, usage, models, modes,
options, auth methods, session info), all pure and read against docs/protocol.md §3.8.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from typing import Any

from c2.core.agents.agent_input import project_agent_input
from c2.core.agents.updates import (
    AcpSessionInfo,
    AgentUpdate,
    ConfigOptionsUpdate,
    ModeUpdate,
    PermissionAsk,
    PlanUpdate,
    TextChunk,
    ThoughtChunk,
    ToolCallUpdate,
    TurnUsage,
    UsageUpdate,
)
from c2.core.protocol.events import Cost
from c2.core.protocol.state import (
    AuthMethodInfo,
    ConfigChoice,
    ConfigOption,
    ModeChoice,
    ModelChoice,
    ModelsState,
    ModesState,
    ToolContent,
    ToolLocation,
)
from c2.core.protocol.values import StopReason

logger = logging.getLogger(__name__)

TOOL_MEMORY_LIMIT = 256
DEFAULT_PERMISSION_TITLE = "Tool call"
# Bounds on the tool-call content kept for review (per text field / per update / counts).
MAX_CONTENT_FIELD_CHARS = 16_384
MAX_CONTENT_CHARS = 65_536
MAX_CONTENT_ITEMS = 32
MAX_LOCATIONS = 64


class InvalidParamsError(ValueError):
    """An inbound request's params don't have the shape ACP requires."""


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _non_blank(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _text_of(content: object) -> str | None:
    if isinstance(content, dict) and content.get("type") == "text":
        return _str(content.get("text"))
    return None


class UpdateTranslator:
    """Translates `session/update` payloads; remembers tool titles/kinds and the message id."""

    def __init__(self) -> None:
        # toolCallId -> (last non-blank title, last kind, kind inferred from title/raw input);
        # bounded, least recently updated out.
        self._tools: OrderedDict[str, tuple[str | None, str | None, str | None]] = OrderedDict()
        self._message_id: str | None = None

    def start_message(self) -> None:
        """Forget the current message id: the next text chunk starts a new message."""
        self._message_id = None

    def remembered_title(self, tool_call_id: str) -> str | None:
        """The last non-blank title seen for a tool call id, if still remembered."""
        entry = self._tools.get(tool_call_id)
        return entry[0] if entry else None

    def remembered_kind(self, tool_call_id: str) -> str | None:
        """The kind a tool call's updates reported, else the one their title/input suggest."""
        entry = self._tools.get(tool_call_id)
        return (entry[1] or entry[2]) if entry else None

    def translate(self, update: object) -> AgentUpdate | None:
        """Domain form of one `update` object, or None when docs/protocol.md §3.8 drops it."""
        if not isinstance(update, dict):
            return None
        variant = update.get("sessionUpdate")
        if variant == "agent_message_chunk":
            return self._text_chunk(update)
        if variant == "agent_thought_chunk":
            return self._thought_chunk(update)
        if variant == "tool_call":
            return self._tool_call(update, is_update=False)
        if variant == "tool_call_update":
            return self._tool_call(update, is_update=True)
        if variant == "plan":
            return self._plan(update)
        if variant == "usage_update":
            return _usage(update)
        if variant == "config_option_update":
            return ConfigOptionsUpdate(options=parse_config_options(update.get("configOptions")))
        if variant == "current_mode_update":
            mode_id = _non_blank(update.get("currentModeId"))
            return ModeUpdate(mode_id=mode_id) if mode_id is not None else None
        return None  # user_message_chunk, available_commands_update, unknown variants

    def _thought_chunk(self, update: dict[str, Any]) -> ThoughtChunk | None:
        text = _text_of(update.get("content"))
        if not text:  # an empty chunk carries nothing to store or show
            return None
        self.start_message()
        return ThoughtChunk(text=text)

    def _plan(self, update: dict[str, Any]) -> PlanUpdate | None:
        entries = update.get("entries")
        if not isinstance(entries, list):
            return None
        self.start_message()
        return PlanUpdate(
            entries=[
                e["content"]
                for e in entries
                if isinstance(e, dict) and isinstance(e.get("content"), str)
            ]
        )

    def _text_chunk(self, update: dict[str, Any]) -> TextChunk | None:
        text = _text_of(update.get("content"))
        if not text:  # an empty chunk carries nothing to store or show
            return None
        acp_id = _non_blank(update.get("messageId"))
        if acp_id is not None:
            self._message_id = acp_id
        elif self._message_id is None:
            self._message_id = uuid.uuid4().hex
        return TextChunk(message_id=self._message_id, text=text)

    def _tool_call(self, update: dict[str, Any], *, is_update: bool) -> ToolCallUpdate | None:
        tool_id = _str(update.get("toolCallId"))
        if tool_id is None:
            return None
        self.start_message()
        title, kind = _non_blank(update.get("title")), _str(update.get("kind"))
        status = _str(update.get("status"))
        known_title, known_kind, known_guess = self._tools.pop(tool_id, (None, None, None))
        guess = infer_kind(title, update.get("rawInput")) or known_guess
        self._tools[tool_id] = (title or known_title, kind or known_kind, guess)
        while len(self._tools) > TOOL_MEMORY_LIMIT:
            self._tools.popitem(last=False)
        content = parse_tool_content(update.get("content"))
        locations = parse_locations(update.get("locations"))
        if is_update:
            return ToolCallUpdate(
                id=tool_id,
                title=title or known_title or "",
                status=status or "in_progress",
                kind=kind or known_kind,
                agent_input=None,
                content=content,
                locations=locations,
            )
        return ToolCallUpdate(
            id=tool_id,
            title=_str(update.get("title")) or "",
            status=status or "pending",
            kind=kind,
            agent_input=project_agent_input(update.get("rawInput"), kind=kind, title=title),
            content=content,
            locations=locations,
        )

    def permission_ask(self, params: object) -> PermissionAsk:
        """Domain form of `session/request_permission` params; raises InvalidParamsError."""
        if not isinstance(params, dict):
            raise InvalidParamsError("params must be an object")
        tool_call = params.get("toolCall")
        if not isinstance(tool_call, dict) or _str(tool_call.get("toolCallId")) is None:
            raise InvalidParamsError("toolCall.toolCallId is required")
        tool_id: str = tool_call["toolCallId"]
        raw_options = params.get("options")
        if not isinstance(raw_options, list):
            raise InvalidParamsError("options must be an array")
        options: list[tuple[str, str, str]] = []
        for option in raw_options:
            if not isinstance(option, dict):
                raise InvalidParamsError("each option must be an object")
            option_id, name = _str(option.get("optionId")), _str(option.get("name"))
            kind = _str(option.get("kind"))
            if option_id is None or name is None or kind is None:
                raise InvalidParamsError("each option needs optionId, name and kind")
            options.append((option_id, name, kind))
        title = (
            _non_blank(tool_call.get("title"))
            or self.remembered_title(tool_id)
            or DEFAULT_PERMISSION_TITLE
        )
        # Claude Code asks without a kind; its tool_call for the same id said it (issue 10).
        kind = (
            _str(tool_call.get("kind"))
            or self.remembered_kind(tool_id)
            or infer_kind(_non_blank(tool_call.get("title")), tool_call.get("rawInput"))
        )
        return PermissionAsk(tool_call_id=tool_id, title=title, kind=kind, options=options)


# Tool names and title verbs that say what a tool does, lower-cased (first word of a title).
_TITLE_KINDS: dict[str, str] = {
    **dict.fromkeys(("write", "edit", "multiedit", "notebookedit", "patch", "apply"), "edit"),
    **dict.fromkeys(("bash", "shell", "terminal", "run", "execute", "exec"), "execute"),
    **dict.fromkeys(("read", "view", "cat", "open"), "read"),
    **dict.fromkeys(("grep", "glob", "search", "find", "list", "ls"), "search"),
    **dict.fromkeys(("fetch", "webfetch", "websearch"), "fetch"),
    **dict.fromkeys(("delete", "remove", "rm"), "delete"),
    **dict.fromkeys(("move", "rename", "mv"), "move"),
}
_EDIT_INPUT_KEYS = ("content", "old_string", "new_string", "oldString", "newString", "edits")
_PATH_INPUT_KEYS = ("file_path", "filePath", "path", "notebook_path")


def infer_kind(title: str | None, raw_input: object) -> str | None:
    """An ACP tool kind suggested by a tool call's raw input, else its title; None if neither
    says. Only for permission requests that carry no kind of their own."""
    if isinstance(raw_input, dict):
        if isinstance(raw_input.get("command"), str):
            return "execute"
        if any(key in raw_input for key in _EDIT_INPUT_KEYS):
            return "edit"
        if any(isinstance(raw_input.get(key), str) for key in _PATH_INPUT_KEYS):
            return "read"
        if isinstance(raw_input.get("pattern"), str) or isinstance(raw_input.get("query"), str):
            return "search"
        if isinstance(raw_input.get("url"), str):
            return "fetch"
    if title is None:
        return None
    if title.startswith("`"):
        return "execute"  # Claude Code titles a shell command as the command in backticks
    first = title.split(maxsplit=1)[0].lower().strip(":")
    return _TITLE_KINDS.get(first)


def parse_tool_content(raw: object) -> list[ToolContent] | None:
    """A tool call's reviewable content (text, diffs, terminals), size-bounded; None when the
    update does not report any. Non-text content blocks (images…) are not kept."""
    if not isinstance(raw, list):
        return None
    items: list[ToolContent] = []
    budget = MAX_CONTENT_CHARS
    for item in raw[:MAX_CONTENT_ITEMS]:
        if not isinstance(item, dict):
            continue
        variant = item.get("type")
        if variant == "content":
            text = _text_of(item.get("content"))
            if text is None:
                continue
            kept, cut, budget = _bounded(text, budget)
            items.append(ToolContent(type="text", text=kept, truncated=cut or None))
        elif variant == "diff":
            path, new = _str(item.get("path")), _str(item.get("newText"))
            if path is None or new is None:
                continue
            new_kept, new_cut, budget = _bounded(new, budget)
            old, old_cut = _str(item.get("oldText")), False
            if old is not None:
                old, old_cut, budget = _bounded(old, budget)
            items.append(
                ToolContent(
                    type="diff",
                    path=path,
                    old_text=old,
                    new_text=new_kept,
                    truncated=(new_cut or old_cut) or None,
                )
            )
        elif variant == "terminal" and _non_blank(item.get("terminalId")):
            items.append(ToolContent(type="terminal", terminal_id=item["terminalId"]))
    return items


def _bounded(text: str, budget: int) -> tuple[str, bool, int]:
    """`text` cut to the field limit and the remaining budget; (kept, cut?, budget left)."""
    limit = max(0, min(MAX_CONTENT_FIELD_CHARS, budget))
    if len(text) <= limit:
        return text, False, budget - len(text)
    return text[:limit], True, budget - limit


def parse_locations(raw: object) -> list[ToolLocation] | None:
    """A tool call's `locations` ({path, line?}); None when the update does not report any."""
    if not isinstance(raw, list):
        return None
    return [
        ToolLocation(path=item["path"], line=_count(item.get("line")))
        for item in raw[:MAX_LOCATIONS]
        if isinstance(item, dict) and _non_blank(item.get("path"))
    ]


def parse_cost(raw: object) -> Cost | None:
    """A reported `cost` ({amount, currency}); None when absent or malformed."""
    if not isinstance(raw, dict):
        return None
    amount, currency = raw.get("amount"), _non_blank(raw.get("currency"))
    if isinstance(amount, bool) or not isinstance(amount, int | float) or currency is None:
        return None
    return Cost(amount=float(amount), currency=currency)


def parse_turn_usage(result: object) -> TurnUsage | None:
    """The `usage` of a `session/prompt` result, when the agent reports one."""
    usage = result.get("usage") if isinstance(result, dict) else None
    if not isinstance(usage, dict):
        return None
    counts = {key: _count(usage.get(key)) for key in ("inputTokens", "outputTokens")}
    inp, out = counts["inputTokens"], counts["outputTokens"]
    if inp is None or out is None:
        return None
    return TurnUsage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=_count(usage.get("totalTokens")),
        thought_tokens=_count(usage.get("thoughtTokens")),
        cached_read_tokens=_count(usage.get("cachedReadTokens")),
        cached_write_tokens=_count(usage.get("cachedWriteTokens")),
    )


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _usage(update: dict[str, Any]) -> UsageUpdate | None:
    used, size = _count(update.get("used")), _count(update.get("size"))
    if used is None or size is None:
        return None
    return UsageUpdate(used=used, size=size, cost=parse_cost(update.get("cost")))


def parse_config_options(raw: object) -> list[ConfigOption]:
    """Select-type options (a missing type counts as select), grouped choices flattened
    (docs/protocol.md §8.4)."""
    if not isinstance(raw, list):
        return []
    options: list[ConfigOption] = []
    for item in raw:
        if not isinstance(item, dict) or item.get("type", "select") != "select":
            continue
        option_id, name = _str(item.get("id")), _str(item.get("name"))
        if option_id is None or name is None:
            continue
        options.append(
            ConfigOption(
                id=option_id,
                name=name,
                category=_str(item.get("category")),
                current=_str(item.get("currentValue")) or "",
                choices=_flatten_choices(item.get("options")),
            )
        )
    return options


def _flatten_choices(raw: object) -> list[ConfigChoice]:
    choices: list[ConfigChoice] = []
    if not isinstance(raw, list):
        return choices
    for item in raw:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("options"), list) and "value" not in item:
            choices.extend(_flatten_choices(item["options"]))  # a {group, name, options} group
            continue
        value, name = _str(item.get("value")), _str(item.get("name"))
        if value is not None and name is not None:
            choices.append(
                ConfigChoice(id=value, name=name, description=_str(item.get("description")))
            )
    return choices


def parse_models(raw: object) -> ModelsState | None:
    """The session's `models` ({availableModels, currentModelId}), None if absent or empty."""
    if not isinstance(raw, dict) or not isinstance(raw.get("availableModels"), list):
        return None
    available = [
        ModelChoice(
            id=m["modelId"],
            name=_str(m.get("name")) or m["modelId"],
            description=_str(m.get("description")),
        )
        for m in raw["availableModels"]
        if isinstance(m, dict) and isinstance(m.get("modelId"), str)
    ]
    if not available:
        return None
    return ModelsState(available=available, current=_str(raw.get("currentModelId")) or "")


def parse_modes(raw: object) -> ModesState | None:
    """The session's `modes` ({availableModes, currentModeId}), None if absent or empty."""
    if not isinstance(raw, dict) or not isinstance(raw.get("availableModes"), list):
        return None
    available = [
        ModeChoice(
            id=m["id"], name=_str(m.get("name")) or m["id"], description=_str(m.get("description"))
        )
        for m in raw["availableModes"]
        if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]
    ]
    if not available:
        return None
    return ModesState(available=available, current=_str(raw.get("currentModeId")) or "")


def parse_auth_methods(raw: object) -> tuple[AuthMethodInfo, ...]:
    """`authMethods` of an initialize result: id, name and description of each."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        AuthMethodInfo(
            id=m["id"], name=_str(m.get("name")) or m["id"], description=_str(m.get("description"))
        )
        for m in raw
        if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]
    )


def parse_stop_reason(result: object) -> StopReason:
    """The `stopReason` of a `session/prompt` result; unknown values count as end_turn."""
    value = result.get("stopReason") if isinstance(result, dict) else None
    try:
        return StopReason(str(value))
    except ValueError:
        logger.warning("agent returned an unknown stop reason %r; treating it as end_turn", value)
        return StopReason.END_TURN


def session_info(session_id: str, result: object) -> AcpSessionInfo:
    """What a `session/new|load|resume` result reports: models, modes and config options."""
    body = result if isinstance(result, dict) else {}
    return AcpSessionInfo(
        acp_session_id=session_id,
        models=parse_models(body.get("models")),
        config_options=parse_config_options(body.get("configOptions")),
        modes=parse_modes(body.get("modes")),
    )
