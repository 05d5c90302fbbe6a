"""The relay's HTTP client (api/relay.py `Relay`, issue 18) belongs to the app's Services:
its connections are closed when the app shuts down, and nothing reopens it afterwards. It is
one client, built on a worker thread (its TLS context is ~55 ms of CPU)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from c2.api.relay import Relay, RelayClosedError
from tests.api.conftest import run_app

ROOT = Path(__file__).resolve().parents[2]


async def test_the_relay_client_is_closed_at_shutdown(tmp_path: Path) -> None:
    async for app in run_app(tmp_path / "home"):
        relay = app.services.relay
        client = await relay.client()  # as the first relayed request opens it
        assert await relay.client() is client and not client.is_closed
    assert client.is_closed and relay.closed
    with pytest.raises(RelayClosedError):  # a late relay is refused, not a new client
        await relay.client()


async def test_first_relays_at_once_share_one_client_built_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
):
    built_on: list[str] = []
    real_init = httpx.AsyncClient.__init__

    def recording(self: httpx.AsyncClient, *args: object, **kwargs: object) -> None:
        built_on.append(threading.current_thread().name)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.AsyncClient, "__init__", recording)
    relay = Relay()
    clients = await asyncio.gather(*(relay.client() for _ in range(5)))
    assert len({id(c) for c in clients}) == 1
    assert len(built_on) == 1 and built_on[0] != threading.current_thread().name
    await relay.aclose()
    assert clients[0].is_closed
    with pytest.raises(RelayClosedError, match="closed"):
        await relay.client()


async def test_a_close_during_the_first_build_leaves_no_client_open():
    relay = Relay()
    first = asyncio.create_task(relay.client())
    await asyncio.sleep(0)  # the build is under way on its thread
    await relay.aclose()
    client = await first  # built before the close took the lock: the close closed it
    assert client.is_closed
    with pytest.raises(RelayClosedError):
        await relay.client()


def test_a_closed_relays_problem_imports_no_http_client() -> None:
    """A member refusing relays as it shuts down may never have built a client: the 503 it
    answers names the owner and does not import httpx on the loop to say so."""
    probe = (
        "import sys\n"
        "from c2.api.relay import Owner, RelayClosedError, unreachable\n"
        "err = unreachable(Owner('m1', 'http://127.0.0.1:1'), RelayClosedError('closed'), 5)\n"
        "print(err.details['owner'], err.retry_after, 'httpx' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["m1", "5", "False"]
