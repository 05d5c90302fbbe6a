"""c2's HTTP/1.1 connection: uvicorn's h11 protocol with a deadline for each request head and
body, a bound on the head's size however it arrives, and a direct body writer for event streams.

h11's `max_incomplete_event_size` bounds only a head still arriving: a head that came whole in
one read was parsed whatever its size. `BoundedHeadConnection` measures every parsed head
against the same bound (uvicorn answers the RemoteProtocolError with its 400). The body
deadline closes a connection whose request body (read or not: the guard leaves an
unauthenticated one unread, and uvicorn drops what arrives after the response) is not complete
within `header_timeout` of its head, so a slow body holds a connection no longer than a slow
head does.

The body writer is an ASGI extension (`scope["extensions"][CHUNK_WRITER]`): a plain function
that frames one chunk of a streaming body and hands it to the socket, beside the ASGI `send`
chain. Through that chain every SSE write went through each middleware's send wrapper, uvicorn's
checks and h11's state machine — per write several times the cost of the write itself, paid for
every client on every batch of frames (bench/fleet.py). It writes only where that is what
`send` would write: a response already started, not complete, chunked (HTTP/1.1, no
Content-Length: h11's framing, `SIZE CRLF DATA CRLF`), and a socket taking data without
back-pressure; otherwise it returns False and the caller sends through the chain, which waits
for the socket to drain. The start and the end of the response always go through the chain,
so middlewares still see both; none of c2's touches a body in between.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

__all__ = ["CHUNK_WRITER", "BoundedHeadConnection", "ChunkWriter", "HeadDeadlineProtocol"]

CHUNK_WRITER = "c2.chunk_writer"
# What a body that missed its deadline is told before the connection closes.
_TIMEOUT_BODY = b"the request body did not arrive in time"


def head_size(request: h11.Request) -> int:
    """The bytes of `request`'s head on the wire, at least (optional whitespace aside):
    `METHOD SP TARGET SP HTTP/x.y CRLF`, a `NAME: VALUE CRLF` per header, CRLF."""
    line = len(request.method) + len(request.target) + len(request.http_version) + 9
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers) + 2


class BoundedHeadConnection(h11.Connection):
    """An h11 server connection that refuses a request head over `max_incomplete_event_size`
    bytes even when the whole head arrived in one piece."""

    def __init__(self, max_head: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head)
        self.max_head = max_head

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        event = super().next_event()
        if type(event) is h11.Request and head_size(event) > self.max_head:
            # uvicorn's H11Protocol answers this with a 400 and closes the connection.
            raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
        return event


class ChunkWriter:
    """Writes one chunk of the response body of `cycle` straight to its socket."""

    __slots__ = ("_chunked", "_cycle")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = cycle
        # h11 frames a body without Content-Length in chunks to an HTTP/1.1 client; to an
        # HTTP/1.0 one it writes the bytes bare and closes. Only the first is done here.
        self._chunked = cycle.scope["http_version"] == "1.1" and cycle.scope["method"] != "HEAD"

    def __call__(self, body: bytes) -> bool:
        """Write `body` (not empty: a zero-size chunk ends the body); False when it must go
        through the ASGI `send` instead (not a chunked body in progress, or the socket pushes
        back and the write must wait for it)."""
        cycle = self._cycle
        if cycle.disconnected:
            return True  # as `send` does: what a gone client would have read is dropped
        # h11's SEND_BODY: the head went out and the end has not (uvicorn sends the end in the
        # same step as it marks the response complete).
        if (
            not self._chunked
            or not body
            or cycle.flow.write_paused
            or cycle.conn.our_state is not h11.SEND_BODY
        ):
            return False
        cycle.transport.write(b"%x\r\n%b\r\n" % (len(body), body))
        return True

    def unsent(self) -> int:
        """Bytes written and not yet taken by the client's socket (its send buffer aside)."""
        return self._cycle.transport.get_write_buffer_size()


class HeadDeadlineProtocol(H11Protocol):
    """h11 with a deadline for each request head and body: a connection that stays silent,
    or sends its headers or its body too slowly (slowloris), is closed instead of holding a
    descriptor forever. Heads are bounded in size however they arrive. Each request's scope
    carries the connection's ChunkWriter."""

    header_timeout: float = 10.0
    _head_deadline: asyncio.TimerHandle | None = None
    _body_deadline: asyncio.TimerHandle | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        max_head = self.config.h11_max_incomplete_event_size
        if max_head is not None:  # c2's server sets it (api/server.py, MAX_HEADER_BYTES)
            self.conn = BoundedHeadConnection(max_head)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        self._disarm_body_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.conn.their_state
        super().handle_events()
        state = self.conn.their_state
        if state is not h11.IDLE:
            self._disarm_head_deadline()  # a whole head arrived: the request is the app's now
        elif before is not h11.IDLE and not self.transport.is_closing():
            # A body that ended after its response: the next head gets its whole time.
            self._arm_head_deadline()
        if state is h11.SEND_BODY:
            if self._body_deadline is None:  # from the head's end to the body's
                self._body_deadline = self.loop.call_later(self.header_timeout, self._body_overdue)
        else:
            self._disarm_body_deadline()
        cycle = getattr(self, "cycle", None)
        if cycle is not None:
            # The request's task was created above but has not run yet: it sees this.
            extensions = cycle.scope.setdefault("extensions", {})
            if CHUNK_WRITER not in extensions:
                extensions[CHUNK_WRITER] = ChunkWriter(cycle)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()  # the next request on this connection gets a deadline too

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(self.header_timeout, self._head_overdue)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_overdue(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def _disarm_body_deadline(self) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None

    def _body_overdue(self) -> None:
        self._body_deadline = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        cycle = getattr(self, "cycle", None)
        if cycle is not None and not cycle.response_started:
            # Nothing answered yet: say why before closing. The app, waiting for the body,
            # sees a disconnect, and whatever it answers is dropped (as for a gone client).
            cycle.disconnected = True
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", b"%d" % len(_TIMEOUT_BODY)),
                (b"connection", b"close"),
            ]
            for event in (
                h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"),
                h11.Data(data=_TIMEOUT_BODY),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event) or b"")
        self.transport.close()
