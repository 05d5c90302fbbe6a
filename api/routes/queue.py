"""A session's durable follow-up queue (issue 14 part 3); logic in core/queue.py. Appending,
editing, removing and resuming are op routes (api/routes/ops.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse

from c2.api.authn import ServicesDep, current_device
from c2.api.openapi import Responses
from c2.api.scopes import needs
from c2.core.queue import QueueView
from c2.core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["queue"], dependencies=[Depends(current_device)])
SessionPath = Annotated[str, Path(min_length=1, max_length=128, description="Session id")]


def _ok(model: type[Any], status: int = 200) -> Responses:
    return {status: {"model": model, "description": "OK"}}


@router.get(
    "/sessions/{session_id}/queue",
    responses=_ok(QueueView),
    openapi_extra=needs(Scope.READ),
)
async def get_queue(session_id: SessionPath, services: ServicesDep) -> JSONResponse:
    """The waiting prompts in order, and whether (and why) the queue is paused."""
    view = await services.engine.queue.view(session_id)
    return JSONResponse(view.model_dump(mode="json"))
