"""FastAPI's per-route state is built with the app, not by the first requests after a start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import routing

from c2.api.app import create_app
from tests.conftest import make_settings


async def test_requests_after_a_start_build_no_route_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """FastAPI 0.165 builds an included router's route contexts when a request first reaches
    that router; on the event loop that held every stream ~45 ms after each start (the web
    client's `/` walks past every route). `create_app` builds them all: requests to the first
    router, the last one and a path no route has then build none."""
    built: list[str] = []
    original = routing._EffectiveRouteContext.from_api_route.__func__  # type: ignore[attr-defined]

    def counting(cls: Any, /, *, original_route: routing.APIRoute, **kwargs: Any) -> Any:
        built.append(original_route.path)
        return original(cls, original_route=original_route, **kwargs)

    monkeypatch.setattr(routing._EffectiveRouteContext, "from_api_route", classmethod(counting))
    app = create_app(make_settings(tmp_path / "home"))
    assert "/v1/providers" in built and "/" in built
    built.clear()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/")).status_code == 200
            assert (await http.get("/no-such-route")).status_code == 404
    assert built == []
