"""The HTTP client webhooks and Web Push go out with, opened when there is something to send
and built off the event loop.

An httpx client loads the whole CA bundle into its TLS context as it is built: ~55 ms of CPU
and ~3 MB of memory here. Built on the loop, that held every stream and request for as long;
and a server that never delivers a webhook or a push need not hold one at all.
"""

from __future__ import annotations

import asyncio

import httpx


async def open_client(timeout: httpx.Timeout, concurrency: int) -> httpx.AsyncClient:
    """A client for notifications (on a worker thread): at most `concurrency` connections, no
    redirect followed (a receiver's redirect is a failed delivery, never a second target),
    and no proxy or credentials taken from the environment."""
    return await asyncio.to_thread(
        httpx.AsyncClient,
        timeout=timeout,
        limits=httpx.Limits(max_connections=concurrency),
        follow_redirects=False,
        trust_env=False,
    )
