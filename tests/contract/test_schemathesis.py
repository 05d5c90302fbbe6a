"""Schemathesis over the committed OpenAPI document (SSE route excluded), against the real app.

Every generated request, valid or not, must get a declared status with a conforming body and
never a 500. The committed document equals the app's (tests/api/test_openapi.py), so this
checks both. Bounded: fixed examples per operation, no example database. Built-in providers
point at a missing command so fuzzed sessions never launch a real agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from schemathesis.config._checks import (
    NegativeDataRejectionConfig,
    NotAServerErrorConfig,
    PositiveDataAcceptanceConfig,
)
from schemathesis.python import asgi
from starlette.types import Receive, Scope, Send

from c2.api.app import create_app
from c2.core.auth import create_device
from c2.core.protocol.values import BUILTIN_PROVIDERS
from c2.core.store.database import Store
from tests.conftest import make_settings

MAX_EXAMPLES = 25
COMMITTED = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


class DeferredApp:
    """The ASGI app schemathesis calls; forwards to the app the module fixture builds, so no
    app exists at import time."""

    target: FastAPI | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.target is not None, "the `target` fixture builds the app"
        await self.target(scope, receive, send)


APP = DeferredApp()
_loaded = schemathesis.openapi.from_path(str(COMMITTED))
_loaded.app = APP
schema = _loaded.exclude(path="/v1/events")
schema.config.generation.update(
    max_examples=MAX_EXAMPLES,
    database="none",
    deterministic=True,
    # The bearer is ours to send (below); fuzzing it would only test the fuzzer.
    with_security_parameters=False,
)
# 501 not_implemented and 503 provider_unavailable / capacity / store_unavailable are
# contract answers (docs/api.md §3), not crashes; every other 5xx still fails the run.
schema.config.checks.not_a_server_error = NotAServerErrorConfig(
    expected_statuses=["2xx", "3xx", "4xx", "501", "503"]
)
# The contract itself rejects some schema-valid input on meaning (422 invalid_cwd /
# unknown_provider, 400 transcript cursors; docs/api.md §3-§4), so "valid data is accepted" is off.
schema.config.checks.positive_data_acceptance = PositiveDataAcceptanceConfig(enabled=False)
# An oversized invalid body is refused before it is parsed: 413 payload_too_large is a
# rejection too (docs/security.md).
schema.config.checks.negative_data_rejection = NegativeDataRejectionConfig(
    expected_statuses=[
        "400",
        "401",
        "403",
        "404",
        "405",
        "406",
        "409",
        "413",
        "415",
        "422",
        "428",
        "429",
    ]
)


def _offline_providers(home: Path) -> None:
    tables = "\n".join(
        f'[providers.{name}]\ncommand = "c2-contract-missing-agent"\n' for name in BUILTIN_PROVIDERS
    )
    (home / "providers.toml").write_text(tables, encoding="utf-8")


@dataclass
class Target:
    app: FastAPI
    headers: dict[str, str]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The real app on a temp home, and the bearer of a device paired in its store."""
    home = tmp_path_factory.mktemp("contract-home")
    _offline_providers(home)
    # Every operation is also tried without credentials (ST401, expecting 401): far more
    # failed checks a minute than the failure limiter lets through, which would answer 429.
    # The limiter is tested on its own (tests/unit/test_auth_limiter.py, tests/e2e/test_auth.py).
    settings = make_settings(
        home,
        allow_hosts=("testserver",),
        auth_failures_per_minute=1_000_000,
        auth_failures_per_minute_total=1_000_000,
    )
    store = Store(settings.database_url)
    try:
        store.migrate()
        paired = store.write_sync(lambda uow: create_device(uow, "schemathesis"))
    finally:
        store.close()
    APP.target = create_app(settings)
    yield Target(APP.target, {"Authorization": f"Bearer {paired.bearer}"})
    asgi.shutdown_lifespans()  # schemathesis keeps an app's lifespan running until asked


@pytest.fixture(autouse=True)
def _relative_paths_off_the_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fuzzed `cwd` values like "." must not resolve to this repository (worktree creation).
    monkeypatch.chdir(tmp_path)


@schema.parametrize()
def test_schemathesis_conformance(case: schemathesis.Case[Any], target: Target) -> None:
    """No 500s, declared statuses and content types, bodies matching their schemas."""
    case.call_and_validate(headers=target.headers)
