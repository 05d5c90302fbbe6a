"""Long-lived responses served once the request's machinery has unwound (`Detacher`).

An event stream lives for hours. Awaited where the route returns it, it held the whole chain
above it for that long: every middleware's and the router's coroutine frames, FastAPI's
dependency exit stacks, the Request, the solved dependencies — about a third of what an idle
stream holds (bench/events.py). A response that can detach hands `Detacher` a job to run
instead and returns; the chain unwinds as for any other request (dependency teardown, the
middlewares' own bookkeeping), and the job then sends the response from the outermost
middleware, through the same `send` and `receive` the route was given: the middlewares'
send wrappers (headers, started tracking) still see every message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["DETACH", "Detacher", "Job"]

DETACH = "c2.detach"  # scope key: hands the outermost middleware a job to run after the app
Job = Callable[[], Awaitable[None]]


class Detacher:
    """Outermost of c2's middlewares: runs a job a response detached, after the app returned.

    A response finds `scope[DETACH]` only under this middleware; without it (the app mounted
    elsewhere, say) it serves in place as any response does."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = set(scope)
        jobs: list[Job] = []
        scope[DETACH] = jobs.append
        try:
            await self.app(scope, receive, send)
        finally:
            del scope[DETACH]
        if not jobs:
            return
        # The server keeps the scope for the connection's life: drop what the app added to
        # it (FastAPI's closed exit stacks, the route, the endpoint...), which only the
        # unwound chain used: the job needs no more than the server gave.
        kept = {key: value for key, value in scope.items() if key in given}
        scope.clear()  # and its table, grown by the additions
        scope.update(kept)
        del given, kept
        for job in jobs:
            await job()
