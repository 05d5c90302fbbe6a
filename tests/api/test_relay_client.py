"""The relay's HTTP client (api/forward.py `Relay`, issue 18) belongs to the app's Services:
its connections are closed when the app shuts down, and nothing reopens it afterwards."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.api.conftest import run_app


async def test_the_relay_client_is_closed_at_shutdown(tmp_path: Path) -> None:
    async for app in run_app(tmp_path / "home"):
        relay = app.services.relay
        client = relay.client()  # as the first relayed request opens it
        assert relay.client() is client and not client.is_closed
    assert client.is_closed and relay.closed
    with pytest.raises(httpx.TransportError):  # a late relay is refused, not a new client
        relay.client()
