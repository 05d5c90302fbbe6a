"""The search index: documents kept in the transaction that writes their transcript rows.

A document is what a hit names: a prompt row, one agent message or thought (its streamed
chunks joined, so a word split across two chunks is whole), a tool call (its title; the row
it points at is the call's latest row in its turn, which is the row the transcript page shows
after projection) or a session title. `search_docs` holds them on both stores; the words are
indexed by an FTS5 table (`search_fts`, contentless, rowid = doc id) on SQLite and by a
`tsvector` column with a GIN index on PostgreSQL. Tokens come from core/search/tokens.py.

Cost per streamed chunk is O(chunk): a message is indexed once, when it ends (the session's
next row that is not a chunk of the same kind, or the end of the turn), from its rows already
in `parts`. Until then `search_state` names the session's open message, and queries match it
in memory (core/search/service.py); at most one message per session is open, and only while
its turn runs (or until the session's next row, after a crash). Everything here runs in the
writer's transaction, after the batch's rows are inserted, so the index never drifts from
the transcript.

Over 300 lines: SQLite FTS5 and PostgreSQL statements side by side (each next to its twin),
the writer's open-message state, and the reads of the same tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, text

from c2.core.protocol.chunks import SEARCH_KIND
from c2.core.protocol.state import (
    PART_ADAPTER,
    Part,
    PromptPart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
)
from c2.core.search.tokens import tokenize
from c2.core.store.tables import USER_ROWS

# A message longer than this is indexed as several documents (cut between chunks), which
# bounds a document's tsvector (PostgreSQL positions stop at 16383) and a snippet's work.
DOC_CHARS = 32_000
TITLE_KEY = "title"
# Ranking reads each candidate's statistics: beyond this many matches only the newest rank.
RANK_WINDOW = 2000
_NO_ROW = 2**63 - 1  # above every transcript seq


@dataclass(frozen=True, slots=True)
class ChunkTexts:
    """Consecutive chunk rows of one message (a run: core/protocol/chunks.py), from the op's
    seq on: their document kind and texts, without a model per chunk."""

    kind: str  # "text" or "thought"
    texts: list[str]


# An index step, in transcript order: a row (seq, role, part), a run of chunk rows from seq
# on, or the end of a turn (None).
SearchOp = (
    tuple[str, int, str, Part] | tuple[str, int, str, ChunkTexts] | tuple[str, None, None, None]
)

_CHUNK_KINDS: dict[type[object], str] = {
    TextPart: SEARCH_KIND["text"],
    ReasoningPart: SEARCH_KIND["reasoning"],
}


@dataclass
class SearchState:
    """A session's index state: its open message and the seq of its latest prompt.

    The writer keeps these between batches (Store clears them when a batch fails), so a
    streamed chunk costs no query: `pending` holds the open message's rows since `pending[0]`
    (rows before it, after a restart or a failed batch, are read back from parts)."""

    open_kind: str | None
    open_seq: int | None
    turn_seq: int | None
    changed: bool = False
    pending: list[tuple[int, str]] = field(default_factory=list)
    size: int = 0  # characters in pending
    # The session's first row in the current batch (None: none): rows read back stop there.
    bound: int | None = None


_PG_INSERT = (
    "INSERT INTO search_docs (session_id, seq, kind, doc_key, body, tsv)"
    " VALUES (:s, :q, :k, :key, :b, CAST(:tsv AS tsvector))"
)


def session_token(session: str) -> str:
    """The FTS5 token naming a session (its id in hex: one token whatever the id holds), so
    a session filter is one more term of the full-text query."""
    return "s" + session.encode().hex()


def _tool_key(tool_id: str) -> str:
    return f"tool:{tool_id}"


class _Sql:
    """The index's statements on one connection. On SQLite they go to the driver cursor of the
    same transaction: SQLAlchemy's per-statement work costs more than SQLite's own and runs
    on the writer thread for every message (as for transcript rows, core/store/buffer.py)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.sqlite = conn.dialect.name == "sqlite"

    def run(self, sql: str, params: dict[str, Any]) -> tuple[list[Any], int | None]:
        """Rows (if any) and, on SQLite, the last inserted rowid."""
        if self.sqlite:
            cursor = self.conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(sql, params)
                return cursor.fetchall(), cursor.lastrowid
            finally:
                cursor.close()
        result = self.conn.execute(text(sql), params)
        return (list(result.all()) if result.returns_rows else []), None

    def many(self, sql: str, rows: list[dict[str, Any]]) -> None:
        if self.sqlite:
            cursor = self.conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.executemany(sql, rows)
            finally:
                cursor.close()
        else:
            self.conn.execute(text(sql), rows)


class DocWriter:
    """Inserts and replaces documents on one connection (both stores)."""

    def __init__(self, conn: Connection) -> None:
        self._sql = _Sql(conn)
        # PostgreSQL: unkeyed documents wait for one executemany (a round trip per batch,
        # not per message); `flush` sends them.
        self._deferred: list[dict[str, Any]] = []

    def flush(self) -> None:
        """Send the deferred inserts (PostgreSQL: one executemany)."""
        if self._deferred:
            self._sql.many(_PG_INSERT, self._deferred)
            self._deferred = []

    def insert(self, session: str, seq: int | None, kind: str, key: str | None, body: str) -> None:
        """Index one document (nothing when its body holds no term)."""
        tokens = tokenize(body)
        if not tokens.terms:
            return  # nothing a query could find
        values: dict[str, Any] = {"s": session, "q": seq, "k": kind, "key": key, "b": body}
        if self._sql.sqlite:
            _rows, doc_id = self._sql.run(
                "INSERT INTO search_docs (session_id, seq, kind, doc_key, body)"
                " VALUES (:s, :q, :k, :key, :b)",
                values,
            )
            self._sql.run(
                "INSERT INTO search_fts (rowid, terms, grams, sess) VALUES (:id, :t, :g, :s)",
                {
                    "id": doc_id,
                    "t": tokens.fts_terms(),
                    "g": tokens.fts_grams(),
                    "s": session_token(session),
                },
            )
        elif key is None:
            self._deferred.append(values | {"tsv": tokens.tsvector()})
        else:
            self._sql.run(_PG_INSERT, values | {"tsv": tokens.tsvector()})

    def delete(self, doc_id: int, session: str, body: str) -> None:
        """Remove a document from the index."""
        if self._sql.sqlite:
            # A contentless FTS5 row is removed by restating what it indexed.
            tokens = tokenize(body)
            self._sql.run(
                "INSERT INTO search_fts (search_fts, rowid, terms, grams, sess)"
                " VALUES ('delete', :id, :t, :g, :s)",
                {
                    "id": doc_id,
                    "t": tokens.fts_terms(),
                    "g": tokens.fts_grams(),
                    "s": session_token(session),
                },
            )
        self._sql.run("DELETE FROM search_docs WHERE id = :id", {"id": doc_id})

    def keyed(self, session: str, key: str) -> tuple[int, int | None, str] | None:
        """The newest document of `session` under `key`: (id, seq, body)."""
        rows, _ = self._sql.run(
            "SELECT id, seq, body FROM search_docs WHERE session_id = :s AND doc_key = :key"
            " ORDER BY id DESC LIMIT 1",
            {"s": session, "key": key},
        )
        return None if not rows else (int(rows[0][0]), rows[0][1], str(rows[0][2]))

    def move(self, doc_id: int, seq: int) -> None:
        """Point a document at another transcript row."""
        self._sql.run("UPDATE search_docs SET seq = :q WHERE id = :id", {"q": seq, "id": doc_id})

    def set_title(self, session: str, title: str) -> None:
        """Replace the session's title document."""
        old = self.keyed(session, TITLE_KEY)
        if old is not None:
            if old[2] == title:
                return
            self.delete(old[0], session, old[2])
        self.insert(session, None, "title", TITLE_KEY, title)


class SearchWriter:
    """The index side of one unit of work: steps queue on the batch (applied after its rows
    are inserted, before COMMIT) or, outside a batch, apply at once."""

    def __init__(self, conn: Connection, queued: list[SearchOp] | None = None) -> None:
        self._conn = conn
        self._queued = queued

    def row(self, session: str, seq: int, role: str, part: Part) -> None:
        """Index a new transcript row (text parts join their message's document)."""
        self._step((session, seq, role, part))

    def chunks(self, session: str, first: int, kind: str, texts: list[str]) -> None:
        """Index a run of streamed chunk rows from seq `first` on (they join one message)."""
        self._step((session, first, "agent", ChunkTexts(kind, texts)))

    def turn_ended(self, session: str) -> None:
        """The session's open message is complete (its turn ended)."""
        self._step((session, None, None, None))

    def title(self, session: str, title: str) -> None:
        """Replace the session's title document."""
        DocWriter(self._conn).set_title(session, title)

    def _step(self, op: SearchOp) -> None:
        if self._queued is not None:
            self._queued.append(op)
        else:
            index_ops(self._conn, [op])


def _load_states(
    conn: Connection, sessions: Iterable[str], cache: dict[str, SearchState] | None
) -> dict[str, SearchState]:
    wanted = set(sessions)
    states = {name: cache[name] for name in wanted if cache is not None and name in cache}
    names = sorted(wanted - states.keys())
    if not names:
        return states
    marks = ", ".join(f":i{i}" for i in range(len(names)))
    rows, _ = _Sql(conn).run(
        "SELECT session_id, open_kind, open_seq, turn_seq FROM search_state"
        f" WHERE session_id IN ({marks})",
        {f"i{i}": name for i, name in enumerate(names)},
    )
    loaded = {name: SearchState(None, None, None) for name in names}
    for row in rows:
        loaded[row[0]] = SearchState(row[1], row[2], row[3])
    if cache is not None:
        cache.update(loaded)
    return states | loaded


def _save_states(conn: Connection, states: dict[str, SearchState]) -> None:
    changed = [
        {"s": name, "k": st.open_kind, "o": st.open_seq, "t": st.turn_seq}
        for name, st in states.items()
        if st.changed
    ]
    for st in states.values():
        st.changed, st.bound = False, None
    if changed:
        _Sql(conn).many(
            "INSERT INTO search_state (session_id, open_kind, open_seq, turn_seq)"
            " VALUES (:s, :k, :o, :t) ON CONFLICT (session_id) DO UPDATE SET"
            " open_kind = excluded.open_kind, open_seq = excluded.open_seq,"
            " turn_seq = excluded.turn_seq",
            changed,
        )


def chunk_texts(
    conn: Connection, session: str, first: int, end: int | None
) -> list[tuple[int, str]]:
    """(seq, text) of the chunk rows of `session` with first <= seq < end (None: to the end)."""
    query = "SELECT seq, part_json FROM parts WHERE session_id = :s AND seq >= :a"
    params: dict[str, Any] = {"s": session, "a": first}
    if end is not None:
        query += " AND seq < :b"
        params["b"] = end
    rows, _ = _Sql(conn).run(query + " ORDER BY seq", params)
    return [(int(seq), str(json.loads(raw).get("text", ""))) for seq, raw in rows]


def _flush_message(conn: Connection, docs: DocWriter, session: str, st: SearchState) -> None:
    """Index the open message's rows so far as documents of up to DOC_CHARS characters."""
    assert st.open_kind is not None and st.open_seq is not None
    end = st.pending[0][0] if st.pending else st.bound
    rows = [] if end == st.open_seq else chunk_texts(conn, session, st.open_seq, end)
    rows.extend(st.pending)
    start: int | None = None
    texts: list[str] = []
    size = 0
    for seq, chunk in rows:
        if start is None:
            start = seq
        texts.append(chunk)
        size += len(chunk)
        if size >= DOC_CHARS:
            docs.insert(session, start, st.open_kind, None, "".join(texts))
            start, texts, size = None, [], 0
    if start is not None:
        docs.insert(session, start, st.open_kind, None, "".join(texts))
    st.pending, st.size, st.changed = [], 0, True


def _close(conn: Connection, docs: DocWriter, session: str, st: SearchState) -> None:
    """Index the session's open message (it ended) and forget it."""
    if st.open_kind is None or st.open_seq is None:
        return
    _flush_message(conn, docs, session, st)
    st.open_kind = st.open_seq = None


def _chunk(
    conn: Connection, docs: DocWriter, session: str, st: SearchState, kind: str, seq: int, text: str
) -> None:
    """A chunk row of `kind` joins the open message (or opens one)."""
    if st.open_kind != kind:
        _close(conn, docs, session, st)
        st.open_kind, st.open_seq, st.changed = kind, seq, True
    st.pending.append((seq, text))
    st.size += len(text)
    if st.size >= DOC_CHARS:
        # A long message becomes documents as it grows: memory and the in-memory match of
        # open messages stay bounded.
        _flush_message(conn, docs, session, st)
        st.open_kind = st.open_seq = None  # the next chunk opens the rest


def _tool_call(
    docs: DocWriter, session: str, seq: int, st: SearchState, part: ToolCallPart
) -> None:
    key = _tool_key(part.id)
    title = part.title.strip()
    old = docs.keyed(session, key)
    if old is not None and old[1] is not None and old[1] > (st.turn_seq or -1):
        # The same call in this turn: its latest row is the one a page shows.
        doc_id, _seq, body = old
        if title and title != body:
            docs.delete(doc_id, session, body)
            docs.insert(session, seq, "tool_call", key, title)
        else:
            docs.move(doc_id, seq)
        return
    docs.insert(session, seq, "tool_call", key, title)


def index_ops(
    conn: Connection, ops: list[SearchOp], cache: dict[str, SearchState] | None = None
) -> None:
    """Apply index steps in order; the rows they name are already in `parts`. `cache`: the
    writer's states from earlier batches (updated in place; cleared by the caller when the
    transaction fails)."""
    if not ops:
        return
    states = _load_states(conn, (op[0] for op in ops), cache)
    for session, seq, _role, _part in ops:
        st = states[session]
        if seq is not None and (st.bound is None or seq < st.bound):
            st.bound = seq
    docs = DocWriter(conn)
    for session, seq, role, part in ops:
        st = states[session]
        if seq is None:
            _close(conn, docs, session, st)
            continue
        if isinstance(part, ChunkTexts):
            for index, chunk in enumerate(part.texts, seq):
                _chunk(conn, docs, session, st, part.kind, index, chunk)
            continue
        kind = _CHUNK_KINDS.get(type(part))
        if kind is not None:
            assert isinstance(part, TextPart | ReasoningPart)
            _chunk(conn, docs, session, st, kind, seq, part.text)
            continue
        _close(conn, docs, session, st)
        if isinstance(part, PromptPart) and role == "user":
            st.turn_seq, st.changed = seq, True
            docs.insert(session, seq, "prompt", None, part.text)
        elif isinstance(part, ToolCallPart):
            _tool_call(docs, session, seq, st, part)
    docs.flush()
    _save_states(conn, states)


def reindex_session(conn: Connection, session: str, title: str, batch: int = 2000) -> None:
    """Index a session's existing transcript and title from scratch (the migration)."""
    DocWriter(conn).set_title(session, title)
    after = -1
    while True:
        rows = conn.execute(
            text(
                "SELECT seq, role, part_json FROM parts WHERE session_id = :s AND seq > :a"
                " ORDER BY seq LIMIT :n"
            ),
            {"s": session, "a": after, "n": batch},
        ).all()
        if not rows:
            break
        ops: list[SearchOp] = [
            (session, int(seq), str(role), PART_ADAPTER.validate_json(raw))
            for seq, role, raw in rows
        ]
        index_ops(conn, ops)
        after = int(rows[-1][0])
    index_ops(conn, [(session, None, None, None)])  # no turn runs during a migration


# -- reads ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Doc:
    """A matching document: its session, row (None: the title), kind and body."""

    session: str
    seq: int | None
    kind: str
    body: str


_LIVE_SESSION = "JOIN sessions s ON s.id = d.session_id AND s.archived = :no"


class SearchReader:
    """The queries of a search, on one read transaction."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._sqlite = conn.dialect.name == "sqlite"

    def ranked(self, match: str, session: str | None, offset: int, limit: int) -> list[Doc]:
        """Documents matching `match` (FTS5 expression or tsquery literal), best first.

        Ranking reads every candidate's statistics, so a query matching very many documents
        ranks only the newest RANK_WINDOW of them (or as many as the page reaches)."""
        params: dict[str, Any] = {"m": match, "no": False, "n": limit, "o": offset}
        params["k"] = max(RANK_WINDOW, offset + limit) - 1
        if self._sqlite:
            if session is not None:
                params["m"] = f'sess : "{session_token(session)}" AND {match}'
            floor = self._conn.execute(
                text(
                    "SELECT rowid FROM search_fts WHERE search_fts MATCH :m"
                    " ORDER BY rowid DESC LIMIT 1 OFFSET :k"
                ),
                params,
            ).scalar()
            params["floor"] = floor or 0
            ids = self._ranked_sqlite(params, offset + limit)[offset:]
            return self._docs(ids)
        only = ""
        if session is not None:
            only = " AND d.session_id = :sid"
            params["sid"] = session
        params["w"] = params["k"] + 1
        # One GIN scan: the newest matches (at most the window), ranked, the page's documents
        # read in the same statement (a round trip is most of a small query's time).
        query = (
            "SELECT x.id, x.session_id, x.seq, x.kind, x.body FROM (SELECT d.id,"
            " ts_rank(d.tsv, CAST(:m AS tsquery)) AS rk FROM (SELECT id, session_id, tsv"
            " FROM search_docs WHERE tsv @@ CAST(:m AS tsquery)"
            + only.replace("d.", "")
            + " ORDER BY id DESC LIMIT :w) d "
            + _LIVE_SESSION
            + " ORDER BY rk DESC, d.id DESC LIMIT :n OFFSET :o) r"
            " JOIN search_docs x ON x.id = r.id ORDER BY r.rk DESC, r.id DESC"
        )
        rows = self._conn.execute(text(query), params).all()
        return [Doc(str(r[1]), r[2], str(r[3]), str(r[4])) for r in rows]

    def _ranked_sqlite(self, params: dict[str, Any], want: int) -> list[int]:
        """The best `want` live document ids: FTS5 ranks alone (its sorter keeps the top
        rows), then deleted sessions' documents are dropped, fetching more if they were many."""
        fetch = want + 16
        while True:
            rows = self._conn.execute(
                text(
                    "SELECT c.id, s.archived FROM (SELECT rowid AS id, rank FROM search_fts"
                    " WHERE search_fts MATCH :m AND rowid >= :floor ORDER BY rank LIMIT :f) c"
                    " JOIN search_docs d ON d.id = c.id JOIN sessions s ON s.id = d.session_id"
                    " ORDER BY c.rank, c.id DESC"
                ),
                params | {"f": fetch},
            ).all()
            live = [int(row[0]) for row in rows if not row[1]]
            if len(live) >= want or len(rows) < fetch:
                return live[:want]
            fetch *= 4

    def _docs(self, ids: list[int]) -> list[Doc]:
        if not ids:
            return []
        rows = self._conn.execute(
            text(
                "SELECT id, session_id, seq, kind, body FROM search_docs WHERE id IN :ids"
            ).bindparams(bindparam("ids", expanding=True)),
            {"ids": ids},
        ).all()
        by_id = {int(r[0]): Doc(str(r[1]), r[2], str(r[3]), str(r[4])) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    def open_messages(self, session: str | None) -> list[Doc]:
        """Messages still being streamed (not yet documents), newest first."""
        query = (
            "SELECT d.session_id, d.open_kind, d.open_seq FROM search_state d "
            + _LIVE_SESSION
            + " WHERE d.open_kind IS NOT NULL"
        )
        params: dict[str, Any] = {"no": False}
        if session is not None:
            query += " AND d.session_id = :sid"
            params["sid"] = session
        found = self._conn.execute(text(query + " ORDER BY s.updated_at DESC"), params).all()
        out: list[Doc] = []
        for sid, kind, first in found:
            rows = chunk_texts(self._conn, str(sid), int(first), None)
            out.append(Doc(str(sid), int(first), str(kind), "".join(t for _s, t in rows)))
        return out

    def pages_before(
        self, rows: list[tuple[str, int]], budget: int, overhead: int
    ) -> list[int | None]:
        """For each (session, seq): the transcript cursor whose page holds that row. That is
        the session's next user row (None: the newest page), as pages end just below their
        cursor and hold whole turns; but a page holds only the newest rows of its turns that
        fit `budget` bytes (core/transcript.py), so when the rows from this one up to that
        cursor do not fit, the cursor is the next row itself (a page then ends with it)."""
        if not rows:
            return []
        params: dict[str, Any] = {}
        columns = []
        for i, (session, seq) in enumerate(rows):
            params[f"s{i}"], params[f"q{i}"] = session, seq
            columns.append(
                f"(SELECT min(seq) FROM parts WHERE session_id = :s{i} AND {USER_ROWS}"
                f" AND seq > :q{i})"
            )
        found = self._conn.execute(text("SELECT " + ", ".join(columns)), params).one()
        cursors = [None if value is None else int(value) for value in found]
        return [
            cursor if self._fits(session, seq, cursor, budget, overhead) else seq + 1
            for (session, seq), cursor in zip(rows, cursors, strict=True)
        ]

    def _fits(self, session: str, seq: int, below: int | None, budget: int, overhead: int) -> bool:
        """Whether rows seq <= s < below (None: to the newest) cost at most `budget` bytes,
        each its part JSON in UTF-8 plus `overhead`; reads at most the rows that could fit."""
        size = "length(CAST(part_json AS BLOB))" if self._sqlite else "octet_length(part_json)"
        cap = budget // overhead + 1  # rows that cost more than the budget by overhead alone
        used, count = self._conn.execute(
            text(
                f"SELECT coalesce(sum({size}), 0), count(*) FROM (SELECT part_json FROM parts"
                " WHERE session_id = :s AND seq >= :q AND seq < :b ORDER BY seq LIMIT :n) AS t"
            ),
            {"s": session, "q": seq, "b": _NO_ROW if below is None else below, "n": cap},
        ).one()
        return int(count) <= 1 or int(used) + overhead * int(count) <= budget
