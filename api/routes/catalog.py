"""Read-only catalogs (docs/api.md §4): worktree baselines for a cwd, providers, skills."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from c2.api.authn import ServicesDep, current_device
from c2.api.openapi import Responses
from c2.api.scopes import needs
from c2.core.lifecycle import resolve_cwd
from c2.core.outcomes import BaselineChoice
from c2.core.providers import ProviderInfo
from c2.core.scopes import Scope
from c2.core.skills import SkillInfo

router = APIRouter(prefix="/v1", tags=["catalog"], dependencies=[Depends(current_device)])
Cwd = Annotated[str, Query(min_length=1, max_length=4096, description="A directory path")]


def _list_of(model: type[Any]) -> Responses:
    return {200: {"model": list[model], "description": "OK"}}  # type: ignore[valid-type]


@router.get(
    "/worktree-baselines",
    responses=_list_of(BaselineChoice),
    openapi_extra=needs(Scope.READ),
)
async def worktree_baselines(cwd: Cwd, services: ServicesDep) -> JSONResponse:
    """`current` then `origin_default`, each resolved locally or with its unavailable reason."""
    choices = await services.engine.worktree_baselines(cwd)
    return JSONResponse([c.model_dump(mode="json") for c in choices])


@router.get(
    "/providers",
    responses=_list_of(ProviderInfo),
    openapi_extra=needs(Scope.READ),
)
async def providers(services: ServicesDep) -> JSONResponse:
    """Built-in and custom providers with their launch command and availability."""
    # Availability probes the filesystem (PATH lookups): keep it off the event loop.
    return JSONResponse(jsonable_encoder(await asyncio.to_thread(services.engine.list_providers)))


@router.get(
    "/skills",
    responses=_list_of(SkillInfo),
    openapi_extra=needs(Scope.READ),
)
async def skills(
    services: ServicesDep,
    cwd: Annotated[str | None, Query(min_length=1, max_length=4096)] = None,
) -> JSONResponse:
    """Skills of `$C2_HOME/skills/` and, with `cwd`, the project's `.agents/skills/`;
    422 `invalid_cwd` when `cwd` is not an existing folder (as for every other `cwd`)."""

    def listing() -> Any:
        return services.engine.list_skills(resolve_cwd(cwd) if cwd is not None else None)

    return JSONResponse(jsonable_encoder(await asyncio.to_thread(listing)))
