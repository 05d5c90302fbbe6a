"""Pure parts of the usage ledger: cost increases, sums per key, budget comparison."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from c2.core.errors import DomainError
from c2.core.protocol.events import Cost
from c2.core.store.usage import Budget, TurnUsageRecord
from c2.core.usage import cost_changes, is_over, parse_since, summed

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _turn(turn_id: str, session: str, tokens: int, cost: float | None, currency: str | None):
    return TurnUsageRecord(
        turn_id=turn_id,
        session_id=session,
        provider="custom:echo",
        input_tokens=tokens,
        output_tokens=0,
        total_tokens=tokens,
        thought_tokens=None,
        cached_read_tokens=None,
        cached_write_tokens=None,
        cost_amount=cost,
        cost_currency=currency,
        context_used=None,
        context_size=None,
        started_at=NOON,
        ended_at=NOON,
    )


def test_cost_changes_add_the_increase_of_the_cumulative_cost() -> None:
    """A cumulative report adds what grew since the baseline to the turn's cost."""
    first = cost_changes(Cost(amount=1.5, currency="USD"))({}, 1.0)
    assert first == {"cost_amount": 0.5, "cost_currency": "USD", "cost_cumulative": 1.5}
    second = cost_changes(Cost(amount=2.0, currency="USD"))(first, first["cost_cumulative"])
    assert second["cost_amount"] == pytest.approx(1.0)


def test_cost_changes_count_a_restarted_agent_whole() -> None:
    """A cumulative below the baseline is a fresh agent session: all of it is new cost."""
    changes = cost_changes(Cost(amount=0.2, currency="USD"))({}, 3.0)
    assert changes["cost_amount"] == pytest.approx(0.2)


def test_summed_never_adds_costs_in_different_currencies() -> None:
    """A key with two currencies gets one group per currency; costless turns join the first."""
    turns = [
        _turn("t1", "a", 10, 1.0, "USD"),
        _turn("t2", "a", 5, 2.0, "EUR"),
        _turn("t3", "a", 1, None, None),
        _turn("t4", "b", 7, None, None),
    ]
    groups = summed(turns, "session")
    assert [(g["key"], g["total_tokens"], g["cost"]) for g in groups] == [
        ("a", 5, {"amount": 2.0, "currency": "EUR"}),
        ("a", 11, {"amount": 1.0, "currency": "USD"}),
        ("b", 7, None),
    ]
    assert [g["key"] for g in summed(turns, "provider")] == [{"custom": "echo"}] * 2
    assert [g["key"] for g in summed(turns, "day")] == ["2026-12-01"] * 2


def test_is_over_means_greater_than_the_limit() -> None:
    """Usage equal to a limit is not over it; missing limits never cross."""
    budget = Budget(max_cost=1.0, max_tokens=100, action="warn")
    assert not is_over(budget, 1.0, 100)
    assert is_over(budget, 1.01, 0)
    assert is_over(budget, 0.0, 101)
    assert not is_over(Budget(max_cost=None, max_tokens=None, action="warn"), 1e9, 10**9)


def test_parse_since_requires_an_offset() -> None:
    """RFC 3339 with Z or an offset is read as UTC; a local time is refused."""
    assert parse_since("2026-12-01T13:00:00+01:00") == NOON
    assert parse_since("2026-12-01T12:00:00Z") == NOON
    with pytest.raises(DomainError):
        parse_since("2026-12-01T12:00:00")
