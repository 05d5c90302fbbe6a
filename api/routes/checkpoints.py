"""Per-turn diffs and rewind of a session's working tree (issue 14); logic in core/checkpoints."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse

from api.authn import DeviceDep, ServicesDep, current_device
from api.openapi import Responses, problems
from api.schemas import ForkBody, RewindBody
from api.scopes import needs
from core.checkpoints import DiffResult, RewindResult
from core.protocol import ForkOp, RewindOp, SessionSnapshot
from core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["checkpoints"], dependencies=[Depends(current_device)])
SessionPath = Annotated[str, Path(min_length=1, max_length=128, description="Session id")]
TurnPath = Annotated[int, Path(ge=1, le=2**31, description="Turn number, from 1")]


def _ok(model: type[DiffResult | RewindResult | SessionSnapshot], status: int = 200) -> Responses:
    return {status: {"model": model, "description": "OK"}}


@router.get(
    "/sessions/{session_id}/turns/{turn}/diff",
    responses=_ok(DiffResult) | problems(401, 403, 404, 409, 422, 503),
    openapi_extra=needs(Scope.READ),
)
async def turn_diff(session_id: SessionPath, turn: TurnPath, services: ServicesDep) -> JSONResponse:
    """The net change of one turn; a running turn's is so far (`running: true`)."""
    diff = await services.engine.checkpoints.turn_diff(session_id, turn)
    return JSONResponse(diff.model_dump(mode="json"))


@router.get(
    "/sessions/{session_id}/diff",
    responses=_ok(DiffResult) | problems(401, 403, 404, 409, 503),
    openapi_extra=needs(Scope.READ),
)
async def session_diff(session_id: SessionPath, services: ServicesDep) -> JSONResponse:
    """Everything that changed in the working tree since the session's baseline."""
    diff = await services.engine.checkpoints.session_diff(session_id)
    return JSONResponse(diff.model_dump(mode="json"))


@router.post(
    "/sessions/{session_id}/rewind",
    responses=_ok(RewindResult) | problems(401, 403, 404, 409, 422, 503),
    openapi_extra=needs(Scope.OPERATE),
)
async def rewind(
    session_id: SessionPath, body: RewindBody, device: DeviceDep, services: ServicesDep
) -> Response:
    """Restore the working tree to the state after a turn, or to any session checkpoint."""
    op = RewindOp(
        session=session_id,
        to_turn=body.to_turn,
        to_checkpoint=body.to_checkpoint,
        force=body.force,
        request_id=body.request_id,
    )
    return await services.dispatcher.dispatch(op, device_id=device.id, request_id=body.request_id)


@router.post(
    "/sessions/{session_id}/fork",
    status_code=201,
    responses=_ok(SessionSnapshot, 201) | problems(401, 403, 404, 409, 422, 503),
    openapi_extra=needs(Scope.OPERATE),
)
async def fork_session(
    session_id: SessionPath, body: ForkBody, device: DeviceDep, services: ServicesDep
) -> Response:
    """A new session continuing this one from a turn; 201 with the child's snapshot."""
    op = ForkOp(
        session=session_id,
        at_turn=body.at_turn,
        use_worktree=body.use_worktree,
        request_id=body.request_id,
    )
    return await services.dispatcher.dispatch(op, device_id=device.id, request_id=body.request_id)
