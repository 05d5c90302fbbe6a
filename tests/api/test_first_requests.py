"""What the first requests after a start would build or load on the event loop, holding every
stream and request meanwhile, is done while the server starts instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import routing

from c2.api.app import create_app
from tests.conftest import make_settings
from tests.loop_turns import in_fresh_interpreter


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


# In a fresh interpreter: in this one anyio's backend is loaded already.
BACKEND_AT_START = """
    import asyncio
    import sys
    import tempfile
    from pathlib import Path

    from c2.api.app import create_app
    from tests.conftest import make_settings

    BACKEND = "anyio._backends._asyncio"


    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            app = create_app(make_settings(Path(tmp) / "home"))
            before = BACKEND in sys.modules
            async with app.router.lifespan_context(app):
                print(before, BACKEND in sys.modules)


    asyncio.run(main())
    """


def test_anyio_backend_is_loaded_as_the_server_starts():
    """sse-starlette's first response (a Lock in its constructor) imports anyio's asyncio
    backend, on the event loop: the first event stream after a start held every other stream
    and request 9-19 ms (bench/startup.py). The app's start loads it, before anyone is served."""
    assert in_fresh_interpreter(BACKEND_AT_START).split() == ["False", "True"]
