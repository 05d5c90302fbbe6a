"""Liveness and readiness probes (docs/api.md §0); no auth. (The pairing page is the web client.)"""

from __future__ import annotations

from fastapi import APIRouter

from c2.api.authn import ServicesDep
from c2.api.errors import NotReadyError
from c2.api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health)
async def readyz(services: ServicesDep) -> Health:
    """Migrations ran, the store answers and the server is not shutting down."""
    if not await services.is_ready():
        raise NotReadyError("the server is starting, shutting down, or its store is unavailable")
    return Health(status="ready")
