"""A session's durable follow-up queue (issue 14 part 3); logic in core/queue.py."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Response
from fastapi.responses import JSONResponse

from api.authn import DeviceDep, ServicesDep, current_device
from api.openapi import Responses, problems
from api.schemas import CorrelatedBody, QueueBody
from api.scopes import needs
from core.protocol import EditQueuedOp, QueueItem, QueuePromptOp, RemoveQueuedOp, ResumeQueueOp
from core.queue import QueueView
from core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["queue"], dependencies=[Depends(current_device)])
SessionPath = Annotated[str, Path(min_length=1, max_length=128, description="Session id")]
ItemPath = Annotated[str, Path(min_length=1, max_length=64, description="Queued prompt id")]
_PROBLEMS = problems(401, 403, 404, 409, 422, 503)


def _ok(model: type[Any], status: int = 200) -> Responses:
    return {status: {"model": model, "description": "OK"}} | _PROBLEMS


def _view() -> Responses:
    return {200: {"model": QueueView, "description": "OK"}} | problems(401, 403, 404, 503)


@router.post(
    "/sessions/{session_id}/queue",
    status_code=201,
    responses=_ok(QueueItem, 201),
    openapi_extra=needs(Scope.OPERATE),
)
async def queue_prompt(
    session_id: SessionPath, body: QueueBody, device: DeviceDep, services: ServicesDep
) -> Response:
    """Append a prompt to the queue; it starts at once when the session is idle and the
    queue is not paused, else after the turns before it end with `end_turn`."""
    op = QueuePromptOp(session=session_id, doc=body.doc, request_id=body.request_id)
    return await services.dispatcher.dispatch(op, device_id=device.id, request_id=body.request_id)


@router.get(
    "/sessions/{session_id}/queue",
    responses=_view(),
    openapi_extra=needs(Scope.READ),
)
async def get_queue(session_id: SessionPath, services: ServicesDep) -> JSONResponse:
    """The waiting prompts in order, and whether (and why) the queue is paused."""
    view = await services.engine.queue.view(session_id)
    return JSONResponse(view.model_dump(mode="json"))


@router.patch(
    "/sessions/{session_id}/queue/{item}",
    responses=_ok(QueueItem),
    openapi_extra=needs(Scope.OPERATE),
)
async def edit_queued(
    session_id: SessionPath,
    item: ItemPath,
    body: QueueBody,
    device: DeviceDep,
    services: ServicesDep,
) -> Response:
    """Replace a waiting prompt's doc (its id and request_id are kept)."""
    op = EditQueuedOp(session=session_id, item=item, doc=body.doc, request_id=body.request_id)
    return await services.dispatcher.dispatch(op, device_id=device.id, request_id=body.request_id)


@router.delete(
    "/sessions/{session_id}/queue/{item}",
    responses=_ok(QueueView),
    openapi_extra=needs(Scope.OPERATE),
)
async def remove_queued(
    session_id: SessionPath,
    item: ItemPath,
    device: DeviceDep,
    services: ServicesDep,
    body: Annotated[CorrelatedBody | None, Body()] = None,
) -> Response:
    """Remove a waiting prompt; answers the queue as it now is."""
    request_id = body.request_id if body else None
    op = RemoveQueuedOp(session=session_id, item=item, request_id=request_id)
    return await services.dispatcher.dispatch(op, device_id=device.id, request_id=request_id)


@router.post(
    "/sessions/{session_id}/queue/resume",
    responses=_ok(QueueView),
    openapi_extra=needs(Scope.OPERATE),
)
async def resume_queue(
    session_id: SessionPath,
    device: DeviceDep,
    services: ServicesDep,
    body: Annotated[CorrelatedBody | None, Body()] = None,
) -> Response:
    """Unpause the queue; its next prompt starts when the session is idle."""
    request_id = body.request_id if body else None
    op = ResumeQueueOp(session=session_id, request_id=request_id)
    return await services.dispatcher.dispatch(op, device_id=device.id, request_id=request_id)
