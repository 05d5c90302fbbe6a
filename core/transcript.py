"""Transcript reads: turn-aligned pages, the snapshot tool-call projection, @chat context.

Owns paging policy over PartRepository's indexed queries (never a full scan) and the rendering
of a referenced chat (docs/protocol.md §6.4, §6.6, §7.2). Pure functions over one ReadUnit:
no writes, no live-event filtering. A client's page is bounded in bytes and merges streamed
chunks (issue 17); the @chat context reads whole turns row by row, as the original does.

Over 300 lines: the byte-bounded page, its chunk merging and the turn alignment it must keep
are one algorithm; the @chat rendering reads the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from c2.core.errors import TranscriptCursorError
from c2.core.outcomes import TranscriptPage
from c2.core.protocol.state import (
    PART_ADAPTER,
    Part,
    PlanPart,
    PromptPart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    TranscriptEntry,
)
from c2.core.store.database import ReadUnit
from c2.core.store.parts import Row

DEFAULT_TURNS = 20
MAX_TURNS = 50
# Strict @chat budget in Unicode scalar values (str length in Python), protocol "Over the wire".
CHAT_CONTEXT_LIMIT = 16_000
CHAT_TITLE_LIMIT = 512
OMISSION_MARKER = "_(earlier messages omitted)_"
# Larger cursors cannot name a row and would overflow the driver's 64-bit integer binding.
_MAX_SEQ = 2**63 - 1
_TERMINAL_STATUSES = frozenset({"completed", "failed"})
# A page's byte bound: its rows' part JSON (UTF-8) plus ENTRY_BYTES each for the entry's
# other members. Merging chunks only shrinks what is sent, so the body stays under it.
PAGE_BYTES = 1 << 20
ENTRY_BYTES = 64
# How the store writes a text or reasoning part (field order of TextPart / ReasoningPart).
_CHUNK_PREFIXES: tuple[tuple[str, type[TextPart | ReasoningPart]], ...] = (
    ('{"kind":"text","text":', TextPart),
    ('{"kind":"reasoning","text":', ReasoningPart),
)

Role = Literal["user", "agent"]


def clamp_turns(limit: int | None) -> int:
    """Turns per page: default 20, clamped to 1..50 (docs/api.md §4)."""
    if limit is None:
        return DEFAULT_TURNS
    return max(1, min(MAX_TURNS, limit))


@dataclass(frozen=True)
class _Span:
    """The rows of a page before any byte bound: start <= seq < below, newest row `top`."""

    top: int
    start: int
    below: int
    next_before: int | None


def _span(
    read: ReadUnit, session_id: str, before: int | None, limit: int | None, request_id: str | None
) -> _Span | None:
    """The `limit` complete user turns older than `before` (None: an empty session)."""
    turns = clamp_turns(limit)
    parts = read.parts
    top = parts.max_seq(session_id)
    # docs/api.md wins over the original here: a cursor must name a row of this session, so a
    # cursor into an empty session is rejected too rather than silently ignored
    # (docs/protocol.md §6.4 step 2).
    # A user row, or the row a byte-bounded page stopped at inside a turn (read_page).
    if before is not None and not (
        0 <= before <= _MAX_SEQ and parts.role_of(session_id, before) is not None
    ):
        raise TranscriptCursorError(
            f"invalid transcript cursor {before} for session {session_id}",
            session=session_id,
            request_id=request_id,
        )
    if top is None:
        return None
    below = top + 1 if before is None else before
    # One row more than the page needs tells whether an older turn exists
    # (docs/protocol.md §6.4 step 5).
    users = parts.user_seqs_before(session_id, below, turns + 1)
    if len(users) > turns:
        return _Span(top, users[turns - 1], below, users[turns - 1])
    # The oldest page also carries an agent-only preamble before the first user row.
    low = parts.min_seq(session_id)
    return _Span(top, top if low is None else low, below, None)


def _empty(session_id: str, request_id: str | None) -> TranscriptPage:
    return TranscriptPage(
        session=session_id,
        request_id=request_id,
        entries=[],
        next_before=None,
        snapshot_through=None,
    )


def read_page(
    read: ReadUnit, session_id: str, before: int | None, limit: int | None, request_id: str | None
) -> TranscriptPage:
    """One page of complete user turns older than `before`, from one consistent read, as
    clients get it: at most PAGE_BYTES, streamed chunks of one message merged into one entry.

    A page holds the newest rows of its turns that fit PAGE_BYTES (the newest row always
    does); when older rows of them did not fit, `next_before` is the oldest row it holds,
    which may sit inside a turn: the next page continues that turn exactly there."""
    span = _span(read, session_id, before, limit, request_id)
    if span is None:
        return _empty(session_id, request_id)
    rows, cut = read.parts.newest_rows(session_id, span.start, span.below, PAGE_BYTES, ENTRY_BYTES)
    return TranscriptPage(
        session=session_id,
        request_id=request_id,
        entries=project_tool_calls(merge_chunks(rows)),
        next_before=rows[0][0] if cut else span.next_before,
        snapshot_through=span.top,
    )


def read_context_page(read: ReadUnit, session_id: str, before: int | None) -> TranscriptPage:
    """The latest DEFAULT_TURNS complete user turns older than `before`, one entry per row
    and no byte bound: what an @chat reference and a fork's primer render, whose own budget
    is 16,000 scalars and whose streamed chunks stay separate paragraphs (§7.2)."""
    span = _span(read, session_id, before, DEFAULT_TURNS, None)
    if span is None:
        return _empty(session_id, None)
    return TranscriptPage(
        session=session_id,
        request_id=None,
        entries=project_tool_calls(read.parts.range(session_id, span.start, span.below - 1)),
        next_before=span.next_before,
        snapshot_through=span.top,
    )


def merge_chunks(rows: Sequence[Row]) -> list[TranscriptEntry]:
    """Entries of stored rows (ascending), each run of consecutive agent text chunks (or
    thought chunks) merged into one entry carrying its seq range: what the live stream shows
    as one growing message, a page shows as one part, not one per chunk. Every seq from an
    entry's `seq` to its `last_seq` is one of its rows."""
    entries: list[TranscriptEntry] = []
    run: list[str] = []
    run_kind: type[TextPart | ReasoningPart] | None = None
    first = last = 0
    for seq, role, raw in rows:
        part: Part | None = None
        chunk = _chunk(raw) if role == "agent" else None
        if chunk is None:
            part = PART_ADAPTER.validate_json(raw)
            if role == "agent" and isinstance(part, TextPart | ReasoningPart):
                chunk = type(part), part.text  # a chunk stored some other way (older rows)
        # A gap (a seq burned by a failed write) ends a run too: every seq of an entry's
        # range is one of its rows.
        if chunk is not None and chunk[0] is run_kind and seq == last + 1:
            run.append(chunk[1])
            last = seq
            continue
        if run_kind is not None:
            merged = run_kind(text="".join(run))
            entries.append(TranscriptEntry(seq=first, last_seq=last, role="agent", part=merged))
            run.clear()
            run_kind = None
        if chunk is not None:
            run_kind, first, last = chunk[0], seq, seq
            run.append(chunk[1])
        elif part is not None:
            entries.append(TranscriptEntry(seq=seq, last_seq=seq, role=role, part=part))
    if run_kind is not None:
        merged = run_kind(text="".join(run))
        entries.append(TranscriptEntry(seq=first, last_seq=last, role="agent", part=merged))
    return entries


def _chunk(raw: str) -> tuple[type[TextPart | ReasoningPart], str] | None:
    """(kind, text) of a chunk as the store writes it (`{"kind":"text","text":"…"}`, compact),
    decoding only its string; None for anything else (the validator reads that)."""
    for prefix, kind in _CHUNK_PREFIXES:
        if raw.startswith(prefix) and raw.endswith("}"):
            try:
                text = json.loads(raw[len(prefix) : -1])  # the string literal, nothing more
            except ValueError:
                return None
            return (kind, text) if isinstance(text, str) else None
    return None


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
    page = read_context_page(read, session_id, None)
    transcript = [(entry.role, entry.part) for entry in page.entries]
    context = render_transcript_context(title, transcript, page.next_before is not None)
    return context if context.strip() else None


def referenced_chat_context(read: ReadUnit, session_id: str) -> str | None:
    """@chat context for a session id (title from the session row); None if unknown or empty."""
    session = read.sessions.get(session_id)
    if session is None:
        return None
    return render_chat_context(read, session_id, session.title)
