"""Fixtures for tests with real coding agents: the fake model, one real c2 server for the
package (with `claude_code` and `opencode` pointed at the fake model; each test has its own
session and project folder), clients and an event stream.

Skips (with the reason) only when node or the npm-installed agents are absent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import C2Process, Client, EventReader
from tests.fakemodel.server import FakeModel
from tests.realagents.agents import missing_reason, write_providers


@pytest.fixture(scope="package")
def fake_model() -> Iterator[FakeModel]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(f"real agents unavailable: {reason}")
    model = FakeModel().start()
    yield model
    model.stop()


@pytest.fixture(scope="package")
def c2(tmp_path_factory: pytest.TempPathFactory, fake_model: FakeModel) -> Iterator[C2Process]:
    """One server for every real-agent test; the agents' throwaway homes live beside it."""
    root = tmp_path_factory.mktemp("realagents")
    server = C2Process(root / "c2home")
    write_providers(server.home, root / "agent-homes", fake_model)
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def client(c2: C2Process) -> AsyncIterator[Client]:
    c = Client(c2)
    yield c
    await c.aclose()


@pytest.fixture
async def stream(client: Client) -> AsyncIterator[EventReader]:
    """An open `GET /v1/events` past its welcome frame."""
    async with EventReader(client) as s:
        await s.frame()
        yield s


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
