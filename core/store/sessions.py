"""Session repository: maps `sessions` rows to `SessionRecord` and back.

Activity writes are revision-aware (compare-and-set on the stored revision) so a stale writer
can never roll a session's activity backwards (docs/protocol.md: Durable session activity).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from pydantic import TypeAdapter
from sqlalchemy import Connection, false, insert, select, tuple_, update

from c2.core.activity import INTERRUPTED
from c2.core.mcp_servers import dump_mcp_servers, parse_mcp_servers
from c2.core.protocol.state import (
    AwaitingInputState,
    ConfigOption,
    ContextWindow,
    FailedState,
    ForkedFrom,
    ModelsState,
    ModesState,
    PendingInput,
    SessionActivity,
)
from c2.core.protocol.values import ExecutionPolicy, WorktreeBaseline
from c2.core.session import SessionRecord
from c2.core.store.search import SearchWriter
from c2.core.store.tables import SessionRow, aware

_SESSIONS = SessionRow.__table__  # type: ignore[attr-defined]
# Activity states in which no turn runs: the session's open message is complete.
_TURN_OVER = frozenset({"idle", "failed"})

# How each SessionRecord field is stored, spelled once: a column of its own name, JSON in
# `<name>_json` (absent: the record's default), or by hand in `_SPECIAL` (its columns).
_PLAIN = (
    "id",
    "provider",
    "title",
    "title_origin",
    "model",
    "cwd",
    "project_path",
    "worktree_path",
    "worktree_discarded",
    "acp_session_id",
    "archived",
    "owner",
    "created_at",
    "updated_at",
)
_JSON: dict[str, TypeAdapter[Any]] = {
    "worktree_baseline": TypeAdapter(WorktreeBaseline),
    "worktree_identity": TypeAdapter(dict[str, Any]),
    "activity": TypeAdapter(SessionActivity),  # older rows without it: revision 0, idle
    "models": TypeAdapter(ModelsState),
    "config_options": TypeAdapter(list[ConfigOption]),
    "context_window": TypeAdapter(ContextWindow),
    "modes": TypeAdapter(ModesState),
}
_SPECIAL: dict[str, tuple[str, ...]] = {
    "policy": ("permission_mode", "sandbox_policy"),
    "mcp_servers": ("mcp_servers_json",),
    "forked_from": ("lineage_json",),
    "prime": ("lineage_json",),
}
_FIELDS = tuple(f.name for f in dataclasses.fields(SessionRecord))
if sorted(_FIELDS) != sorted([*_PLAIN, *_JSON, *_SPECIAL]):
    raise TypeError("every SessionRecord field is stored in exactly one way")
# An update of these fields writes those with them (a title carries its origin).
_WRITTEN_WITH = {"title": ("title", "title_origin")}


class ActivityConflictError(Exception):
    """The stored activity revision is not the one the writer expected."""


class Interrupted(NamedTuple):
    """A session whose turn recovery ended: its record now, its prompt, what it had parked."""

    record: SessionRecord
    request_id: str | None
    parked: list[PendingInput]


def _to_row(rec: SessionRecord, fields: Iterable[str] = _FIELDS) -> dict[str, Any]:
    """The columns storing `fields` of `rec` (all of them by default)."""
    row: dict[str, Any] = {}
    for name in fields:
        value = getattr(rec, name)
        if name in _JSON:
            row[f"{name}_json"] = None if value is None else _JSON[name].dump_json(value).decode()
        elif name == "policy":
            row["permission_mode"], row["sandbox_policy"] = value.mode.value, value.sandbox.value
        elif name == "mcp_servers":
            row["mcp_servers_json"] = json.dumps(dump_mcp_servers(value)) if value else None
        elif name in ("forked_from", "prime"):
            row["lineage_json"] = _lineage(rec)
        else:
            row[name] = value
    return row


def _lineage(rec: SessionRecord) -> str | None:
    if rec.forked_from is None:
        return None
    return json.dumps({**rec.forked_from.model_dump(mode="json"), "prime": rec.prime})


def _from_row(row: Any) -> SessionRecord:
    fields: dict[str, Any] = {name: getattr(row, name) for name in _PLAIN}
    fields["created_at"], fields["updated_at"] = aware(row.created_at), aware(row.updated_at)
    fields["worktree_discarded"], fields["archived"] = (
        bool(row.worktree_discarded),
        bool(row.archived),
    )
    for name, adapter in _JSON.items():
        stored = getattr(row, f"{name}_json")
        if stored:
            fields[name] = adapter.validate_json(stored)
    fields["policy"] = ExecutionPolicy(mode=row.permission_mode, sandbox=row.sandbox_policy)
    if row.mcp_servers_json:
        fields["mcp_servers"] = parse_mcp_servers(json.loads(row.mcp_servers_json))
    lineage = json.loads(row.lineage_json) if row.lineage_json else None
    if lineage:
        fields["forked_from"] = ForkedFrom.model_validate(lineage)
        fields["prime"] = bool(lineage.get("prime"))
    return SessionRecord(**fields)


@functools.lru_cache(maxsize=512)
def _listed(row: Any) -> SessionRecord:
    """`_from_row` for the session list, remembered by the row's every column: a record is
    immutable and a pure function of its row, so an unchanged session read again (each
    welcome frame, each list page) costs a hash, not a decode (issue 17)."""
    return _from_row(row)


class SessionRepository:
    """Sessions as records; writers also keep the search index's titles."""

    def __init__(self, conn: Connection, search: SearchWriter | None = None) -> None:
        self._conn = conn
        # The search index (writers only): titles, and the end of a turn completes the
        # session's open message (core/store/search.py).
        self._search = search

    def _indexed(self, rec: SessionRecord, fields: tuple[str, ...] | None) -> None:
        if self._search is None:
            return
        if fields is None or "title" in fields:
            self._search.title(rec.id, rec.title)
        if (fields is None or "activity" in fields) and rec.activity.state.kind in _TURN_OVER:
            self._search.turn_ended(rec.id)

    def insert(self, rec: SessionRecord) -> None:
        """Insert a new session."""
        self._conn.execute(insert(_SESSIONS).values(**_to_row(rec)))
        self._indexed(rec, None)

    def get(self, session_id: str) -> SessionRecord | None:
        """A session by id (archived ones too), None when unknown."""
        row = self._conn.execute(select(_SESSIONS).where(_SESSIONS.c.id == session_id)).first()
        return _from_row(row) if row is not None else None

    def list_page(
        self, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[SessionRecord]:
        """Up to `limit` non-archived sessions, newest first (created_at, then id, descending),
        strictly after the (created_at, id) position `after`: one index range, however many
        sessions are stored (core/session_list.py). A corrupt row fails the whole read."""
        query = select(_SESSIONS).where(_SESSIONS.c.archived == false())
        if after is not None:
            created, session_id = after
            query = query.where(
                tuple_(_SESSIONS.c.created_at, _SESSIONS.c.id) < tuple_(created, session_id)
            )
        rows = self._conn.execute(
            query.order_by(_SESSIONS.c.created_at.desc(), _SESSIONS.c.id.desc()).limit(limit)
        ).all()
        return [_listed(r) for r in rows]

    def save(self, rec: SessionRecord) -> None:
        """Write every field of `rec` (creation-time and recovery writes)."""
        values = _to_row(rec)
        del values["id"], values["created_at"]
        result = self._conn.execute(
            update(_SESSIONS).where(_SESSIONS.c.id == rec.id).values(**values)
        )
        if result.rowcount == 0:
            raise KeyError(rec.id)
        self._indexed(rec, None)

    def update(
        self, rec: SessionRecord, fields: tuple[str, ...], *, expected_revision: int | None = None
    ) -> None:
        """Write only `fields` of `rec` (plus updated_at). With `expected_revision`, only if the
        stored activity revision still equals it, else ActivityConflictError.

        Targeted writes let independent producers (agent usage updates, policy changes,
        activity transitions) share a row without overwriting each other's columns."""
        if expected_revision is not None:
            stored = self.stored_revision(rec.id)
            if stored != expected_revision:
                raise ActivityConflictError(
                    f"session activity revision conflict for {rec.id}: "
                    f"expected {expected_revision}, found {stored}"
                )
        written = [name for field in fields for name in _WRITTEN_WITH.get(field, (field,))]
        values = _to_row(rec, written) | {"updated_at": rec.updated_at}
        result = self._conn.execute(
            update(_SESSIONS).where(_SESSIONS.c.id == rec.id).values(**values)
        )
        if result.rowcount == 0:
            raise KeyError(rec.id)
        self._indexed(rec, fields)

    def adopt(self, session_id: str, owner: str, previous: str) -> bool:
        """Make `owner` the session's owner if `previous` still is (compare-and-set: of
        members racing to adopt it, exactly one wins)."""
        done = self._conn.execute(
            update(_SESSIONS)
            .where(_SESSIONS.c.id == session_id, _SESSIONS.c.owner == previous)
            .values(owner=owner)
        )
        return bool(done.rowcount)

    def stored_revision(self, session_id: str) -> int | None:
        """The stored activity revision, None for an unknown session."""
        raw = self._conn.execute(
            select(_SESSIONS.c.activity_json).where(_SESSIONS.c.id == session_id)
        ).scalar()
        if raw is None:
            return 0 if self.get(session_id) is not None else None
        return SessionActivity.model_validate_json(raw).revision

    def interrupt_in_flight(
        self,
        owners: list[str] | None = None,
        *,
        unowned: bool = True,
        session: str | None = None,
    ) -> list[Interrupted]:
        """Start-up recovery: running/awaiting_input become failed/interrupted (revision+1).
        Each record changed, with the request_id of the prompt whose turn it was and the
        permissions it had parked.

        `owners` (a cluster): only the sessions of these members, and (`unowned`) those of no
        member (left by a plain server, which cannot run next to a cluster); None: every
        session. `session`: only that one."""
        changed: list[Interrupted] = []
        query = select(_SESSIONS).where(_SESSIONS.c.activity_json.is_not(None))
        if owners is not None:
            mine = _SESSIONS.c.owner.in_(owners)
            query = query.where(mine | _SESSIONS.c.owner.is_(None) if unowned else mine)
        if session is not None:
            query = query.where(_SESSIONS.c.id == session)
        rows = self._conn.execute(query).all()
        for row in rows:
            rec = _from_row(row)
            state = rec.activity.state
            if state.kind not in ("running", "awaiting_input"):
                continue
            failed = rec.evolve(
                activity=SessionActivity(
                    revision=rec.activity.revision + 1,
                    state=FailedState(
                        turn_id=getattr(state, "turn_id", None),
                        reason="interrupted",
                        message=INTERRUPTED,
                    ),
                )
            )
            self.save(failed)
            parked = list(state.pending) if isinstance(state, AwaitingInputState) else []
            changed.append(Interrupted(failed, getattr(state, "prompt_request_id", None), parked))
        return changed
