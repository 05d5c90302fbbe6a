"""Compressed answers (`Compression`): gzip to a client that accepts it, for answers over a
KiB, and never for the event stream.

A transcript page is up to 1 MiB of JSON, slow on a phone's link; the web client's script is
94 KB. The event stream is left out by its path, not only by its type: Starlette's GZip would
pass its frames through untouched (it skips `text/event-stream`), but its responder would stay
in the send chain of every open stream (+1.4 KiB per idle stream, bench/events.py).
"""

from __future__ import annotations

from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["Compression"]

MIN_BYTES = 1024
LEVEL = 6  # zlib's default: most of level 9's size for a fraction of its CPU


class Compression:
    """GZip (bodies of 128 KiB and more are compressed on a worker thread) for every path but
    `stream_path`."""

    def __init__(self, app: ASGIApp, stream_path: str) -> None:
        self.app = app
        self.stream_path = stream_path
        self.gzip = GZipMiddleware(app, minimum_size=MIN_BYTES, compresslevel=LEVEL)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != self.stream_path:
            await self.gzip(scope, receive, send)
        else:
            await self.app(scope, receive, send)
