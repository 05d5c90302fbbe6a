"""Fixtures for engine e2e tests: a real `c2 serve` subprocess and clients of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import C2Process, Client


@pytest.fixture(scope="module")
def c2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[C2Process]:
    """One server per test module (sessions are independent of each other)."""
    server = C2Process(tmp_path_factory.mktemp("c2home"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fresh_c2(tmp_path: Path) -> Iterator[C2Process]:
    """A server of this test's own, for restart and shutdown tests."""
    server = C2Process(tmp_path / "home")
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def client(c2: C2Process) -> AsyncIterator[Client]:
    c = Client(c2)
    yield c
    await c.aclose()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
