"""Ops on a session owned by another cluster member go to that member (issue 18).

A session's agent process and worktree live on the member that owns it, so every request
that acts on them (ops, deletion, diffs, forks, the queue, previews that read its cwd) is
relayed over HTTP to the owner, and the owner's answer (status, body, headers) goes back to the
client verbatim. Reads served from the database alone (`GET /v1/sessions/{id}`, its
transcript) are answered by any member.

A relayed request carries the client's own credentials (the owner authenticates the device
and applies its scopes and idempotency records as if called directly) plus the cluster key
in `C2-Cluster-Key` and the relaying member in `C2-Forwarded-By`. A request carrying a key is
never relayed again (no loops); a wrong key is refused before anything else.

A pure ASGI middleware inside the request guard: credentials, scope and body limit are
checked before anything is relayed, and it sees the buffered body. Its HTTP client (`Relay`)
belongs to the app's Services, which close it at shutdown.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from c2.api.errors import OwnerUnreachableError, problem_response
from c2.core.errors import DomainError, StoreUnavailableError, UnauthorizedError

log = logging.getLogger(__name__)
KEY_HEADER = "c2-cluster-key"
BY_HEADER = "c2-forwarded-by"
OPS_PATH = "/v1/ops"
SESSIONS = ("v1", "sessions")
# Answered from the database by any member: never relayed.
_LOCAL_READS = {(), ("transcript",)}
# Hop-by-hop headers (RFC 9110 §7.6.1), not relayed either way.
_HOP = {
    b"connection",
    b"keep-alive",
    b"transfer-encoding",
    b"te",
    b"trailer",
    b"upgrade",
    b"proxy-authorization",
    b"proxy-connection",
}
# Request headers the relay recomputes for its own connection.
_RECOMPUTED = {b"host", b"content-length"}
RELAY_TIMEOUT = httpx.Timeout(connect=3.0, read=None, write=30.0, pool=5.0)


def session_target(method: str, path: str) -> str | None:
    """The session a request to `path` acts on where its owner must serve it, else None
    (a concrete path, or a route's template: then the `{session_id}` placeholder)."""
    parts = tuple(p for p in path.split("/") if p)
    if len(parts) < 3 or parts[:2] != SESSIONS:
        return None
    rest = parts[3:]
    if method == "GET" and rest in _LOCAL_READS:
        return None
    if method == "POST" and not rest:
        return None  # POST /v1/sessions/{x} is no route
    return parts[2]


def op_target(body: bytes) -> str | None:
    """The session a `POST /v1/ops` body names (new sessions name none)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    session = data.get("session") if isinstance(data, dict) else None
    return session if isinstance(session, str) and session else None


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


class ClusterForwarder:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services = getattr(scope["app"].state, "services", None) if "app" in scope else None
        membership = getattr(services, "membership", None)
        if scope["type"] != "http" or membership is None or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        key = _header(scope, KEY_HEADER.encode())
        if key is not None:
            if not hmac.compare_digest(key.encode(), membership.secret.encode()):
                err = UnauthorizedError("the cluster key of a relayed request is wrong")
                await problem_response(err)(scope, receive, send)
                return
            await self.app(scope, receive, send)  # relayed to us: we are the owner
            return
        method: str = scope["method"]
        target = session_target(method, scope["path"])
        body: bytes | None = None
        if target is None and method == "POST" and scope["path"] == OPS_PATH:
            body, receive = await _buffer(receive)
            target = op_target(body)
        try:
            url = None if target is None or services is None else await services.owner_url(target)
        except DomainError as err:
            await problem_response(err)(scope, receive, send)
            return
        except Exception as exc:  # the registry could not be read: never a 500
            log.warning("could not find the owner of session %s: %s", target, exc)
            unavailable = StoreUnavailableError("the session's owner cannot be looked up now")
            await problem_response(unavailable)(scope, receive, send)
            return
        if url is None or services is None:
            await self.app(scope, receive, send)
            return
        if body is None:
            body, receive = await _buffer(receive)
        await self._relay(scope, send, url, body, membership, services.relay)

    async def _relay(
        self, scope: Scope, send: Send, url: str, body: bytes, membership: Any, relay: Relay
    ) -> None:
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP | _RECOMPUTED]
        headers += [
            (KEY_HEADER.encode(), membership.secret.encode()),
            (BY_HEADER.encode(), membership.id.encode()),
        ]
        query = scope.get("query_string", b"").decode("latin-1")
        target = f"{url}{scope['path']}" + (f"?{query}" if query else "")
        try:
            client = relay.client()
            request = client.build_request(scope["method"], target, headers=headers, content=body)
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            log.warning("could not relay %s %s to %s: %s", scope["method"], scope["path"], url, exc)
            err = OwnerUnreachableError(
                f"the instance at {url} that owns this session did not answer; retry shortly",
                retry_after=int(max(1, membership.config.lease_seconds)),
            )
            await problem_response(err)(scope, _nothing, send)
            return
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _buffer(receive: Receive) -> tuple[bytes, Receive]:
    """The whole body, and a receive that replays it."""
    chunks: list[bytes] = []
    pending: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            pending.append(message)
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    pending.insert(0, {"type": "http.request", "body": body, "more_body": False})

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return body, replay


async def _nothing() -> Message:
    return {"type": "http.disconnect"}
