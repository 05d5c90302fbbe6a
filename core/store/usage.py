"""Usage ledger and budget tables and their repository (issue 15, part 2).

One `turn_usage` row per turn that reported usage: the agent's token counts, the turn's cost
(the increase of the agent's cumulative session cost), the context window, and the agent's
cumulative cost so far (the baseline of the next increase). One `budgets` row per session or
device that has a budget; `crossed` remembers that the current crossing was announced.
Every schema change here needs an Alembic revision in migrations/versions/.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, Connection, DateTime, Float, Index, Text, func, select
from sqlalchemy import insert as sql_insert
from sqlalchemy import update as sql_update
from sqlmodel import Field, SQLModel

from c2.core.store.tables import aware


class TurnUsageRow(SQLModel, table=True):
    """What one turn used, as its agent reported it (null: not reported)."""

    __tablename__ = "turn_usage"

    turn_id: str = Field(primary_key=True, max_length=64)
    session_id: str = Field(max_length=64)
    provider: str = Field(max_length=200)
    acp_session_id: str | None = Field(default=None, sa_column=Column(Text))
    input_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    output_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    total_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    thought_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    cached_read_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    cached_write_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    cost_amount: float | None = Field(default=None, sa_column=Column(Float))
    cost_currency: str | None = Field(default=None, max_length=16)
    cost_cumulative: float | None = Field(default=None, sa_column=Column(Float))
    context_used: int | None = Field(default=None, sa_column=Column(BigInteger))
    context_size: int | None = Field(default=None, sa_column=Column(BigInteger))
    started_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    ended_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))

    __table_args__ = (
        Index("ix_turn_usage_session_started", "session_id", "started_at"),
        Index("ix_turn_usage_ended", "ended_at"),
    )


class BudgetRow(SQLModel, table=True):
    """A session's budget, or a device's default copied onto the sessions it creates."""

    __tablename__ = "budgets"

    owner_kind: str = Field(primary_key=True, max_length=8)  # session | device
    owner_id: str = Field(primary_key=True, max_length=64)
    max_cost: float | None = Field(default=None, sa_column=Column(Float))
    max_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    action: str = Field(max_length=32)
    crossed: bool = Field(default=False)
    updated_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


_TURNS = TurnUsageRow.__table__  # type: ignore[attr-defined]
_BUDGETS = BudgetRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Budget:
    """A budget's limits, what to do when crossed, and whether it is."""

    max_cost: float | None
    max_tokens: int | None
    action: str
    crossed: bool = False


@dataclass(frozen=True, slots=True)
class TurnUsageRecord:
    """One turn's usage as recorded."""

    turn_id: str
    session_id: str
    provider: str
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    thought_tokens: int | None
    cached_read_tokens: int | None
    cached_write_tokens: int | None
    cost_amount: float | None
    cost_currency: str | None
    context_used: int | None
    context_size: int | None
    started_at: datetime
    ended_at: datetime


class UsageRepository:
    """Turn usage and budgets."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    # -- turns ---------------------------------------------------------------------------------

    def turn(self, turn_id: str) -> dict[str, Any] | None:
        """A turn's usage row as a dict, None when not recorded."""
        row = self._conn.execute(select(_TURNS).where(_TURNS.c.turn_id == turn_id)).first()
        return dict(row._mapping) if row is not None else None

    def last_cumulative(self, session_id: str, acp_session_id: str | None) -> float | None:
        """The agent's cumulative cost at the latest turn of the same agent-side session."""
        if acp_session_id is None:
            return None
        row = self._conn.execute(
            select(_TURNS.c.cost_cumulative)
            .where(
                _TURNS.c.session_id == session_id,
                _TURNS.c.acp_session_id == acp_session_id,
                _TURNS.c.cost_cumulative.is_not(None),
            )
            .order_by(_TURNS.c.started_at.desc())
            .limit(1)
        ).first()
        return float(row.cost_cumulative) if row is not None else None

    def put_turn(self, values: dict[str, Any], *, exists: bool) -> None:
        """Insert or update a turn's usage row."""
        if exists:
            turn_id = values["turn_id"]
            changes = {k: v for k, v in values.items() if k != "turn_id"}
            self._conn.execute(
                sql_update(_TURNS).where(_TURNS.c.turn_id == turn_id).values(**changes)
            )
        else:
            self._conn.execute(sql_insert(_TURNS).values(**values))

    def end_turn(self, turn_id: str, now: datetime) -> None:
        """Record when the turn ended."""
        self._conn.execute(
            sql_update(_TURNS).where(_TURNS.c.turn_id == turn_id).values(ended_at=now)
        )

    def session_totals(self, session_id: str) -> tuple[float, int]:
        """(summed cost, summed total tokens) of the session's turns."""
        row = self._conn.execute(
            select(
                func.coalesce(func.sum(_TURNS.c.cost_amount), 0.0),
                func.coalesce(func.sum(_TURNS.c.total_tokens), 0),
            ).where(_TURNS.c.session_id == session_id)
        ).one()
        return float(row[0]), int(row[1])

    def turns(self, session_id: str | None, since: datetime | None) -> list[TurnUsageRecord]:
        """Turns (of one session, ended at or after `since`), oldest first."""
        query = select(_TURNS)
        if session_id is not None:
            query = query.where(_TURNS.c.session_id == session_id)
        if since is not None:
            query = query.where(_TURNS.c.ended_at >= since)
        rows = self._conn.execute(query.order_by(_TURNS.c.started_at, _TURNS.c.turn_id)).all()
        return [
            TurnUsageRecord(
                turn_id=r.turn_id,
                session_id=r.session_id,
                provider=r.provider,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                total_tokens=r.total_tokens,
                thought_tokens=r.thought_tokens,
                cached_read_tokens=r.cached_read_tokens,
                cached_write_tokens=r.cached_write_tokens,
                cost_amount=r.cost_amount,
                cost_currency=r.cost_currency,
                context_used=r.context_used,
                context_size=r.context_size,
                started_at=aware(r.started_at),
                ended_at=aware(r.ended_at),
            )
            for r in rows
        ]

    # -- budgets -------------------------------------------------------------------------------

    def budget(self, owner_kind: str, owner_id: str) -> Budget | None:
        """The budget of a session or device, None when it has none."""
        row = self._conn.execute(
            select(_BUDGETS).where(
                _BUDGETS.c.owner_kind == owner_kind, _BUDGETS.c.owner_id == owner_id
            )
        ).first()
        if row is None:
            return None
        return Budget(
            max_cost=row.max_cost,
            max_tokens=row.max_tokens,
            action=row.action,
            crossed=bool(row.crossed),
        )

    def put_budget(self, owner_kind: str, owner_id: str, budget: Budget, now: datetime) -> None:
        """Set (replace) a budget; a new budget has not been crossed yet."""
        values = {
            "max_cost": budget.max_cost,
            "max_tokens": budget.max_tokens,
            "action": budget.action,
            "crossed": budget.crossed,
            "updated_at": now,
        }
        changed = self._conn.execute(
            sql_update(_BUDGETS)
            .where(_BUDGETS.c.owner_kind == owner_kind, _BUDGETS.c.owner_id == owner_id)
            .values(**values)
        )
        if not changed.rowcount:
            self._conn.execute(
                sql_insert(_BUDGETS).values(owner_kind=owner_kind, owner_id=owner_id, **values)
            )

    def mark_crossed(self, owner_kind: str, owner_id: str, crossed: bool) -> None:
        """Record whether the budget is crossed."""
        self._conn.execute(
            sql_update(_BUDGETS)
            .where(_BUDGETS.c.owner_kind == owner_kind, _BUDGETS.c.owner_id == owner_id)
            .values(crossed=crossed)
        )
