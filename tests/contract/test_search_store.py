"""The search index on every backend: the migration indexes existing transcripts, and the
index commits or rolls back with the rows it indexes (core/store/search.py).

Always on SQLite; also on PostgreSQL when C2_TEST_DATABASE_URL is set.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

from c2.core.protocol.chunks import ChunkRun, json_string
from c2.core.protocol.state import PromptPart, TextPart
from c2.core.search.query import parse
from c2.core.search.service import _search
from c2.core.session import SessionRecord, utcnow
from c2.core.store.database import MIGRATIONS, Store, UnitOfWork
from c2.core.transcript import read_page
from tests.contract.pg import STORES, database_url_for


def _append_text(session: str, text: str, uow: UnitOfWork) -> None:
    uow.parts.append(session, "agent", TextPart(text=text))


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url_for(request.param, tmp_path, "c2_search") as url:
        yield url


def _hits(store: Store, q: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = store.read_sync(lambda r: _search(r, parse(q), None, 0, 20))[
        "hits"
    ]
    return found


def test_the_migration_indexes_existing_transcripts(database_url: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(database_url)
    now = utcnow()
    rows = [
        ("user", {"kind": "prompt", "text": "Explain the 東京都 tokenizer", "display": "x"}),
        ("agent", {"kind": "reasoning", "text": "thinking about it"}),
        ("agent", {"kind": "tool_call", "id": "t", "title": "Read tokens.py", "status": "pending"}),
        ("agent", {"kind": "tool_call", "id": "t", "title": "", "status": "completed"}),
        ("agent", {"kind": "text", "text": "The toke"}),
        ("agent", {"kind": "text", "text": "nizer splits words"}),
    ]
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0006_usage")
            conn.execute(
                text(
                    "INSERT INTO sessions (id, provider, title, title_origin, cwd,"
                    " permission_mode, sandbox_policy, worktree_discarded, archived,"
                    " created_at, updated_at) VALUES ('old', 'p', 'Tokenizer questions',"
                    " 'manual', '/', 'default', 'workspace-write', false, false, :n, :n)"
                ),
                {"n": now},
            )
            for seq, (role, part) in enumerate(rows):
                conn.execute(
                    text("INSERT INTO parts VALUES ('old', :s, :r, :p)"),
                    {"s": seq, "r": role, "p": json.dumps(part)},
                )
    finally:
        engine.dispose()
    store = Store(database_url)
    try:
        store.migrate()
        # The message's two chunks are one document: the split word is whole.
        assert {(h["kind"], h["transcript_seq"]) for h in _hits(store, "tokenizer")} == {
            ("title", None),
            ("text", 4),
            ("prompt", 0),
        }
        assert [(h["kind"], h["transcript_seq"]) for h in _hits(store, "tokens")] == [
            ("tool_call", 3)
        ]
        assert [h["kind"] for h in _hits(store, "thinking")] == ["thought"]
        assert [h["kind"] for h in _hits(store, "京都")] == ["prompt"]
    finally:
        store.close()


def test_the_index_rolls_back_with_its_rows(database_url: str) -> None:
    store = Store(database_url)
    store.migrate()

    async def scenario() -> None:
        store.start()
        try:
            record = SessionRecord(id="s", provider="p", cwd="/", title="t")
            await store.write(lambda uow: uow.sessions.insert(record))

            def failing(uow: UnitOfWork) -> None:
                uow.parts.append("s", "user", PromptPart(text="vanishing words", display=""))
                raise RuntimeError("the write fails after the row")

            def kept(uow: UnitOfWork) -> None:
                uow.parts.append("s", "user", PromptPart(text="kept words", display=""))
                uow.parts.append("s", "agent", TextPart(text="streamed "))
                uow.parts.append("s", "agent", TextPart(text="answer"))

            results = await asyncio.gather(
                store.submit(failing), store.submit(kept), return_exceptions=True
            )
            assert isinstance(results[0], RuntimeError) and results[1] is None
        finally:
            store.close()

    asyncio.run(scenario())
    store = Store(database_url)
    try:
        assert _hits(store, "vanishing") == []
        assert [h["kind"] for h in _hits(store, "kept")] == ["prompt"]
        # Still streaming (no turn end): found through the open message, whole.
        assert [h["kind"] for h in _hits(store, '"streamed answer"')] == ["text"]
    finally:
        store.close()


def _append_run(session: str, texts: list[str], uow: UnitOfWork) -> None:
    run = ChunkRun("text", session, "m")
    for text_ in texts:
        run.add(text_, json_string(text_))
    uow.append_run(run)


@pytest.mark.parametrize("per_write", [1, 7], ids=["row by row", "in runs"])
def test_a_long_message_becomes_documents_as_it_grows(database_url: str, per_write: int) -> None:
    """Past DOC_CHARS a streamed message is indexed while it streams (bounded memory); every
    part stays findable, before and after the turn ends. A message streamed in runs of chunks
    (as agents' are) is indexed exactly as one written row by row."""
    store = Store(database_url)
    store.migrate()
    chunk = "filler " * 140 + "\n"  # 981 characters

    async def scenario() -> None:
        store.start()
        try:
            record = SessionRecord(id="long", provider="p", cwd="/", title="t")
            await store.write(lambda uow: uow.sessions.insert(record))
            texts = [  # about 78,000 characters: three documents
                ("early " if i == 1 else "") + ("late " if i == 78 else "") + chunk
                for i in range(80)
            ]
            for at in range(0, len(texts), per_write):
                if per_write == 1:
                    store.submit(partial(_append_text, "long", texts[at]))
                else:
                    store.submit(partial(_append_run, "long", texts[at : at + per_write]))
            await store.write(lambda uow: None)
            assert [h["kind"] for h in _hits(store, "early")] == ["text"]
            assert [h["kind"] for h in _hits(store, "late")] == ["text"]  # still streaming
            await store.write(lambda uow: uow.search.turn_ended("long"))
        finally:
            store.close()

    asyncio.run(scenario())
    store = Store(database_url)
    try:
        early, late = _hits(store, "early"), _hits(store, "late")
        assert [h["transcript_seq"] for h in early] == [0]
        assert len(late) == 1 and late[0]["transcript_seq"] > 0
        docs = store.read_sync(
            lambda r: r.conn.execute(
                text("SELECT count(*) FROM search_docs WHERE kind = 'text'")
            ).scalar()
        )
        assert docs == 3
    finally:
        store.close()


def test_a_hit_deep_in_a_long_turn_names_a_page_that_holds_it(database_url: str) -> None:
    """A turn larger than a page's byte bound: a hit's `before` names a page that holds the
    hit's row (a cursor inside the turn), and one in the small turn after it the next user
    row, as ever."""
    store = Store(database_url)
    store.migrate()
    chunk = "filler " * 1_400 + "\n"  # 9,801 characters: a page holds about a hundred

    def write(uow: UnitOfWork) -> None:
        uow.sessions.insert(SessionRecord(id="big", provider="p", cwd="/", title="t"))
        uow.parts.append("big", "user", PromptPart(text="start", display=""))
        for i in range(300):
            marker = "needle " if i == 40 else ""
            uow.parts.append("big", "agent", TextPart(text=marker + chunk))
        uow.search.turn_ended("big")
        uow.parts.append("big", "user", PromptPart(text="haystack", display=""))

    try:
        store.write_sync(write)
        (deep,) = _hits(store, "needle")
        assert deep["transcript_seq"] is not None and deep["before"] != 302
        (late,) = _hits(store, "haystack")
        assert late["before"] is None
        page = store.read_sync(lambda r: read_page(r, "big", deep["before"], None, None))
        held = {n for e in page.entries for n in range(e.seq, e.last_seq + 1)}
        assert deep["transcript_seq"] in held
    finally:
        store.close()
