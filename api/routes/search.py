"""Search across every session (issue 15, part 1): `GET /v1/search`, a `read` route.

The query syntax and the meaning of each hit field are core/search/ (README "Search").
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from c2.api.authn import ServicesDep, current_device
from c2.api.openapi import Responses
from c2.api.scopes import needs
from c2.core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["search"], dependencies=[Depends(current_device)])


class SearchHit(BaseModel):
    session: str
    transcript_seq: int | None = Field(
        description="the row of the hit (a message's first row; a tool call's row as the "
        "transcript page shows it); null for a session title"
    )
    before: int | None = Field(
        description="`before` for GET /v1/sessions/{id}/transcript whose page holds the row "
        "(null: the newest page)"
    )
    kind: Literal["prompt", "text", "thought", "tool_call", "title"]
    snippet: str = Field(description="plain text; each match wrapped in <mark>…</mark>")


class SearchResults(BaseModel):
    kind: Literal["search"]
    hits: list[SearchHit]
    next_cursor: str | None


_OK: Responses = {200: {"model": SearchResults, "description": "OK"}}


@router.get(
    "/search",
    responses=_OK,
    openapi_extra=needs(Scope.READ),
)
async def search(
    services: ServicesDep,
    q: Annotated[
        str | None,
        Query(
            max_length=500,
            description='words (all must occur), "a phrase", a OR b, -word (must not occur), '
            "prefix*; OR binds tighter than the implicit AND",
        ),
    ] = None,
    session: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    limit: Annotated[int | None, Query(ge=1, le=100, description="hits per page (20)")] = None,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
) -> JSONResponse:
    """Full-text search over prompts, agent text, thoughts, tool-call titles and session
    titles of every session, ranked, with highlighted snippets."""
    return JSONResponse(await services.search.search(q, session, limit, cursor))
