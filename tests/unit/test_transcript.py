"""Transcript pages, the snapshot tool-call projection and @chat rendering (real SQLite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event

from c2.core.errors import TranscriptCursorError
from c2.core.outcomes import TranscriptPage
from c2.core.protocol.state import (
    Part,
    PlanPart,
    PromptPart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    TranscriptEntry,
)
from c2.core.session import SessionRecord
from c2.core.store.database import ReadUnit, Store, UnitOfWork, sqlite_url
from c2.core.transcript import (
    OMISSION_MARKER,
    PAGE_BYTES,
    Role,
    merge_chunks,
    project_tool_calls,
    read_page,
    referenced_chat_context,
    render_chat_context,
    render_transcript_context,
)

S = "session-a"
OTHER = "session-b"
Row = tuple[Role, Part]


def add(store: Store, session: str, rows: list[Row]) -> list[int]:
    def write(uow: UnitOfWork) -> list[int]:
        return [uow.parts.append(session, role, part) for role, part in rows]

    return store.write_sync(write)


def prompt(text: str) -> Row:
    return ("user", PromptPart(text=text, display=text))


def agent(text: str) -> Row:
    return ("agent", TextPart(text=text))


def tool(call_id: str, status: str, title: str = "", **extra: Any) -> Row:
    return ("agent", ToolCallPart(id=call_id, title=title, status=status, **extra))


def page(
    store: Store, session: str = S, before: int | None = None, limit: int | None = None
) -> TranscriptPage:
    return store.read_sync(lambda r: read_page(r, session, before, limit, "req-1"))


def seqs(p: TranscriptPage) -> list[int]:
    return [e.seq for e in p.entries]


def turns(store: Store, count: int, session: str = S) -> None:
    rows: list[Row] = []
    for n in range(count):
        rows += [prompt(f"user {n}"), agent(f"agent {n}")]
    add(store, session, rows)


# ---------------------------------------------------------------------------------------------
# Paging


def test_transcript_pages_stitch_fifty_five_turns_as_twenty_twenty_fifteen(store: Store) -> None:
    """55 two-row turns page as 20/20/15 turns whose seqs stitch into 0..109 exactly."""
    turns(store, 55)
    first = page(store)
    assert seqs(first) == list(range(70, 110))
    assert first.next_before == 70 and first.snapshot_through == 109
    assert next(e.seq for e in first.entries if e.role == "user") == 70
    second = page(store, before=first.next_before)
    assert seqs(second) == list(range(30, 70))
    assert second.next_before == 30 and second.snapshot_through == 109
    third = page(store, before=second.next_before)
    assert seqs(third) == list(range(0, 30))
    assert third.next_before is None and third.snapshot_through == 109
    assert seqs(third) + seqs(second) + seqs(first) == list(range(110))
    assert first.request_id == "req-1" and first.session == S


def test_transcript_page_turn_numbers_match_the_reference(store: Store) -> None:
    """Pages hold user turns 35–54, 15–34 and 0–14 (the reference's turn numbering)."""
    turns(store, 55)
    first = page(store)
    users = [e.part.text for e in first.entries if e.role == "user"]  # type: ignore[union-attr]
    assert users[0] == "user 35" and users[-1] == "user 54" and len(first.entries) == 40
    third = page(store, before=page(store, before=first.next_before).next_before)
    users = [e.part.text for e in third.entries if e.role == "user"]  # type: ignore[union-attr]
    assert users == [f"user {n}" for n in range(15)]


@pytest.mark.parametrize(
    ("label", "before"),
    [
        ("other session's user", 200),
        ("missing", 999),
        ("negative", -2),
        ("beyond int64", 2**64),
    ],
)
def test_transcript_cursor_must_be_a_row_of_the_session(
    store: Store, label: str, before: int
) -> None:
    """Another session's seq or a missing seq is an invalid cursor."""
    turns(store, 3)
    add(store, OTHER, [agent(f"pad {n}") for n in range(200)] + [prompt("other user")])
    with pytest.raises(TranscriptCursorError) as caught:
        page(store, before=before)
    assert caught.value.message == f"invalid transcript cursor {before} for session {S}"
    assert caught.value.session == S and caught.value.request_id == "req-1"


def test_transcript_cursor_on_an_empty_session_is_rejected(store: Store) -> None:
    """A cursor into a session without rows names no user row, so it is rejected
    (docs/api.md §4)."""
    with pytest.raises(TranscriptCursorError):
        page(store, before=0)


def test_transcript_limit_is_clamped_between_one_and_fifty_turns(store: Store) -> None:
    """limit 0 gives one turn; a huge limit gives fifty turns and a cursor to the rest."""
    turns(store, 55)
    one = page(store, limit=0)
    assert seqs(one) == [108, 109] and one.next_before == 108
    negative = page(store, limit=-5)
    assert seqs(negative) == [108, 109]
    many = page(store, limit=1000)
    assert [e.seq for e in many.entries if e.role == "user"] == list(range(10, 110, 2))
    assert many.next_before == 10
    assert seqs(page(store, limit=None))[0] == 70


def test_transcript_oldest_page_includes_legacy_agent_preamble(store: Store) -> None:
    """Agent rows before the first user row (legacy text user row) belong to the oldest page."""
    add(store, S, [agent("preamble"), ("user", TextPart(text="legacy user")), agent("reply")])
    p = page(store)
    assert seqs(p) == [0, 1, 2] and p.next_before is None and p.snapshot_through == 2
    assert p.entries[1].part == TextPart(text="legacy user")


def test_transcript_agent_only_history_is_one_page(store: Store) -> None:
    """A transcript without user rows is one page, whatever the limit."""
    add(store, S, [agent("a"), ("agent", PlanPart(entries=["x"])), agent("c")])
    p = page(store, limit=1)
    assert seqs(p) == [0, 1, 2] and p.next_before is None and p.snapshot_through == 2


def test_transcript_empty_session_gives_an_empty_page(store: Store) -> None:
    """An existing session without rows: no entries, both cursors null."""
    p = page(store)
    assert p.entries == [] and p.next_before is None and p.snapshot_through is None
    assert p.wire() == {
        "kind": "transcript",
        "session": S,
        "request_id": "req-1",
        "entries": [],
        "next_before": None,
        "snapshot_through": None,
    }


def test_transcript_page_is_not_mixed_with_other_sessions(store: Store) -> None:
    """Rows of another session never appear in a page."""
    turns(store, 2)
    turns(store, 2, session=OTHER)
    assert [e.part for e in page(store).entries] == [
        e.part for e in page(store, session=OTHER).entries
    ]
    assert seqs(page(store)) == [0, 1, 2, 3]


def test_transcript_snapshot_keeps_later_appends_out_of_a_page(store: Store) -> None:
    """A row appended after a read is absent from that page and present, newer, in the next."""
    turns(store, 21)
    before = page(store)
    assert before.snapshot_through == 41
    add(store, S, [("agent", PlanPart(entries=["late"]))])
    older = page(store, before=before.next_before)
    assert seqs(older) == [0, 1] and older.snapshot_through == 42
    after = page(store)
    assert before.snapshot_through < after.snapshot_through == 42  # type: ignore[operator]
    assert 42 not in seqs(before) and seqs(after)[-1] == 42


def test_transcript_page_reads_one_snapshot(store: Store) -> None:
    """A commit landing inside an open read transaction is invisible to that read's page."""

    def read(r: ReadUnit) -> TranscriptPage:
        assert r.parts.max_seq(S) == 3  # starts the read snapshot
        add(store, S, [prompt("concurrent"), agent("concurrent reply")])
        return read_page(r, S, None, None, None)

    turns(store, 2)
    p = store.read_sync(read)
    assert seqs(p) == [0, 1, 2, 3] and p.snapshot_through == 3
    assert page(store).snapshot_through == 5


def test_transcript_page_queries_are_index_ranges(tmp_path: Path, store: Store) -> None:
    """Every statement a page issues is an index SEARCH on parts, never a scan or a sort;
    those that find turn boundaries use the index of user rows only."""
    turns(store, 30)
    add(store, OTHER, [prompt("x"), agent("y")])
    engine = create_engine(sqlite_url(tmp_path))
    statements: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append((statement, params))

    event.listen(engine, "before_cursor_execute", capture)
    with engine.connect() as conn:
        read_page(ReadUnit(conn), S, None, 5, None)
        read_page(ReadUnit(conn), S, 20, 5, None)
        read_page(ReadUnit(conn), S, 4, 5, None)
        event.remove(engine, "before_cursor_execute", capture)
        assert len(statements) >= 10
        for statement, params in statements:
            plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
            details = [str(row[-1]) for row in plan]
            assert all(d.startswith("SEARCH") for d in details if "parts" in d), details
            assert not any("TEMP B-TREE" in d for d in details), details
            if "role = 'user'" in statement:  # turn boundaries: the prompts' partial index
                assert any("ix_parts_user" in d for d in details), details
        assert any("role = 'user'" in statement for statement, _ in statements)
    engine.dispose()


def thought(text: str) -> Row:
    return ("agent", ReasoningPart(text=text))


def test_transcript_page_merges_the_chunks_of_one_message(store: Store) -> None:
    """Consecutive text chunks (and thought chunks) are one entry with their seq range; a
    tool call, a thought or a user row between them starts another."""
    add(
        store,
        S,
        [
            prompt("go"),
            agent("Hel"),
            agent("lo"),
            agent(" there"),
            thought("hm"),
            thought("m"),
            agent("a"),
            tool("t1", "completed", "ls"),
            agent("b"),
            agent("c"),
            ("user", TextPart(text="legacy user")),
            agent("d"),
        ],
    )
    p = page(store)
    got = [(e.seq, e.last_seq, e.role, e.part) for e in p.entries]
    assert got == [
        (0, 0, "user", PromptPart(text="go", display="go")),
        (1, 3, "agent", TextPart(text="Hello there")),
        (4, 5, "agent", ReasoningPart(text="hmm")),
        (6, 6, "agent", TextPart(text="a")),
        (7, 7, "agent", ToolCallPart(id="t1", title="ls", status="completed")),
        (8, 9, "agent", TextPart(text="bc")),
        (10, 10, "user", TextPart(text="legacy user")),
        (11, 11, "agent", TextPart(text="d")),
    ]
    assert p.wire()["entries"][1] == {
        "seq": 1,
        "last_seq": 3,
        "role": "agent",
        "part": {"kind": "text", "text": "Hello there"},
    }
    assert p.snapshot_through == 11


def test_transcript_chunks_stored_in_another_json_form_merge_too() -> None:
    """Rows not in the store's compact form (older writers) are read by the validator and
    still merge; the fast path takes only an exact compact chunk."""
    rows = [
        (0, "agent", '{"kind": "text", "text": "spaced "}'),
        (1, "agent", '{"kind":"text","text":"compact \\u00e9 "}'),
        (2, "agent", '{"kind":"text","text":"extra","x":1}'),
        (3, "agent", '{"kind":"reasoning","text":"why"}'),
    ]
    got = [(e.seq, e.last_seq, e.part) for e in merge_chunks(rows)]
    assert got == [
        (0, 2, TextPart(text="spaced compact é extra")),
        (3, 3, ReasoningPart(text="why")),
    ]


def test_transcript_chunks_merge_only_across_consecutive_seqs() -> None:
    """A seq burned by a failed write ends a run: an entry's range holds only its rows."""
    rows = [(1, "agent", '{"kind":"text","text":"a"}'), (3, "agent", '{"kind":"text","text":"b"}')]
    assert [(e.seq, e.last_seq) for e in merge_chunks(rows)] == [(1, 1), (3, 3)]


def test_transcript_page_is_bounded_in_bytes_and_continues_inside_a_turn(store: Store) -> None:
    """A turn larger than PAGE_BYTES spans pages: each under the bound, each continuing
    exactly below the previous (`next_before` inside the turn), together every row once."""
    chunk = "word " * 2_000  # 10,000 characters a chunk, 3 MB in the turn
    add(store, S, [prompt("before"), agent("old reply")])
    add(store, S, [prompt("long")] + [agent(f"[{n}]{chunk}") for n in range(300)])
    covered: list[int] = []
    text = ""
    before: int | None = None
    pages = 0
    while True:
        p = page(store, before=before)
        pages += 1
        assert len(json.dumps(p.wire()).encode()) <= PAGE_BYTES + 200
        rows = [n for e in p.entries for n in range(e.seq, e.last_seq + 1)]
        covered = rows + covered
        text = "".join(e.part.text for e in p.entries if isinstance(e.part, TextPart)) + text
        if p.next_before is None:
            break
        assert p.next_before == p.entries[0].seq
        before = p.next_before
    assert covered == list(range(303)) and pages == 3
    assert text == "old reply" + "".join(f"[{n}]{chunk}" for n in range(300))


def test_transcript_cursor_may_name_an_agent_row(store: Store) -> None:
    """An agent row is a cursor (a byte-bounded page ends there): the page holds the rows
    below it, from its turn's user row, and older turns as the limit allows."""
    turns(store, 3)
    p = page(store, before=3, limit=1)
    assert seqs(p) == [2] and p.next_before == 2
    p = page(store, before=3, limit=2)
    assert seqs(p) == [0, 1, 2] and p.next_before is None


# ---------------------------------------------------------------------------------------------
# Tool-call projection


def entries(rows: list[Row]) -> list[TranscriptEntry]:
    return [
        TranscriptEntry(seq=i, last_seq=i, role=role, part=part)
        for i, (role, part) in enumerate(rows)
    ]


def test_transcript_projection_drops_only_superseded_updates(store: Store) -> None:
    """In-flight rows before a same-turn terminal go; their metadata moves into the terminal."""
    add(
        store,
        S,
        [
            prompt("go"),
            tool("t1", "pending", "Delegate researcher", tool_kind="agent"),
            tool("t1", "in_progress", "", agent_input={"role": "researcher"}),
            tool("t1", " Completed "),
            tool("t1", "in_progress", "reused id after terminal"),
            prompt("next"),
            tool("t1", "failed", "Next turn"),
        ],
    )
    p = page(store)
    assert seqs(p) == [0, 3, 4, 5, 6]
    terminal = p.entries[1].part
    assert terminal == ToolCallPart(
        id="t1",
        title="Delegate researcher",
        status=" Completed ",
        tool_kind="agent",
        agent_input={"role": "researcher"},
    )


def test_transcript_projection_keeps_in_flight_updates_without_a_terminal() -> None:
    """Histories without a terminal update keep every in-flight row."""
    rows = entries(
        [prompt("go"), tool("t1", "pending", "Run"), tool("t1", "in_progress"), agent("done")]
    )
    assert project_tool_calls(rows) == rows


def test_transcript_projection_never_merges_across_turns() -> None:
    """An in-flight row whose terminal is in a later user turn is kept untouched."""
    rows = entries(
        [
            prompt("a"),
            tool("t1", "in_progress", "Run", tool_kind="execute"),
            prompt("b"),
            tool("t1", "completed"),
        ]
    )
    assert project_tool_calls(rows) == rows


def test_transcript_projection_keeps_terminal_metadata_it_already_has() -> None:
    """A terminal row's own title, kind and agent_input are not overwritten by older rows."""
    rows = entries(
        [
            tool("t1", "pending", "Old", tool_kind="read", agent_input={"a": "1"}),
            tool("t2", "in_progress", "Other"),
            tool("t1", "FAILED", "New", tool_kind="edit", agent_input={"b": "2"}),
        ]
    )
    projected = project_tool_calls(rows)
    assert [e.seq for e in projected] == [1, 2]
    assert projected[1] == rows[2]


def test_transcript_projection_fills_from_the_nearest_earlier_update() -> None:
    """The nearest earlier in-flight row fills a blank terminal title first."""
    rows = entries(
        [
            tool("t1", "pending", "First"),
            tool("t1", "in_progress", "Second"),
            tool("t1", "completed", "  "),
        ]
    )
    projected = project_tool_calls(rows)
    assert [e.seq for e in projected] == [2]
    assert isinstance(projected[0].part, ToolCallPart) and projected[0].part.title == "Second"


# ---------------------------------------------------------------------------------------------
# @chat context


def test_transcript_chat_context_uses_only_the_recent_twenty_user_turns(store: Store) -> None:
    """25 turns: the context starts at turn 5, keeps turn 24, says it omitted, fits the budget."""
    rows: list[Row] = []
    for n in range(25):
        rows += [prompt(f"TURN_{n:03d}_USER_ONLY"), agent(f"TURN_{n:03d}_AGENT_ONLY")]
    add(store, S, rows)
    context = store.read_sync(lambda r: render_chat_context(r, S, "Research"))
    assert context is not None
    assert "TURN_004_USER_ONLY" not in context
    assert "TURN_005_USER_ONLY" in context and "TURN_024_AGENT_ONLY" in context
    assert context.startswith("**Referenced chat** — Research\n\n" + OMISSION_MARKER)
    assert len(context) <= 16_000


def test_transcript_chat_context_bounds_an_oversized_latest_turn(store: Store) -> None:
    """A 24,000-scalar latest turn keeps its tail within 16,000 scalars, with the marker."""
    add(store, S, [prompt("OLD_CONTEXT"), agent("old answer")])
    add(store, S, [prompt("latest"), agent("界" * 24_000 + "LATEST_CONTEXT_END")])
    context = store.read_sync(lambda r: render_chat_context(r, S, "Long chat"))
    assert context is not None
    assert len(context) <= 16_000
    assert OMISSION_MARKER in context and "OLD_CONTEXT" not in context
    assert context.endswith("LATEST_CONTEXT_END")
    assert "**Agent:**\n…界" in context


def test_transcript_chat_context_keeps_whole_newest_blocks_when_cut() -> None:
    """Over budget, whole newest blocks are kept greedily and the marker is forced on."""
    transcript: list[Row] = [prompt("A" * 9_000), agent("B" * 5_000), prompt("C" * 5_000)]
    context = render_transcript_context("t", transcript, False)
    assert context == (
        f"**Referenced chat** — t\n\n{OMISSION_MARKER}"
        f"\n\n**Agent:**\n{'B' * 5_000}\n\n**User:**\n{'C' * 5_000}"
    )


def test_transcript_chat_context_omits_reasoning_and_tools_but_keeps_plans() -> None:
    """Words and plans travel; reasoning and tool calls never do; same-role items merge."""
    transcript: list[Row] = [
        ("user", PromptPart(text="  ship the feature  ", display="ship")),
        ("agent", ReasoningPart(text="private chain")),
        tool("secret", "completed", "dangerous payload"),
        ("agent", TextPart(text="first chunk")),
        ("agent", PlanPart(entries=["verify", "release"])),
        ("agent", TextPart(text="   ")),
    ]
    context = render_transcript_context("Release", transcript, False)
    assert context == (
        "**Referenced chat** — Release\n\n**User:**\nship the feature"
        "\n\n**Agent:**\nfirst chunk\n\n- verify\n- release"
    )


def test_transcript_chat_context_truncates_the_title() -> None:
    """The header carries at most 512 scalars of the title."""
    context = render_transcript_context("題" * 600, [agent("x")], False)
    assert context.splitlines()[0] == "**Referenced chat** — " + "題" * 512


def test_transcript_chat_context_of_a_wordless_chat_is_none(store: Store) -> None:
    """A chat with only tool calls (or nothing) renders nothing, so the reference is unresolved."""
    assert store.read_sync(lambda r: render_chat_context(r, S, "Empty")) is None
    add(store, S, [tool("t", "completed", "ls")])
    assert store.read_sync(lambda r: render_chat_context(r, S, "Tools")) is None


def test_transcript_referenced_chat_uses_the_session_title(store: Store) -> None:
    """referenced_chat_context looks the title up in the same read; unknown sessions are None."""
    store.write_sync(
        lambda u: u.sessions.insert(SessionRecord(id=S, provider="codex", cwd="/", title="Plan"))
    )
    add(store, S, [prompt("hello")])
    context = store.read_sync(lambda r: referenced_chat_context(r, S))
    assert context == "**Referenced chat** — Plan\n\n**User:**\nhello"
    assert store.read_sync(lambda r: referenced_chat_context(r, "ghost")) is None
