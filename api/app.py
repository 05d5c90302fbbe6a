"""The app factory: `create_app(settings)` builds the FastAPI app; nothing runs at import time.

Its lifespan starts one Services object, supervises its periodic jobs in a TaskGroup, and on
shutdown drains (ops, engine, streams) before closing the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.lowlevel
from fastapi import Depends, FastAPI
from starlette.middleware.cors import CORSMiddleware

from c2.api.authn import single_valued_query
from c2.api.compression import Compression
from c2.api.detach import Detacher
from c2.api.error_handlers import install_error_handlers
from c2.api.forward import ClusterForwarder
from c2.api.guard import RequestGuard
from c2.api.head import HeadAsGet
from c2.api.hosts import HostAllowlist
from c2.api.media import json_body
from c2.api.openapi import API_VERSION, TITLE, install_openapi, operation_id
from c2.api.routes import (
    auth,
    catalog,
    checkpoints,
    cluster,
    docs,
    events,
    health,
    ops,
    push,
    queue,
    search,
    sessions,
    usage,
    web,
    webhooks,
)
from c2.api.scopes import ScopeTable
from c2.api.services import EngineFactory, Services, default_engine
from c2.api.settings import Settings
from c2.api.stream import StreamSlots


def create_app(settings: Settings, *, engine_factory: EngineFactory = default_engine) -> FastAPI:
    """A new app for `settings`; its Services start with the lifespan."""
    if any(origin.strip() == "*" for origin in settings.allow_origins):
        # A wildcard would let any web page drive the API with a bearer it obtained.
        raise ValueError("--allow-origin '*' is refused: name each origin")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # sse-starlette's first response loads anyio's asyncio backend, on the event loop:
        # every stream and request waited 9-19 ms for the first one after a start. Load it now.
        await anyio.lowlevel.checkpoint()
        services = Services(settings, engine_factory)
        try:
            await services.start()
        except BaseException:
            await services.close()
            raise
        app.state.services = services
        try:
            async with asyncio.TaskGroup() as group:
                housekeeping = group.create_task(services.supervise(), name="c2-housekeeping")
                try:
                    yield
                finally:
                    await services.drain()
                    housekeeping.cancel()
        finally:
            await services.close()

    app = FastAPI(
        title=TITLE,
        version=API_VERSION,
        lifespan=lifespan,
        dependencies=[Depends(single_valued_query), Depends(json_body)],
        docs_url=None,
        openapi_url=None,  # served by api/routes/docs.py
        redoc_url=None,
        generate_unique_id_function=operation_id,
        # A slash redirect builds its Location from the Host header (any Host under
        # --allow-host '*'); c2's routes have one spelling, so none is reflected anywhere.
        redirect_slashes=False,
    )
    app.state.stream_slots = StreamSlots(settings.max_streams_per_device)
    routers = (
        health.router,
        auth.router,
        ops.router,
        sessions.router,
        catalog.router,
        usage.router,
        checkpoints.router,
        queue.router,
        search.router,
        webhooks.router,
        push.router,
        cluster.router,
    )
    for router in (*routers, events.router):
        app.include_router(router)
    # The guard finds a request's route (and its declared scope) among these same routers.
    app.state.scope_table = ScopeTable((*routers, events.router))
    docs.install_docs(app)
    app.include_router(web.router)  # the web client at / (api/routes/web.py)
    app.state.routers = (*routers, events.router, docs.router, web.router)  # a 405's Allow
    install_error_handlers(app)
    # Inside the guard: a request is authenticated and its body bounded before it is relayed.
    app.add_middleware(ClusterForwarder)
    app.add_middleware(RequestGuard, settings=settings)  # inside CORS: preflights pass
    if settings.allow_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.allow_origins),
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
            expose_headers=["Request-Id", "Retry-After", "Idempotent-Replayed"],
            max_age=600,
        )
    app.add_middleware(HostAllowlist, allowed=settings.allow_hosts)
    app.add_middleware(Compression, stream_path=events.PATH)  # api/compression.py
    app.add_middleware(HeadAsGet)  # every layer below sees a HEAD as its GET
    app.add_middleware(Detacher)  # outermost: serves event streams after the chain unwinds
    install_openapi(app)
    build_route_state(app)
    return app


# A path no route has: matching it walks every route of every included router.
_NO_ROUTE = {"type": "http", "method": "GET", "path": "/\x00", "root_path": "", "headers": []}


def build_route_state(app: FastAPI) -> None:
    """Build now what FastAPI builds for each included router's routes on the first request
    that reaches them (its `_EffectiveRouteContext`s: ~50 ms of CPU for c2's routes).

    Built lazily, that cost fell on the event loop: the first request after a start that
    walked past all routes (the web client's `/`, the last router) held every stream and
    request for ~45 ms (bench/startup.py). Here it is part of the build, with what else lives
    as long as the app, and a request only matches."""
    for route in app.router.routes:
        route.matches(dict(_NO_ROUTE))
