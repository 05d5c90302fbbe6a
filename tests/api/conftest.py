"""In-process app fixtures: the real app and engine behind httpx.ASGITransport (no sockets).

The lifespan runs for real (migrations, writer thread, engine recovery); each test gets its
own temp home and SQLite database, and a paired bearer.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from fastapi import FastAPI

from c2.api.app import create_app
from c2.api.openapi import document
from c2.api.services import EngineFactory, Services, default_engine
from c2.core.auth import create_device
from tests.conftest import make_settings


@dataclass
class AppClient:
    app: FastAPI
    http: httpx.AsyncClient
    device_id: str
    transport: httpx.ASGITransport
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    @property
    def services(self) -> Services:
        services: Services = self.app.state.services
        return services

    async def as_device(self, name: str) -> httpx.AsyncClient:
        """A client authenticated as a newly paired device."""
        paired = await self.services.store.write(lambda uow: create_device(uow, name))
        client = httpx.AsyncClient(
            transport=self.transport,
            base_url="http://localhost",
            headers={"Authorization": f"Bearer {paired.bearer}"},
            event_hooks={"response": [DeclaredCodes(self.app)]},
        )
        return await self.stack.enter_async_context(client)

    async def logged_events(self) -> list[dict[str, Any]]:
        """Every event in the durable log, decoded, oldest first."""
        rows = await self.services.store.read(lambda r: r.events.after(0, limit=100_000))
        return [json.loads(row.payload) for row in rows]


class DeclaredCodes:
    """An httpx response hook: a problem answered by a published operation at a status it
    declares must carry one of the `code`s that response enumerates (a generated client
    parses it into that enum). Every request of the in-process tests is checked."""

    _doc: ClassVar[dict[str, Any]] = {}  # every app publishes the same document: built once

    def __init__(self, app: FastAPI) -> None:
        if "doc" not in self._doc:
            self._doc["doc"] = document(app)
        doc = self._doc["doc"]
        schemas = doc["components"]["schemas"]
        self.routes: list[tuple[str, re.Pattern[str], dict[str, list[str]]]] = []
        for path, item in doc["paths"].items():
            pattern = re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)) + "$")
            for method, op in item.items():
                enums = {
                    status: schemas[ref.rsplit("/", 1)[-1]]["properties"]["code"].get("enum", [])
                    for status, response in op["responses"].items()
                    if status != "default" and (ref := _problem_ref(response)) is not None
                }
                self.routes.append((method.upper(), pattern, enums))
        self.checked = 0

    async def __call__(self, response: httpx.Response) -> None:
        if response.headers.get("content-type") != "application/problem+json":
            return
        await response.aread()
        request = response.request
        for method, pattern, enums in self.routes:
            if method == request.method and pattern.match(request.url.path):
                allowed = enums.get(str(response.status_code))
                code = response.json()["code"]
                assert allowed is None or code in allowed, (
                    f"{request.method} {request.url.path} answered {response.status_code} "
                    f"{code!r}, not among its declared codes {allowed}"
                )
                self.checked += 1
                return


def _problem_ref(response: dict[str, Any]) -> str | None:
    media = response.get("content", {}).get("application/problem+json")
    return None if media is None else str(media["schema"]["$ref"])


async def run_app(
    home: Path, engine_factory: EngineFactory = default_engine, **overrides: Any
) -> AsyncIterator[AppClient]:
    """Start the app's lifespan and yield a client for it; everything closes afterwards."""
    app = create_app(make_settings(home, **overrides), engine_factory=engine_factory)
    async with app.router.lifespan_context(app):
        services: Services = app.state.services
        paired = await services.store.write(lambda uow: create_device(uow, "tests"))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://localhost",
            headers={"Authorization": f"Bearer {paired.bearer}"},
            event_hooks={"response": [DeclaredCodes(app)]},
        ) as http:
            client = AppClient(app, http, paired.device_id, transport)
            async with client.stack:
                yield client


@pytest.fixture
async def app_client(tmp_path: Path) -> AsyncIterator[AppClient]:
    """The real app with a paired bearer, over ASGITransport."""
    async for client in run_app(tmp_path / "home"):
        yield client
