"""Per-turn diffs of a session's working tree (issue 14); logic in core/checkpoints.py. Rewind
and fork are op routes (api/routes/ops.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse

from c2.api.authn import ServicesDep, current_device
from c2.api.openapi import Responses
from c2.api.scopes import needs
from c2.core.checkpoints import DiffResult
from c2.core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["checkpoints"], dependencies=[Depends(current_device)])
SessionPath = Annotated[str, Path(min_length=1, max_length=128, description="Session id")]
TurnPath = Annotated[int, Path(ge=1, le=2**31, description="Turn number, from 1")]


def _ok(model: type[DiffResult]) -> Responses:
    return {200: {"model": model, "description": "OK"}}


@router.get(
    "/sessions/{session_id}/turns/{turn}/diff",
    responses=_ok(DiffResult),
    openapi_extra=needs(Scope.READ),
)
async def turn_diff(session_id: SessionPath, turn: TurnPath, services: ServicesDep) -> JSONResponse:
    """The net change of one turn; a running turn's is so far (`running: true`)."""
    diff = await services.engine.checkpoints.turn_diff(session_id, turn)
    return JSONResponse(diff.model_dump(mode="json"))


@router.get(
    "/sessions/{session_id}/diff",
    responses=_ok(DiffResult),
    openapi_extra=needs(Scope.READ),
)
async def session_diff(session_id: SessionPath, services: ServicesDep) -> JSONResponse:
    """Everything that changed in the working tree since the session's baseline."""
    diff = await services.engine.checkpoints.session_diff(session_id)
    return JSONResponse(diff.model_dump(mode="json"))
