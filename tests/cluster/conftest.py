"""Two real `c2 serve --cluster` processes on one PostgreSQL schema (issue 18).

Skipped without C2_TEST_DATABASE_URL, like every PostgreSQL test. The lease is short so lease
expiry is observable in a test; each test gets a fresh schema.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.contract.pg import PG_URL, pg_schema_url
from tests.e2e.harness import REPO, C2Process

LEASE_SECONDS = 2.0
# For tests not about lapses (`long_lease`): with 2 s, a member slowed that long by a loaded
# machine is judged gone, and its peer takes its running turns or claims over, as designed.
LONG_LEASE_SECONDS = 30.0


@dataclass
class Pair:
    url: str  # the database both use
    a: C2Process
    b: C2Process


def member(home: Path, url: str, lease: float = LEASE_SECONDS, **env: str) -> C2Process:
    """A cluster member on `url` (not started); `env` adds or overrides settings."""
    return C2Process(
        home,
        env={
            "C2_DATABASE_URL": url,
            "C2_CLUSTER": "1",
            "C2_CLUSTER_LEASE_SECONDS": str(lease),
            **env,
        },
    )


@pytest.fixture
def cluster_url() -> Iterator[str]:
    if not PG_URL:
        pytest.skip("C2_TEST_DATABASE_URL is not set")
    with pg_schema_url("c2_cluster") as url:
        yield url


@pytest.fixture
def lease_seconds(request: pytest.FixtureRequest) -> float:
    """The pair's lease: short, so lapses are observable, unless the test is `long_lease`."""
    if request.node.get_closest_marker("long_lease") is not None:
        return LONG_LEASE_SECONDS
    return LEASE_SECONDS


@pytest.fixture
def pair(tmp_path: Path, cluster_url: str, lease_seconds: float) -> Iterator[Pair]:
    """Instances A and B, started in that order, with one paired device; stopped (if still
    running) afterwards."""
    a = member(tmp_path / "a", cluster_url, lease_seconds)
    b = member(tmp_path / "b", cluster_url, lease_seconds)
    try:
        a.start()
        b.bearer = a.bearer  # one device, seen by both members (one database)
        b.start()
        yield Pair(cluster_url, a, b)
    finally:
        b.stop()
        a.stop()
        # Captured output: pytest shows it only for a failing test.
        for name, server in (("A", a), ("B", b)):
            print(f"--- member {name} ({server.home.name}) log ---\n{server.log_tail()}")


def pair_device(server: C2Process, name: str) -> tuple[str, str]:
    """A further device paired through `server`'s home: (device id, bearer)."""
    out = subprocess.run(
        [sys.executable, "-m", "c2.api.cli", "pair", "--name", name, "--home", str(server.home)],
        cwd=REPO,
        env=server._env(),
        capture_output=True,
        check=True,
        timeout=30,
        text=True,
    )
    paired = json.loads(out.stdout.strip().splitlines()[-1])
    return str(paired["device_id"]), str(paired["bearer"])
