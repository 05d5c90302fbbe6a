"""The HTTP client a cluster member relays requests to their sessions' owners with (issue 18;
api/forward.py decides what is relayed), and the problem of an owner that does not answer."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from c2.api.errors import OwnerUnreachableError

RELAY_TIMEOUT = httpx.Timeout(connect=3.0, read=None, write=30.0, pool=5.0)


@dataclass(frozen=True)
class Owner:
    """The live member that owns a session, as a relay reaches it."""

    id: str
    url: str


class Relay:
    """The HTTP client a member relays requests to their owners with: opened on first use,
    closed once (`aclose`, at shutdown); a relay after that is refused, never a new client."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self.closed = False

    def client(self) -> httpx.AsyncClient:
        if self.closed:
            raise httpx.TransportError("the relay is closed: the server is shutting down")
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=RELAY_TIMEOUT, trust_env=False)
        return self._client

    async def aclose(self) -> None:
        self.closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def unreachable(owner: Owner, exc: httpx.HTTPError, lease_seconds: float) -> OwnerUnreachableError:
    """The problem of an owner that did not answer: by the time a lease has passed it has
    renewed its lease or lost the session."""
    return OwnerUnreachableError(
        f"the instance at {owner.url} that owns this session did not answer; retry shortly",
        retry_after=int(max(1, lease_seconds)),
    )
