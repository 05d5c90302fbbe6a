"""Fixtures for engine e2e tests: a real `c2 serve` subprocess and clients of it, on SQLite
(`c2`, `fresh_c2`) or on each store in turn (`store_server`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.contract.pg import STORES, running_server
from tests.e2e.harness import C2Process, Client


@pytest.fixture(scope="module")
def c2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[C2Process]:
    """One server per test module (sessions are independent of each other)."""
    server = C2Process(tmp_path_factory.mktemp("c2home"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=STORES, scope="module")
def store_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[C2Process]:
    """One server per store for the module: SQLite, then PostgreSQL (skipped without
    C2_TEST_DATABASE_URL, else in a schema of its own); tests keep to sessions of their own."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    home = tmp_path_factory.mktemp(f"c2{name}") / "home"
    with running_server(request.param, home, f"c2_{name}") as server:
        yield server


@pytest.fixture
async def store_client(store_server: C2Process) -> AsyncIterator[Client]:
    c = Client(store_server)
    yield c
    await c.aclose()


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
