"""The frames of `GET /v1/events` as models (docs/api.md §6), for the OpenAPI document only.

The stream builds its bytes directly (api/stream.py); these models describe each `data:`
JSON so generated clients get types, discriminated on `kind` and, inside an `event` frame,
on the protocol Event's `event` tag. New protocol events join through `core.protocol.Event`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, RootModel

from c2.core.protocol.events import Event
from c2.core.protocol.state import SessionSnapshot


class SessionsFrame(BaseModel):
    """The welcome frame (`id:` = `through`): the first page of the session list (newest
    first), as of event sequence `through`; `GET /v1/sessions?cursor=` with `next_cursor`
    reads the rest (null: the page holds every session)."""

    kind: Literal["sessions"]
    sessions: list[SessionSnapshot]
    through: int
    next_cursor: str | None


class EventFrame(BaseModel):
    """One protocol event; its SSE `id:` is the event's sequence (resume position)."""

    kind: Literal["event"]
    event: StreamEvent


class ResyncFrame(BaseModel):
    """The resume position cannot be replayed; a `sessions` frame follows: rebuild state."""

    kind: Literal["resync"]
    reason: str


class SessionsErrorFrame(BaseModel):
    """The session list could not be read; keep the last good list. The stream then ends."""

    kind: Literal["sessions_error"]
    message: str


class StreamEvent(RootModel[Event]):
    """Any protocol event, discriminated on `event`."""


class StreamFrame(
    RootModel[
        Annotated[
            SessionsFrame | EventFrame | ResyncFrame | SessionsErrorFrame,
            Field(discriminator="kind"),
        ]
    ]
):
    """One `data:` JSON of the event stream, discriminated on `kind`."""


EventFrame.model_rebuild()
