"""HEAD answered wherever GET is (`HeadAsGet`), as RFC 9110 §9.3.2 asks of every server.

FastAPI routes answer only the methods they declare, and c2's reads declare GET: HEAD got a 405
from `/healthz`, the web client and every read, so an uptime monitor or `curl -I` could not
probe c2. Declaring HEAD on each route would put a HEAD operation beside every GET in the
OpenAPI document, and so in every generated client. Instead a HEAD request runs as its GET,
and what the app sends loses its body here: the same status and headers, Content-Length
included, and the guard's checks are the GET's. A response that never ends by itself (an
event stream) looks for `HEAD_REQUEST` in the scope and sends its headers only.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HEAD_REQUEST", "HeadAsGet"]

HEAD_REQUEST = "c2.head"  # scope key, True: the client asked HEAD; this GET sends no body


class HeadAsGet:
    """A HEAD request runs as GET, with every body byte dropped. Just inside the Detacher
    (api/detach.py), so a detached stream's job holds no frame of this one.

    The app gets a copy of the scope: the server's own still says HEAD, so a server that
    drops a HEAD response's body itself (uvicorn does) keeps doing so."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET", HEAD_REQUEST: True}, receive, headers_only)
