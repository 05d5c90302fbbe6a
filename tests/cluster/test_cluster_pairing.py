"""The pairing-attempt limit is cluster-wide (issue 18): failed guesses spread over both
members count against one budget (10 a minute per client address, the default), kept in the
database (core/store/pairing.py)."""

from __future__ import annotations

import httpx
import pytest

from tests.cluster.conftest import Pair

pytestmark = pytest.mark.postgres
BUDGET = 10  # Settings.pair_attempts_per_minute


def _guess(server_url: str) -> httpx.Response:
    return httpx.post(f"{server_url}/v1/pair", json={"token": "a wrong guess"}, timeout=10)


def test_failed_pairing_attempts_count_across_members(pair: Pair) -> None:
    # Half the budget on each member: each alone has seen only half of it.
    for server in (pair.a, pair.b) * (BUDGET // 2):
        refused = _guess(server.base_url)
        assert refused.status_code == 401, refused.text
        assert refused.json()["code"] == "invalid_pairing_token"
    for server in (pair.b, pair.a):
        limited = _guess(server.base_url)
        assert limited.status_code == 429, limited.text
        assert limited.json()["code"] == "rate_limited"
        assert 1 <= int(limited.headers["Retry-After"]) <= 60
