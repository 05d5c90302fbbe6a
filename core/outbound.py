"""The HTTP clients c2 sends with (webhooks, Web Push, the cluster relay), built off the event
loop.

An httpx client loads the whole CA bundle into its TLS context as it is built: ~55 ms of CPU
and ~3 MB of memory here. Built on the loop, that held every stream and request for as long;
so each is built on a worker thread, and only once there is something to send.
"""

from __future__ import annotations

import asyncio

import httpx


async def open_client(timeout: httpx.Timeout, limits: httpx.Limits) -> httpx.AsyncClient:
    """A client built on a worker thread: no redirect followed (a receiver's or an owner's
    redirect is a failed request, never a second target), and no proxy or credentials taken
    from the environment."""
    return await asyncio.to_thread(
        httpx.AsyncClient,
        timeout=timeout,
        limits=limits,
        follow_redirects=False,
        trust_env=False,
    )
