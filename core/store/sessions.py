"""Session repository: maps `sessions` rows to `SessionRecord` and back.

Activity writes are revision-aware (compare-and-set on the stored revision) so a stale writer
can never roll a session's activity backwards (protocol: Durable session activity).
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import Connection, false, insert, select, tuple_, update

from core.mcp_servers import dump_mcp_servers, parse_mcp_servers
from core.protocol import (
    ConfigOption,
    ContextWindow,
    ExecutionPolicy,
    FailedState,
    ForkedFrom,
    ModelsState,
    ModesState,
    SessionActivity,
    WorktreeBaseline,
)
from core.session import SessionRecord
from core.store.search import SearchWriter
from core.store.tables import SessionRow

_SESSIONS = SessionRow.__table__  # type: ignore[attr-defined]
_CONFIG_OPTIONS = TypeAdapter(list[ConfigOption])
# Activity states in which no turn runs: the session's open message is complete.
_TURN_OVER = frozenset({"idle", "failed"})
INTERRUPTED_MESSAGE = "C2 stopped before the turn finished"
# SessionRecord field -> the columns that store it.
_COLUMNS: dict[str, tuple[str, ...]] = {
    "title": ("title", "title_origin"),
    "model": ("model",),
    "policy": ("permission_mode", "sandbox_policy"),
    "activity": ("activity_json",),
    "acp_session_id": ("acp_session_id",),
    "models": ("models_json",),
    "config_options": ("config_options_json",),
    "context_window": ("context_window_json",),
    "modes": ("modes_json",),
    "archived": ("archived",),
    "worktree_discarded": ("worktree_discarded",),
    "forked_from": ("lineage_json",),
    "prime": ("lineage_json",),
}


class ActivityConflictError(Exception):
    """The stored activity revision is not the one the writer expected."""


def _dump(model: Any) -> str | None:
    if model is None:
        return None
    if isinstance(model, list):
        return json.dumps([m.model_dump(mode="json") for m in model])
    if isinstance(model, dict):
        return json.dumps(model)
    return str(model.model_dump_json())


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything we store is UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _to_row(rec: SessionRecord) -> dict[str, Any]:
    return {
        "id": rec.id,
        "provider": rec.provider,
        "title": rec.title,
        "title_origin": rec.title_origin,
        "model": rec.model,
        "cwd": rec.cwd,
        "project_path": rec.project_path,
        "worktree_path": rec.worktree_path,
        "worktree_baseline_json": _dump(rec.worktree_baseline),
        "worktree_identity_json": _dump(rec.worktree_identity),
        "worktree_discarded": rec.worktree_discarded,
        "permission_mode": rec.policy.mode.value,
        "sandbox_policy": rec.policy.sandbox.value,
        "activity_json": _dump(rec.activity),
        "acp_session_id": rec.acp_session_id,
        "models_json": _dump(rec.models),
        "config_options_json": _dump(rec.config_options),
        "context_window_json": _dump(rec.context_window),
        "modes_json": _dump(rec.modes),
        "mcp_servers_json": (
            json.dumps(dump_mcp_servers(rec.mcp_servers)) if rec.mcp_servers else None
        ),
        "lineage_json": _lineage(rec),
        "archived": rec.archived,
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
    }


def _lineage(rec: SessionRecord) -> str | None:
    if rec.forked_from is None:
        return None
    return json.dumps({**rec.forked_from.model_dump(mode="json"), "prime": rec.prime})


def _from_row(row: Any) -> SessionRecord:
    lineage = json.loads(row.lineage_json) if row.lineage_json else None
    return SessionRecord(
        forked_from=ForkedFrom.model_validate(lineage) if lineage else None,
        prime=bool(lineage and lineage.get("prime")),
        id=row.id,
        provider=row.provider,
        title=row.title,
        title_origin=row.title_origin,
        model=row.model,
        cwd=row.cwd,
        project_path=row.project_path,
        worktree_path=row.worktree_path,
        worktree_baseline=(
            WorktreeBaseline.model_validate_json(row.worktree_baseline_json)
            if row.worktree_baseline_json
            else None
        ),
        worktree_identity=(
            json.loads(row.worktree_identity_json) if row.worktree_identity_json else None
        ),
        worktree_discarded=bool(row.worktree_discarded),
        policy=ExecutionPolicy(mode=row.permission_mode, sandbox=row.sandbox_policy),
        # Older rows without activity read as revision 0 + idle (protocol).
        activity=(
            SessionActivity.model_validate_json(row.activity_json)
            if row.activity_json
            else SessionActivity()
        ),
        acp_session_id=row.acp_session_id,
        models=ModelsState.model_validate_json(row.models_json) if row.models_json else None,
        config_options=(
            _CONFIG_OPTIONS.validate_json(row.config_options_json)
            if row.config_options_json
            else []
        ),
        context_window=(
            ContextWindow.model_validate_json(row.context_window_json)
            if row.context_window_json
            else None
        ),
        modes=ModesState.model_validate_json(row.modes_json) if row.modes_json else None,
        mcp_servers=(
            parse_mcp_servers(json.loads(row.mcp_servers_json)) if row.mcp_servers_json else ()
        ),
        archived=bool(row.archived),
        created_at=_aware(row.created_at),
        updated_at=_aware(row.updated_at),
    )


@functools.lru_cache(maxsize=512)
def _listed(row: Any) -> SessionRecord:
    """`_from_row` for the session list, remembered by the row's every column: a record is
    immutable and a pure function of its row, so an unchanged session read again (each
    welcome frame, each list page) costs a hash, not a decode (issue 17)."""
    return _from_row(row)


class SessionRepository:
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
        self._conn.execute(insert(_SESSIONS).values(**_to_row(rec)))
        self._indexed(rec, None)

    def get(self, session_id: str) -> SessionRecord | None:
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
        row = _to_row(rec)
        values = {"updated_at": rec.updated_at}
        for name in fields:
            for column in _COLUMNS[name]:
                values[column] = row[column]
        result = self._conn.execute(
            update(_SESSIONS).where(_SESSIONS.c.id == rec.id).values(**values)
        )
        if result.rowcount == 0:
            raise KeyError(rec.id)
        self._indexed(rec, fields)

    def stored_revision(self, session_id: str) -> int | None:
        raw = self._conn.execute(
            select(_SESSIONS.c.activity_json).where(_SESSIONS.c.id == session_id)
        ).scalar()
        if raw is None:
            return 0 if self.get(session_id) is not None else None
        return SessionActivity.model_validate_json(raw).revision

    def interrupt_in_flight(self) -> list[SessionRecord]:
        """Start-up recovery: running/awaiting_input become failed/interrupted (revision+1)."""
        changed: list[SessionRecord] = []
        rows = self._conn.execute(
            select(_SESSIONS).where(_SESSIONS.c.activity_json.is_not(None))
        ).all()
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
                        message=INTERRUPTED_MESSAGE,
                    ),
                )
            )
            self.save(failed)
            changed.append(failed)
        return changed
