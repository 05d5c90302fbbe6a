"""Session reads and removals (docs/api.md §4): list, snapshot, delete, worktree, transcript,
preview."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.responses import JSONResponse

from c2.api.authn import ServicesDep, current_device
from c2.api.errors import framed
from c2.api.openapi import Responses
from c2.api.schemas import PreviewBody, SessionList
from c2.api.scopes import needs
from c2.core.outcomes import PromptPreview, TranscriptPage, WorktreeDiscarded
from c2.core.protocol.state import SessionSnapshot
from c2.core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["sessions"], dependencies=[Depends(current_device)])
SessionPath = Annotated[str, Path(min_length=1, max_length=128, description="Session id")]
Seq = Annotated[int | None, Query(ge=-(2**53), le=2**53)]


def _model(model: type[Any]) -> Responses:
    return {200: {"model": model, "description": "OK"}}


@router.get(
    "/sessions",
    responses=_model(SessionList),
    openapi_extra=needs(Scope.READ),
)
async def list_sessions(services: ServicesDep) -> JSONResponse:
    """Active sessions, newest first; a storage failure is a 503 `sessions_error`, never []."""
    with framed("sessions_error", wrap_unexpected=True):
        sessions = await services.engine.list_sessions()
    return JSONResponse({"kind": "sessions", "sessions": [s.wire() for s in sessions]})


@router.get(
    "/sessions/{session_id}",
    responses=_model(SessionSnapshot),
    openapi_extra=needs(Scope.READ),
)
async def get_session(session_id: SessionPath, services: ServicesDep) -> JSONResponse:
    """One session's snapshot (archived sessions included)."""
    snapshot = await services.engine.get_session(session_id)
    return JSONResponse(snapshot.wire())


@router.delete(
    "/sessions/{session_id}",
    status_code=204,
    response_class=Response,
    openapi_extra=needs(Scope.OPERATE),
)
async def delete_session(session_id: SessionPath, services: ServicesDep) -> Response:
    """Cancel a running turn, end the agent's process group and archive the session."""
    await services.engine.delete_session(session_id)
    return Response(status_code=204)


@router.delete(
    "/sessions/{session_id}/worktree",
    responses=_model(WorktreeDiscarded),
    openapi_extra=needs(Scope.OPERATE),
)
async def discard_worktree(session_id: SessionPath, services: ServicesDep) -> JSONResponse:
    """Remove the session's checkout and branch (refused while a turn runs)."""
    discarded = await services.engine.discard_worktree(session_id)
    return JSONResponse(discarded.model_dump(mode="json"))


@router.get(
    "/sessions/{session_id}/transcript",
    responses=_model(TranscriptPage),
    openapi_extra=needs(Scope.READ),
)
async def transcript(
    session_id: SessionPath,
    services: ServicesDep,
    before: Seq = None,
    limit: Seq = None,
    request_id: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
) -> JSONResponse:
    """A page of complete user turns, newest last; `before` must be a user row's seq."""
    with framed("transcript_error", session=session_id, request_id=request_id):
        page = await services.engine.transcript_page(session_id, before, limit, request_id)
    return JSONResponse(page.wire())


@router.post(
    "/sessions/{session_id}/prompt-preview",
    responses=_model(PromptPreview),
    openapi_extra=needs(Scope.OPERATE),
)
async def prompt_preview(
    session_id: SessionPath, body: PreviewBody, services: ServicesDep
) -> JSONResponse:
    """Compile a document exactly as a real prompt would, without running it."""
    preview = await services.engine.prompt_preview(session_id, body.doc)
    return JSONResponse(preview.model_dump(mode="json"))
