"""Transcript reads: turn-aligned pages, the snapshot tool-call projection, @chat context.

Owns paging policy over PartRepository's indexed queries (never a full scan) and the rendering
of a referenced chat (docs/protocol.md §6.4, §6.6, §7.2). Pure functions over one ReadUnit:
no writes, no live-event filtering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from c2.core.errors import TranscriptCursorError
from c2.core.outcomes import TranscriptPage
from c2.core.protocol.state import (
    Part,
    PlanPart,
    PromptPart,
    TextPart,
    ToolCallPart,
    TranscriptEntry,
)
from c2.core.store.database import ReadUnit

DEFAULT_TURNS = 20
MAX_TURNS = 50
# Strict @chat budget in Unicode scalar values (str length in Python), protocol "Over the wire".
CHAT_CONTEXT_LIMIT = 16_000
CHAT_TITLE_LIMIT = 512
OMISSION_MARKER = "_(earlier messages omitted)_"
# Larger cursors cannot name a row and would overflow the driver's 64-bit integer binding.
_MAX_SEQ = 2**63 - 1
_TERMINAL_STATUSES = frozenset({"completed", "failed"})

Role = Literal["user", "agent"]


def clamp_turns(limit: int | None) -> int:
    """Turns per page: default 20, clamped to 1..50 (docs/api.md §4)."""
    if limit is None:
        return DEFAULT_TURNS
    return max(1, min(MAX_TURNS, limit))


def read_page(
    read: ReadUnit, session_id: str, before: int | None, limit: int | None, request_id: str | None
) -> TranscriptPage:
    """One page of complete user turns, older than `before`, from one consistent read."""
    turns = clamp_turns(limit)
    parts = read.parts
    top = parts.max_seq(session_id)
    # docs/api.md wins over the original here: a cursor must name a user row of this session,
    # so a cursor into an empty session is rejected too rather than silently ignored
    # (docs/protocol.md §6.4 step 2).
    if before is not None and not (
        0 <= before <= _MAX_SEQ and parts.role_of(session_id, before) == "user"
    ):
        raise TranscriptCursorError(
            f"invalid transcript cursor {before} for session {session_id}",
            session=session_id,
            request_id=request_id,
        )
    if top is None:
        return TranscriptPage(
            session=session_id,
            request_id=request_id,
            entries=[],
            next_before=None,
            snapshot_through=None,
        )
    below = top + 1 if before is None else before
    # One row more than the page needs tells whether an older turn exists
    # (docs/protocol.md §6.4 step 5).
    users = parts.user_seqs_before(session_id, below, turns + 1)
    if len(users) > turns:
        start: int = users[turns - 1]
        next_before: int | None = start
    else:
        # The oldest page also carries an agent-only preamble before the first user row.
        low = parts.min_seq(session_id)
        start = top if low is None else low
        next_before = None
    entries = parts.range(session_id, start, below - 1)
    return TranscriptPage(
        session=session_id,
        request_id=request_id,
        entries=project_tool_calls(entries),
        next_before=next_before,
        snapshot_through=top,
    )


def _is_terminal(status: str) -> bool:
    return status.strip().lower() in _TERMINAL_STATUSES


def project_tool_calls(entries: Sequence[TranscriptEntry]) -> list[TranscriptEntry]:
    """Drop in-flight tool_call rows superseded by a later terminal row in the same turn."""
    # Snapshot-only projection (protocol "Over the wire", docs/protocol.md §6.6): walk
    # newest→oldest so the nearest earlier in-flight row fills missing metadata first.
    out = list(entries)
    dropped: set[int] = set()
    later_terminal: dict[str, int] = {}
    for index in range(len(out) - 1, -1, -1):
        entry = out[index]
        if entry.role == "user":
            later_terminal.clear()  # a user row is a turn boundary: no cross-turn merging
            continue
        part = entry.part
        if not isinstance(part, ToolCallPart):
            continue
        if _is_terminal(part.status):
            later_terminal[part.id] = index
            continue
        target = later_terminal.get(part.id)
        if target is None:
            continue  # no later terminal in this turn: in-flight state is still the truth
        out[target] = _carry_metadata(out[target], part)
        dropped.add(index)
    return [entry for index, entry in enumerate(out) if index not in dropped]


def _carry_metadata(entry: TranscriptEntry, prior: ToolCallPart) -> TranscriptEntry:
    # Status-only terminal updates must not erase what earlier updates reported (protocol).
    terminal = entry.part
    assert isinstance(terminal, ToolCallPart)
    update: dict[str, object] = {}
    if not terminal.title.strip() and prior.title.strip():
        update["title"] = prior.title
    if terminal.tool_kind is None and prior.tool_kind is not None:
        update["tool_kind"] = prior.tool_kind
    if terminal.agent_input is None and prior.agent_input is not None:
        update["agent_input"] = dict(prior.agent_input)
    for name in ("content", "locations"):  # what the client reviews: the latest report wins
        if getattr(terminal, name) is None and getattr(prior, name) is not None:
            update[name] = getattr(prior, name)
    if not update:
        return entry
    return entry.model_copy(update={"part": terminal.model_copy(update=update)})


# ---------------------------------------------------------------------------------------------
# @chat references (docs/protocol.md §7.2)


def _conversation_text(part: Part) -> str:
    if isinstance(part, TextPart | PromptPart):
        return part.text.strip()  # prompt rows contribute their canonical text, not display
    if isinstance(part, PlanPart):
        return "\n".join(f"- {item}" for item in part.entries)
    return ""  # reasoning and tool calls never travel into another chat


def render_transcript_context(
    title: str, transcript: Sequence[tuple[Role, Part]], earlier_omitted: bool
) -> str:
    """Markdown context of a chat within the 16,000-scalar budget; "" when it has no words."""
    turns: list[tuple[Role, str]] = []
    for role, part in transcript:
        text = _conversation_text(part)
        if not text:
            continue
        # Streamed chunks are separate rows; consecutive same-role items read as one block.
        if turns and turns[-1][0] == role:
            turns[-1] = (role, turns[-1][1] + "\n\n" + text)
        else:
            turns.append((role, text))
    if not turns:
        return ""
    body = [f"**{'User' if role == 'user' else 'Agent'}:**\n{text}" for role, text in turns]
    header = f"**Referenced chat** — {title[:CHAT_TITLE_LIMIT]}"

    def render(kept: Sequence[str], omitted: bool) -> str:
        marker = "\n\n" + OMISSION_MARKER if omitted else ""
        return header + marker + "".join("\n\n" + block for block in kept)

    complete = render(body, earlier_omitted)
    if len(complete) <= CHAT_CONTEXT_LIMIT:
        return complete
    # Keep whole newest blocks (marker forced on) and stop at the first that does not fit.
    used = len(render([], True))
    first_kept = len(body)
    for index in range(len(body) - 1, -1, -1):
        cost = 2 + len(body[index])
        if used + cost > CHAT_CONTEXT_LIMIT:
            break
        used += cost
        first_kept = index
    if first_kept < len(body):
        return render(body[first_kept:], True)
    # Not even the newest block fits: keep its speaker label and the tail of its text, since
    # the end of a conversation is where its conclusions live.
    newest = body[-1]
    label_end = newest.find("\n") + 1
    label, text = newest[:label_end], newest[label_end:]
    room = max(0, CHAT_CONTEXT_LIMIT - len(render([label], True)))
    tail = text[max(0, len(text) - (room - 1)) :] if room > 1 else ""
    return render([f"{label}…{tail}"], True)


def render_chat_context(read: ReadUnit, session_id: str, title: str) -> str | None:
    """@chat context of a session from its latest page in `read`; None when it has no words."""
    page = read_page(read, session_id, None, DEFAULT_TURNS, None)
    transcript = [(entry.role, entry.part) for entry in page.entries]
    context = render_transcript_context(title, transcript, page.next_before is not None)
    return context if context.strip() else None


def referenced_chat_context(read: ReadUnit, session_id: str) -> str | None:
    """@chat context for a session id (title from the session row); None if unknown or empty."""
    session = read.sessions.get(session_id)
    if session is None:
        return None
    return render_chat_context(read, session_id, session.title)
