"""Session reads and removals (docs/api.md §4): list, snapshot, delete, worktree, transcript,
preview."""

from __future__ import annotations

import json
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
from c2.core.session_list import DEFAULT_LIMIT, MAX_CURSOR, MAX_LIMIT, decode_cursor

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
async def list_sessions(
    services: ServicesDep,
    limit: Annotated[
        int | None, Query(ge=1, le=MAX_LIMIT, description=f"sessions per page ({DEFAULT_LIMIT})")
    ] = None,
    cursor: Annotated[
        str | None,
        Query(
            min_length=1, max_length=MAX_CURSOR, description="`next_cursor` of the previous page"
        ),
    ] = None,
) -> Response:
    """Active sessions, newest first, a page at a time; a storage failure is a 503
    `sessions_error`, never []."""
    # A bad cursor is the client's mistake (422 invalid_cursor), not a failed list read.
    after = None if cursor is None else decode_cursor(cursor)
    with framed("sessions_error", wrap_unexpected=True):
        page = await services.engine.list_sessions(limit, after)
    body = (
        f'{{"kind":"sessions","sessions":{page.sessions_json()},'
        f'"next_cursor":{json.dumps(page.next_cursor)}}}'
    )
    return Response(body, media_type="application/json")


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
