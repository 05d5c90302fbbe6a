"""The HTTP clients c2 sends with (webhooks, Web Push, the cluster relay), built off the event
loop.

An httpx client loads the whole CA bundle into its TLS context as it is built: ~55 ms of CPU
and ~3 MB of memory here. Built on the loop, that held every stream and request for as long;
so each is built on a worker thread, and only once there is something to send.

httpx itself is imported there too, with the first client: a server that sends nothing (no
webhook, no push subscription, not a cluster member) never pays its import, 50–100 ms of every
start (its command-line module brings click, and rich and pygments where installed). The
modules that catch its errors import it where they do, once they hold a client.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


async def open_client(
    *,
    timeout: float,
    connect: float,
    max_connections: int | None,
    write: float | None = None,
    pool: float | None = None,
) -> httpx.AsyncClient:
    """A client built on a worker thread: `timeout` seconds for each phase not named, at most
    `max_connections` at once (None: no bound), no redirect followed (a receiver's or an
    owner's redirect is a failed request, never a second target), and no proxy or credentials
    taken from the environment."""
    phases = {"connect": connect, "write": write, "pool": pool}
    return await asyncio.to_thread(
        _build, timeout, {name: s for name, s in phases.items() if s is not None}, max_connections
    )


def _build(
    timeout: float, phases: dict[str, float], max_connections: int | None
) -> httpx.AsyncClient:
    import httpx  # the first client's import, on this worker thread (the docstring above)

    # httpx logs every request's full URL at INFO: a webhook's URL is often its secret, and a
    # push endpoint identifies a browser. c2 logs its own outcomes (the URL's origin only).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, **phases),
        limits=httpx.Limits(max_connections=max_connections),
        follow_redirects=False,
        trust_env=False,
    )
