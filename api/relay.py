"""The HTTP client a cluster member relays requests to their sessions' owners with (issue 18;
api/forward.py decides what is relayed), and the problem of an owner that does not answer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

from c2.api.errors import OwnerUnreachableError
from c2.core.outbound import open_client

# A dead owner is found out fast (connect); an answer may legitimately take minutes (a
# duplicate waiting up to 120 s for the first outcome, a create or fork starting an agent, a
# rewind), so reads wait long, yet never for ever: a hung owner ends in a 503.
RELAY_TIMEOUT = httpx.Timeout(connect=3.0, read=300.0, write=30.0, pool=5.0)
# As many connections as there are requests to relay: each is a client's request, already
# bounded by the member's connection limit, and a pool limit would make long relayed ops
# queue behind each other.
RELAY_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=20)


@dataclass(frozen=True)
class Owner:
    """The live member that owns a session, as a relay reaches it."""

    id: str
    url: str


class Relay:
    """The HTTP client a member relays requests to their owners with: opened on first use,
    closed once (`aclose`, at shutdown); a relay after that is refused, never a new client.

    The client is built on a worker thread (core/outbound.py): on the loop, its TLS context
    held every stream and request at a member's first relay."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self._opening = asyncio.Lock()  # one client, however many first relays at once
        self.closed = False

    async def client(self) -> httpx.AsyncClient:
        async with self._opening:
            if self.closed:
                raise httpx.TransportError("the relay is closed: the server is shutting down")
            if self._client is None:
                self._client = await open_client(RELAY_TIMEOUT, RELAY_LIMITS)
            return self._client

    async def aclose(self) -> None:
        async with self._opening:  # after a client being built, which it then closes
            self.closed = True
            client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def unreachable(owner: Owner, exc: httpx.HTTPError, lease_seconds: float) -> OwnerUnreachableError:
    """The problem of an owner that did not answer: one that cannot be reached (by then it
    has renewed its lease or lost the session: retry after a lease), or one that took longer
    than the relay waits."""
    where = f"the instance {owner.id} ({owner.url}) that owns this session"
    if isinstance(exc, httpx.ReadTimeout):
        message = f"{where} did not answer within {RELAY_TIMEOUT.read:.0f} s"
    else:
        message = f"{where} cannot be reached ({type(exc).__name__}); retry shortly"
    err = OwnerUnreachableError(message, retry_after=int(max(1, lease_seconds)))
    err.details["owner"] = owner.id
    return err
