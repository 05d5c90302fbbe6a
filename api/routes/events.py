"""`GET /v1/events`: the one SSE stream per client (docs/api.md §6).

Authenticates by bearer or single-use ticket, resolves the resume position (`Last-Event-ID`
wins over `?after=`), then hands the connection to an EventStream (frames and the `: ping`
heartbeat) under c2's SSE response (api/sse_response.py: its send loop, the send timeout that
drops a client that stopped reading). The response streams once the request's middlewares and
routing have returned (api/detach.py), so an open stream holds none of them. A device holds at
most `max_streams_per_device` streams (429 past it).
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse

from c2.api.authn import DeviceDep, ServicesDep
from c2.api.errors import TooManyStreamsError
from c2.api.frames import StreamFrame
from c2.api.openapi import Responses
from c2.api.scopes import needs
from c2.api.sse_response import EventStreamResponse
from c2.api.stream import EventStream, StreamSlots
from c2.core.errors import SessionNotFoundError
from c2.core.scopes import Scope as DeviceScope

router = APIRouter(prefix="/v1", tags=["events"])
PATH = "/v1/events"  # the one stream route (api/compression.py leaves it out)
MAX_SEQ = 2**63 - 1

_STREAM: Responses = {
    200: {
        "model": StreamFrame,
        "description": "Server-Sent Events; each `data` is one JSON StreamFrame tagged by `kind`"
        " (`sessions`, `event` with `id: SEQ`, `resync`, `sessions_error`); `: ping` comments"
        " keep the connection alive.",
    }
}


@router.get(
    PATH.removeprefix(router.prefix),
    status_code=200,
    response_class=EventStreamResponse,
    responses=_STREAM,
    openapi_extra=needs(DeviceScope.READ),
)
async def events(
    request: Request,
    services: ServicesDep,
    device: DeviceDep,
    session: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    after: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
    ticket: Annotated[str | None, Query(min_length=1, max_length=512)] = None,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0, le=MAX_SEQ)] = None,
) -> EventSourceResponse:
    """Welcome `sessions` frame, then live events; resume with `Last-Event-ID` or `?after=`."""
    del ticket  # spent and verified by the RequestGuard; declared here for the schema
    slots: StreamSlots = request.app.state.stream_slots
    if slots.full(device.id):
        raise TooManyStreamsError(
            f"this device already has {slots.cap} open event streams", retry_after=5
        )
    resume = last_event_id if last_event_id is not None else after
    if session is not None:  # 404 before the stream starts
        if resume is None:
            await services.engine.get_session(session)
        elif await services.engine.record_of(session) is None:
            # A resume may follow the session past its deletion: the events after the
            # position (session_deleted among them) are still this client's to replay.
            raise SessionNotFoundError("no such session", session=session)
    settings = services.settings
    stream = EventStream(
        feed=services.feed,
        bus=services.bus,
        device_id=device.id,
        session=session,
        after=resume,
        backlog=settings.stream_backlog,
        ping=settings.ping_seconds,
        write_interval=settings.stream_write_interval_ms / 1000,
        slots=slots,
        still_paired=partial(services.auth.is_paired, device.id),
    )
    return EventStreamResponse(
        stream.frames(),
        device_id=device.id,
        write_directly=stream.write_directly,
        ping=0,  # EventStream sends `: ping` itself
        sep="\n",
        send_timeout=settings.send_timeout_seconds,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
