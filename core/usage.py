"""The usage ledger and budgets (issue 15, part 2): what each turn used, sums of it, and the
budgets that warn, refuse new turns or cancel the running one when usage goes over them.

An agent reports usage two ways (ACP): `usage_update` (context window, and `cost` as the
*session's cumulative* cost) and the prompt response's `usage` (the turn's token counts). A
turn's cost is therefore the increase of the cumulative cost during the turn, measured against
the last cumulative of the same agent-side session (a fresh agent session counts from zero).
Each report updates the turn's ledger row and re-checks the session's budget in the same
transaction as its `usage` event, so the ledger never drifts from the event log and a crossing
is announced (`budget_exceeded`) exactly once. Acting on a crossing (cancelling the running
turn) happens after that transaction committed.

Over 300 lines: recording usage, checking budgets and summing reports are one ledger; its
rule (a crossing is announced once, in the usage event's transaction) spans all three.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from c2.core.errors import (
    BudgetExceededError,
    DeviceNotFoundError,
    InvalidUsageQueryError,
    SessionNotFoundError,
    StoreUnavailableError,
)
from c2.core.protocol.events import BudgetExceeded, BudgetLimit, BudgetUsed, Cost
from c2.core.protocol.values import provider_wire
from c2.core.session import rfc3339, utcnow
from c2.core.store.database import ReadUnit, Store, UnitOfWork
from c2.core.store.devices import DeviceRepository
from c2.core.store.usage import Budget as Budget  # re-exported: the budget a route sets
from c2.core.store.usage import TurnUsageRecord, UsageRepository

if TYPE_CHECKING:
    from c2.core.agents.updates import TurnUsage
    from c2.core.live import LiveSession

log = logging.getLogger(__name__)
BudgetAction = Literal["warn", "refuse_new_turns", "cancel_running"]
GroupBy = Literal["session", "provider", "day"]
# Actions under which an exceeded budget refuses new prompts (cancel_running also stops the
# turn that crossed it: a budget that is over stays over, so a new turn would only be cut).
REFUSING: frozenset[str] = frozenset({"refuse_new_turns", "cancel_running"})


@dataclass(frozen=True, slots=True)
class Crossing:
    """A budget crossing committed with a usage report: who acts on it and how."""

    session: str
    turn_id: str | None
    action: str


def is_over(budget: Budget, cost: float, tokens: int) -> bool:
    """A budget is crossed when usage is greater than a limit."""
    over_cost = budget.max_cost is not None and cost > budget.max_cost
    over_tokens = budget.max_tokens is not None and tokens > budget.max_tokens
    return over_cost or over_tokens


def limit_of(budget: Budget) -> BudgetLimit:
    """A budget's limits in wire form."""
    return BudgetLimit(max_cost=budget.max_cost, max_tokens=budget.max_tokens)


def check_budget(uow: UnitOfWork, session: str, turn_id: str | None) -> Crossing | None:
    """Re-check the session's budget in this transaction: a new crossing is announced (and
    remembered) once; usage back under the limit (a raised limit) re-arms it."""
    repo = UsageRepository(uow.conn)
    budget = repo.budget("session", session)
    if budget is None:
        return None
    cost, tokens = repo.session_totals(session)
    over = is_over(budget, cost, tokens)
    if over == budget.crossed:
        return None
    repo.mark_crossed("session", session, over)
    if not over:
        return None
    uow.emit(
        BudgetExceeded(
            session=session,
            action=budget.action,
            limit=limit_of(budget),
            used=BudgetUsed(cost=cost, tokens=tokens),
        )
    )
    return Crossing(session=session, turn_id=turn_id, action=budget.action)


class UsageStep:
    """One usage report's ledger write: called inside the report's transaction (possibly more
    than once, if the store retries it), then `committed` once the transaction landed."""

    def __init__(
        self,
        ledger: UsageLedger,
        live: LiveSession,
        changes: Callable[[dict[str, Any], float | None], dict[str, Any]],
    ) -> None:
        self._ledger = ledger
        self._live = live
        self._changes = changes
        turn = live.turn
        self.turn_id = turn.turn_id if turn is not None else None
        self.acp_session_id = live.acp_session_id or live.record.acp_session_id
        self.provider = live.record.provider
        self.crossing: Crossing | None = None

    def __call__(self, uow: UnitOfWork) -> None:
        """Record the report on the turn's usage row (in the update's transaction) and check
        the session's budget."""
        self.crossing = None
        if self.turn_id is None:
            return  # a report outside any turn (none is known to happen) is nobody's usage
        repo = UsageRepository(uow.conn)
        row = repo.turn(self.turn_id)
        now = utcnow()
        if row is None:
            baseline = repo.last_cumulative(self._live.id, self.acp_session_id)
            current: dict[str, Any] = {
                "turn_id": self.turn_id,
                "session_id": self._live.id,
                "provider": self.provider,
                "acp_session_id": self.acp_session_id,
                "started_at": now,
            }
        else:
            baseline, current = row["cost_cumulative"], row
        values = self._changes(current, baseline) | {"turn_id": self.turn_id, "ended_at": now}
        repo.put_turn(values if row is not None else current | values, exists=row is not None)
        self.crossing = check_budget(uow, self._live.id, self.turn_id)

    def committed(self, future: asyncio.Future[None]) -> None:
        """Once the write committed, act on a budget it crossed."""
        if future.cancelled() or future.exception() is not None or self.crossing is None:
            return
        self._ledger.act(self._live, self.crossing)


def cost_changes(cost: Cost) -> Callable[[dict[str, Any], float | None], dict[str, Any]]:
    """A cumulative cost report: the turn's cost grows by the increase since the baseline."""

    def changes(row: dict[str, Any], baseline: float | None) -> dict[str, Any]:
        previous = baseline or 0.0
        # Lower than before: the agent started counting afresh (a new agent-side session).
        increase = cost.amount - previous if cost.amount >= previous else cost.amount
        return {
            "cost_amount": (row.get("cost_amount") or 0.0) + increase,
            "cost_currency": cost.currency,
            "cost_cumulative": cost.amount,
        }

    return changes


class UsageLedger:
    """Per-turn usage, budgets and the usage report; one per engine."""

    def __init__(self, store: Store, cancel: Callable[[str], Awaitable[object]]) -> None:
        self._store = store
        self._cancel = cancel
        self._tasks: set[asyncio.Task[None]] = set()

    # -- recording (called by the agent feed, core/agent_feed.py) -------------------------------

    def context(self, live: LiveSession, used: int, size: int, cost: Cost | None) -> UsageStep:
        """A `usage_update`: the context window, and the session's cumulative cost if given."""
        with_cost = cost_changes(cost) if cost is not None else None

        def changes(row: dict[str, Any], baseline: float | None) -> dict[str, Any]:
            values: dict[str, Any] = {"context_used": used, "context_size": size}
            if with_cost is not None:
                values |= with_cost(row, baseline)
            return values

        return UsageStep(self, live, changes)

    def turn_usage(self, live: LiveSession, usage: TurnUsage) -> UsageStep:
        """A prompt response's `usage`: the turn's token counts (total: the agent's figure,
        else input + output)."""
        total = usage.total_tokens
        if total is None:
            total = usage.input_tokens + usage.output_tokens
        values = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": total,
            "thought_tokens": usage.thought_tokens,
            "cached_read_tokens": usage.cached_read_tokens,
            "cached_write_tokens": usage.cached_write_tokens,
        }
        return UsageStep(self, live, lambda _row, _baseline: values)

    @staticmethod
    def close_turn(turn_id: str) -> Callable[[UnitOfWork], None]:
        """The write step that stamps a turn's end time (in the turn's closing transaction)."""

        def close(uow: UnitOfWork) -> None:
            UsageRepository(uow.conn).end_turn(turn_id, utcnow())

        return close

    def act(self, live: LiveSession, crossing: Crossing) -> None:
        """Act on a committed crossing: `cancel_running` cancels the turn that crossed it."""
        if crossing.action != "cancel_running":
            return
        turn = live.turn
        if turn is None or (crossing.turn_id is not None and turn.turn_id != crossing.turn_id):
            return
        # At once, not only in the cancel task: a crossing reported with the turn's final
        # usage must still end that turn `cancelled` (the turn runner reads this flag at the end).
        turn.cancel_requested = True
        task = asyncio.get_running_loop().create_task(self._cancel_turn(live.id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cancel_turn(self, session: str) -> None:
        try:
            await self._cancel(session)
        except Exception:
            log.exception("could not cancel the turn of %s over its budget", session)

    # -- budgets ---------------------------------------------------------------------------------

    async def admit(self, session: str, request_id: str | None) -> None:
        """Refuse a prompt while the session's budget is exceeded under a refusing action."""

        def read(r: ReadUnit) -> tuple[Budget | None, float, int]:
            repo = UsageRepository(r.conn)
            return repo.budget("session", session), *repo.session_totals(session)

        try:
            budget, cost, tokens = await self._store.read(read)
        except Exception as exc:
            raise StoreUnavailableError(
                f"couldn't read this session's budget: {exc}", session=session
            ) from exc
        if budget is None or budget.action not in REFUSING or not is_over(budget, cost, tokens):
            return
        raise BudgetExceededError(
            "this session's budget is exceeded; raise it to start new turns",
            limit=limit_of(budget),
            used=BudgetUsed(cost=cost, tokens=tokens),
            session=session,
            request_id=request_id,
        )

    async def set_session_budget(self, live: LiveSession, budget: Budget) -> dict[str, Any]:
        """Replace the session's budget and check it at once (it may be exceeded already)."""

        def write(uow: UnitOfWork) -> tuple[Crossing | None, float, int]:
            repo = UsageRepository(uow.conn)
            repo.put_budget("session", live.id, budget, utcnow())
            turn_id = live.turn.turn_id if live.turn is not None else None
            crossing = check_budget(uow, live.id, turn_id)
            return crossing, *repo.session_totals(live.id)

        crossing, cost, tokens = await self._store.write(write)
        if crossing is not None:
            self.act(live, crossing)
        return budget_wire(budget) | {
            "session": live.id,
            "used": BudgetUsed(cost=cost, tokens=tokens).model_dump(),
        }

    async def set_device_budget(self, device_id: str, budget: Budget) -> dict[str, Any]:
        """Replace a device's default budget (copied onto the sessions it creates later)."""

        def write(uow: UnitOfWork) -> bool:
            if DeviceRepository(uow.conn).get(device_id) is None:
                return False
            UsageRepository(uow.conn).put_budget("device", device_id, budget, utcnow())
            return True

        if not await self._store.write(write):
            raise DeviceNotFoundError(f"no device {device_id}")
        return budget_wire(budget) | {"device": device_id}

    @staticmethod
    def inherit(device_id: str | None, session: str) -> Callable[[UnitOfWork], None]:
        """The write step copying the creating device's default budget onto a new session."""

        def copy(uow: UnitOfWork) -> None:
            if device_id is None:
                return
            repo = UsageRepository(uow.conn)
            default = repo.budget("device", device_id)
            if default is not None:
                repo.put_budget("session", session, Budget(*_limits(default)), utcnow())

        return copy

    # -- the report ------------------------------------------------------------------------------

    async def report(
        self, session: str | None, since: datetime | None, group_by: GroupBy | None
    ) -> dict[str, Any]:
        """`GET /v1/usage`: sums per session, provider or UTC day, or one session's turns."""
        if group_by is None and session is None:
            raise InvalidUsageQueryError("give group_by, or session= to list a session's turns")

        def read(r: ReadUnit) -> list[TurnUsageRecord] | None:
            if session is not None and r.sessions.get(session) is None:
                return None
            return UsageRepository(r.conn).turns(session, since)

        try:
            turns = await self._store.read(read)
        except Exception as exc:
            raise StoreUnavailableError(f"couldn't read usage: {exc}") from exc
        if turns is None:
            raise SessionNotFoundError("no such session", session=session)
        if group_by is None:
            groups = [turn_wire(t) for t in turns]
        else:
            groups = summed(turns, group_by)
        return {"kind": "usage", "group_by": group_by, "groups": groups}


def _limits(budget: Budget) -> tuple[float | None, int | None, str]:
    return budget.max_cost, budget.max_tokens, budget.action


def budget_wire(budget: Budget) -> dict[str, Any]:
    """A budget as the budget routes answer it."""
    return {"max_cost": budget.max_cost, "max_tokens": budget.max_tokens, "action": budget.action}


def parse_since(raw: str | None) -> datetime | None:
    """An RFC 3339 timestamp with an offset (422 otherwise)."""
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise InvalidUsageQueryError(f"since must be an RFC 3339 timestamp with an offset: {raw!r}")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-23:59 is past the last UTC datetime
        raise InvalidUsageQueryError(f"since is out of range in UTC: {raw!r}") from None


def _key(turn: TurnUsageRecord, group_by: GroupBy) -> str | dict[str, str]:
    if group_by == "session":
        return turn.session_id
    if group_by == "provider":
        return provider_wire(turn.provider)
    return turn.ended_at.astimezone(UTC).strftime("%Y-%m-%d")


def _cost(amount: float | None, currency: str | None) -> dict[str, Any] | None:
    if amount is None or currency is None:
        return None
    return {"amount": amount, "currency": currency}


def summed(turns: list[TurnUsageRecord], group_by: GroupBy) -> list[dict[str, Any]]:
    """Sums per key, in key order. Costs in different currencies are never added up: such a
    key gets one group per currency (turns without a cost count in the first)."""
    groups: dict[tuple[str, str | None], dict[str, Any]] = {}
    keys: dict[str, str | dict[str, str]] = {}
    currencies: dict[str, list[str]] = {}
    for turn in turns:
        key = _key(turn, group_by)
        name = str(sorted(key.items())) if isinstance(key, dict) else key
        keys[name] = key
        if turn.cost_currency is not None and turn.cost_currency not in currencies.get(name, []):
            currencies.setdefault(name, []).append(turn.cost_currency)
    for turn in turns:
        key = _key(turn, group_by)
        name = str(sorted(key.items())) if isinstance(key, dict) else key
        known = currencies.get(name, [])
        currency = turn.cost_currency or (known[0] if known else None)
        group = groups.setdefault(
            (name, currency),
            {
                "key": keys[name],
                "input_tokens": 0,
                "output_tokens": 0,
                "total_tokens": 0,
                "cost": None,
            },
        )
        group["input_tokens"] += turn.input_tokens or 0
        group["output_tokens"] += turn.output_tokens or 0
        group["total_tokens"] += turn.total_tokens or 0
        if turn.cost_amount is not None and currency is not None:
            previous = group["cost"]["amount"] if group["cost"] else 0.0
            group["cost"] = _cost(previous + turn.cost_amount, currency)
    return [groups[k] for k in sorted(groups, key=lambda k: (k[0], k[1] or ""))]


def turn_wire(turn: TurnUsageRecord) -> dict[str, Any]:
    """One turn of a session's usage listing (`key` is the turn id)."""
    context = None
    if turn.context_used is not None and turn.context_size is not None:
        context = {"used_tokens": turn.context_used, "context_window": turn.context_size}
    return {
        "key": turn.turn_id,
        "input_tokens": turn.input_tokens or 0,
        "output_tokens": turn.output_tokens or 0,
        "total_tokens": turn.total_tokens or 0,
        "cost": _cost(turn.cost_amount, turn.cost_currency),
        "thought_tokens": turn.thought_tokens,
        "cached_read_tokens": turn.cached_read_tokens,
        "cached_write_tokens": turn.cached_write_tokens,
        "context_window": context,
        "provider": provider_wire(turn.provider),
        "started_at": rfc3339(turn.started_at),
        "ended_at": rfc3339(turn.ended_at),
    }
