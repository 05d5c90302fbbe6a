"""Compressed answers (`Compression`): gzip to a client that accepts it, for answers over a
KiB, and never for the event stream.

A transcript page is up to 1 MiB of JSON, slow on a phone's link; the web client's script is
94 KB. The event stream is left out by its path, not only by its type: Starlette's GZip would
pass its frames through untouched (it skips `text/event-stream`), but its responder would stay
in the send chain of every open stream (+1.4 KiB per idle stream, bench/events.py).

A compressed answer's ETag is made weak: the gzipped bytes are another representation than
the plain ones, and a strong validator names one representation's exact bytes (RFC 9110
§8.8.1), so a cache must not take one for the other.
"""

from __future__ import annotations

from functools import partial

from starlette.datastructures import MutableHeaders
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
        if scope["type"] != "http" or scope["path"] == self.stream_path:
            await self.app(scope, receive, send)
            return
        accepted = _accept_encoding(scope)
        gzip = accepts_gzip(accepted)
        if gzip != ("gzip" in accepted):
            # Starlette's GZip looks for the text `gzip` only (so `gzip;q=0` got gzip, `GZIP`
            # and `*` did not): it is told what the header means.
            headers = [(k, v) for k, v in scope["headers"] if k != b"accept-encoding"]
            if gzip:
                headers.append((b"accept-encoding", b"gzip"))
            scope = {**scope, "headers": headers}
        await self.gzip(scope, receive, partial(_weak_etag, send))


def _accept_encoding(scope: Scope) -> str:
    return ",".join(
        value.decode("latin-1") for key, value in scope["headers"] if key == b"accept-encoding"
    )


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding value allows gzip (RFC 9110 §12.5.3): named (or `x-gzip`,
    or else `*`) with a non-zero weight; names are case-insensitive, and `q=0` refuses."""
    weights: dict[str, float] = {}
    for item in accept_encoding.split(","):
        name, _, params = item.partition(";")
        name = name.strip().lower()
        if not name:
            continue
        weight = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = 0.0  # an unreadable weight accepts nothing
        weights[name] = weight
    for name in ("gzip", "x-gzip", "*"):
        if name in weights:
            return weights[name] > 0
    return False


async def _weak_etag(send: Send, message: Message) -> None:
    """`send`, with a gzipped answer's strong ETag made weak."""
    if message["type"] == "http.response.start":
        headers = MutableHeaders(scope=message)
        etag = headers.get("etag")
        if etag and not etag.startswith("W/") and headers.get("content-encoding") == "gzip":
            headers["etag"] = f"W/{etag}"
    await send(message)
