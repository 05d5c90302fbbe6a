"""The HTTP client a cluster member relays requests to their sessions' owners with (issue 18;
api/forward.py decides what is relayed), and the problem of an owner that does not answer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from c2.api.errors import OwnerUnreachableError
from c2.core.outbound import open_client

if TYPE_CHECKING:
    import httpx

# A dead owner is found out fast (connect); an answer may legitimately take minutes (a
# duplicate waiting up to 120 s for the first outcome, a create or fork starting an agent, a
# rewind), so reads wait long, yet never for ever: a hung owner ends in a 503.
RELAY_READ_SECONDS = 300.0
RELAY_CONNECT_SECONDS = 3.0
RELAY_WRITE_SECONDS = 30.0
RELAY_POOL_SECONDS = 5.0


class RelayClosedError(ConnectionError):
    """A relay asked of a member that is shutting down."""


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
        """The relay's client; RelayClosedError once the relay is closed."""
        async with self._opening:
            if self.closed:
                raise RelayClosedError("the relay is closed: the server is shutting down")
            if self._client is None:
                # As many connections as there are requests to relay: each is a client's
                # request, already bounded by the member's connection limit, and a pool limit
                # would make long relayed ops queue behind each other.
                self._client = await open_client(
                    timeout=RELAY_READ_SECONDS,
                    connect=RELAY_CONNECT_SECONDS,
                    write=RELAY_WRITE_SECONDS,
                    pool=RELAY_POOL_SECONDS,
                    max_connections=None,
                )
            return self._client

    async def aclose(self) -> None:
        async with self._opening:  # after a client being built, which it then closes
            self.closed = True
            client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def unreachable(owner: Owner, exc: Exception, lease_seconds: float) -> OwnerUnreachableError:
    """The problem of an owner that did not answer: one that cannot be reached (by then it
    has renewed its lease or lost the session: retry after a lease), or one that took longer
    than the relay waits."""
    where = f"the instance {owner.id} ({owner.url}) that owns this session"
    if _timed_out(exc):
        message = f"{where} did not answer within {RELAY_READ_SECONDS:.0f} s"
    else:
        message = f"{where} cannot be reached ({type(exc).__name__}); retry shortly"
    err = OwnerUnreachableError(message, retry_after=int(max(1, lease_seconds)))
    err.details["owner"] = owner.id
    return err


def _timed_out(exc: Exception) -> bool:
    """`exc` is the relay's read timing out; a closed relay's error never is, and never
    imports httpx (a member refusing relays as it shuts down may have built no client)."""
    if isinstance(exc, RelayClosedError):
        return False
    import httpx  # loaded with the relay's client (core/outbound.py)

    return isinstance(exc, httpx.ReadTimeout)
