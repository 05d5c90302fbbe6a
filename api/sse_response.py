"""The event stream's HTTP response: sse-starlette's, with c2's own send loop and send timeout.

What an idle stream holds is kept small, each batch of frames goes straight to the socket where
the connection allows it (api/http11.py), and a client that stops reading is dropped after the
send timeout with one log line, no traceback (`UnfinishedStreamFilter` keeps uvicorn's own line
about it out of the log). The route is api/routes/events.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextvars import ContextVar
from functools import partial

import anyio
from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message, Receive, Scope, Send

from c2.api.detach import DETACH
from c2.api.head import HEAD_REQUEST
from c2.api.http11 import CHUNK_WRITER, ChunkWriter

__all__ = ["UNFINISHED", "EventStreamResponse", "UnfinishedStreamFilter"]

log = logging.getLogger(__name__)
# Set in the connection's task when its stream was dropped for a send timeout: the server's
# "returned without completing response" line for it is then redundant (UnfinishedStreamFilter).
_DROPPED: ContextVar[bool] = ContextVar("c2_stream_dropped", default=False)
UNFINISHED = "ASGI callable returned without completing response."


class EventStreamResponse(EventSourceResponse):
    """sse-starlette's response, dropping a client that stops reading quietly.

    The send timeout is one watchdog timer per stream, armed when a send starts with none
    armed, instead of sse-starlette's cancel scope (and timer) around every send: with one
    send per batch of frames to every client, that scope was a large share of the stream's
    CPU (bench/fleet.py). A send still blocked `send_timeout` seconds after it started is
    cancelled and the client dropped, unless the client took some of what waits for it
    meanwhile: a slow link that reads on through a burst (one catch-up batch can take longer
    than the timeout to drain) is not a client that stopped reading.
    """

    media_type = "text/event-stream"  # read by the OpenAPI generator from the class

    def __init__(
        self,
        *args: object,
        device_id: str,
        write_directly: Callable[[ChunkWriter], None] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # sse-starlette's lock keeps its pinger's sends apart from the frames'; c2 runs no
        # pinger (EventStream sends the pings among the frames), and the lock's queue was
        # held by every idle stream.
        del self._send_lock
        self.device_id = device_id
        # Hands the stream the socket writer, for live batches (api/stream.py).
        self._write_directly = write_directly
        self._sending_since: float | None = None  # loop time the current send started
        self._sender: asyncio.Task[object] | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._overdue = False
        self._writer: ChunkWriter | None = None  # the socket's, to see the client reading
        self._unsent = 0  # bytes waiting for the client when the send's window started

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        timeout = self.send_timeout
        if timeout is None:
            await send(message)
            return
        loop = asyncio.get_running_loop()
        self._sender = asyncio.current_task()
        self._sending_since = started = loop.time()
        self._unsent = self._writer.unsent() if self._writer is not None else 0
        if self._watchdog is None:
            self._watchdog = loop.call_at(started + timeout, self._watch)
        try:
            await send(message)
        except asyncio.CancelledError:
            if not self._overdue:
                raise
            self._overdue = False
            if self._sender is not None:
                self._sender.uncancel()  # our own cancellation, turned into the timeout
            raise SendTimeoutError() from None
        finally:
            self._sending_since = None

    async def _respond(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream the frames in a task of their own, ended when the client disconnects.

        The frames run in their own task because a stream wakes once per batch, and each wake
        resumes its task's whole chain of awaits: in the request's task that is the server
        and the app's outer layers above the detached response (api/detach.py), 9 coroutines
        deep (~30 before it detached), against ~5 in a task of its own (bench/fleet.py). The
        request's task waits for it once.

        sse-starlette runs a task group of four tasks per stream for this (frames, ping,
        shutdown signal, disconnect). c2 sends its own pings, and ends its streams at shutdown
        itself (Services.drain; its signal hook is disabled in api/server.py), so the frames
        need only a disconnect watcher: one task, not a group of three with their events and
        cancel scopes, a third of an idle stream's memory (bench/events.py)."""
        pump = asyncio.create_task(
            self._stream_response(send, scope.get("extensions", {}).get(CHUNK_WRITER))
        )
        gone = False

        async def watch() -> None:
            nonlocal gone
            with contextlib.suppress(Exception):  # a receive that fails: the client is gone too
                await self._listen_for_disconnect(receive)
            if not pump.done():
                gone = True
                pump.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await pump
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not gone or (task is not None and task.cancelling() > 0):
                raise  # not (only) the disconnect's: the server cancels the request
        finally:
            watcher.cancel()

    async def _stream_response(self, send: Send, write: ChunkWriter | None = None) -> None:
        """sse-starlette's loop, except that a frame is let go once it is sent, and goes
        straight to the socket through the server's `write` where it can (api/http11.py).

        Its loop kept the last frame in local variables while the stream waited for the next
        one: every idle stream held its welcome frame (a page of 50 sessions, ~23 KB) until its
        first ping, or its last catch-up batch, for as long as it stayed idle
        (bench/events.py)."""
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        self._writer = write
        if write is not None and self._write_directly is not None:
            self._write_directly(write)
        frames = aiter(self.body_iterator)
        while True:
            try:
                frame = await anext(frames)
            except StopAsyncIteration:
                break
            if write is not None and isinstance(frame, bytes) and write(frame):
                del frame
                continue
            try:
                message = {"type": "http.response.body", "body": frame, "more_body": True}
                del frame
                await self._send_with_timeout(send, message)
                del message
            except BaseException:
                await self._close_frames()
                raise
        self.active = False
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _close_frames(self) -> None:
        """Close the frame generator (suspended at a yield) so its cleanup runs before a send's
        failure escapes, within sse-starlette's cleanup timeout."""
        aclose = getattr(self.body_iterator, "aclose", None)
        if aclose is None:
            return
        with anyio.move_on_after(self._cleanup_timeout, shield=True) as scope:
            try:
                await aclose()
            except Exception:
                log.exception("could not close an event stream's frames after a failed send")
        if scope.cancel_called:
            log.warning("closing an event stream's frames took over %g s", self._cleanup_timeout)

    def _watch(self) -> None:
        """Cancel a send blocked for `send_timeout`; re-arm for one still within it."""
        self._watchdog = None
        started, timeout = self._sending_since, self.send_timeout
        if started is None or timeout is None or self._sender is None:
            return  # idle: the next send arms the watchdog again
        loop = asyncio.get_running_loop()
        if loop.time() - started >= timeout:
            unsent = self._writer.unsent() if self._writer is not None else 0
            if unsent < self._unsent:  # the client took some: a new window from now
                self._sending_since, self._unsent = loop.time(), unsent
                self._watchdog = loop.call_at(loop.time() + timeout, self._watch)
                return
            self._overdue = True
            self._sender.cancel()
        else:
            self._watchdog = loop.call_at(started + timeout, self._watch)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get(HEAD_REQUEST):  # a HEAD run as GET (api/head.py): headers only
            scope = {**scope, "method": "HEAD"}
        detach = scope.get(DETACH)
        if detach is not None and scope["method"] == "GET":
            detach(partial(self._serve, scope, receive, send))  # api/detach.py
        else:
            await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if scope["type"] == "http" and scope["method"] == "GET":
                await self._respond(scope, receive, send)
            else:
                await super().__call__(scope, receive, send)  # HEAD: headers only
        except SendTimeoutError:
            _DROPPED.set(True)
            log.warning(
                "event stream of device %s dropped: the client read nothing for %g s",
                self.device_id,
                self.send_timeout,
            )
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None


class UnfinishedStreamFilter(logging.Filter):
    """Drops uvicorn's unfinished-response error for a stream already logged as dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_DROPPED.get() and record.getMessage().startswith(UNFINISHED))
