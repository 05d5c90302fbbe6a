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

The owner serves a relayed request only while it still owns the session by the database
(ownership moves when a member whose lease lapsed is adopted from): otherwise it answers 409
`not_owner` with the owner it sees in `C2-Not-Owner`, and the relaying member looks the
owner up once more and serves the request itself or relays it to the new owner (a second
move is a 503 `owner_unreachable` to retry). Clients never see `not_owner`. An owner that
cannot be reached, or does not answer within the relay's read timeout (api/relay.py: 300 s,
as relayed ops may legitimately take minutes), is a 503 `owner_unreachable` naming it.

A pure ASGI middleware inside the request guard: credentials, scope and body limit are
checked before anything is relayed, and it sees the buffered body. Its HTTP client
(api/relay.py) belongs to the app's Services, which close it at shutdown.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from c2.api.errors import NotOwnerError, OwnerUnreachableError, Problem, problem_response
from c2.api.relay import Owner, RelayClosedError, unreachable
from c2.core.errors import DomainError, StoreUnavailableError, UnauthorizedError

log = logging.getLogger(__name__)
KEY_HEADER = "c2-cluster-key"
BY_HEADER = "c2-forwarded-by"
# On a `not_owner` answer: the session's owner as the answering member sees it.
NOT_OWNER_HEADER = "c2-not-owner"
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
        if key is not None and not hmac.compare_digest(key.encode(), membership.secret.encode()):
            err = UnauthorizedError("the cluster key of a relayed request is wrong")
            await problem_response(err)(scope, receive, send)
            return
        method: str = scope["method"]
        target = session_target(method, scope["path"])
        body: bytes | None = None
        if target is None and method == "POST" and scope["path"] == OPS_PATH:
            body, receive = await _buffer(receive)
            target = op_target(body)
        if target is None:
            await self.app(scope, receive, send)
        elif key is not None:  # relayed to us as the session's owner
            await self._serve_relayed(scope, receive, send, services, target)
        else:
            await self._route(scope, receive, send, services, target, body)

    async def _serve_relayed(
        self, scope: Scope, receive: Receive, send: Send, services: Any, target: str
    ) -> None:
        """Serve a relayed request only while this member still owns its session (by the
        database); else answer `not_owner` naming the owner, for the relaying member to
        look again. Never relayed further (no loops)."""
        try:
            elsewhere = await services.owner_elsewhere(target)
        except Exception as exc:
            await problem_response(_lookup_failed(target, exc))(scope, receive, send)
            return
        if elsewhere is None:
            await self.app(scope, receive, send)
            return
        err = NotOwnerError(f"session {target} is owned by instance {elsewhere}, not this one")
        err.session = target
        err.details["owner"] = elsewhere
        await problem_response(err, headers={NOT_OWNER_HEADER: elsewhere})(scope, receive, send)

    async def _route(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        services: Any,
        target: str,
        body: bytes | None,
    ) -> None:
        """Serve here or relay to the owner. An owner that answers `not_owner` (its session
        moved since we looked) makes us look once more: then serve here (ours now, or
        adopted) or relay to the new owner; a second move is a 503 to retry."""
        for _attempt in range(2):
            try:
                owner = await services.owner_of(target)
            except Exception as exc:  # owner_unavailable, or the registry is unreadable
                await problem_response(_lookup_failed(target, exc))(scope, receive, send)
                return
            if owner is None:
                await self.app(scope, receive, send)
                return
            if body is None:
                body, receive = await _buffer(receive)
            moved_to = await self._relay(scope, send, owner, body, services)
            if moved_to is None:
                return  # the owner's answer was sent
            log.info("instance %s no longer owns session %s (%s does)", owner.id, target, moved_to)
        err = OwnerUnreachableError(
            "the session's owner changed twice while this request was relayed; retry",
            retry_after=1,
        )
        err.session = target
        await problem_response(err)(scope, _nothing, send)

    async def _relay(
        self, scope: Scope, send: Send, owner: Owner, body: bytes, services: Any
    ) -> str | None:
        """Send the request to `owner` and its answer back; the owner it names instead when
        it answered `not_owner` (nothing sent then)."""
        membership = services.membership
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP | _RECOMPUTED]
        if not any(k.lower() == b"accept-encoding" for k, _ in headers):
            # The owner's bytes are relayed as they come (`aiter_raw`): without this, httpx's
            # own Accept-Encoding would have it compress for a client that never asked.
            headers.append((b"accept-encoding", b"identity"))
        headers += [
            (KEY_HEADER.encode(), membership.secret.encode()),
            (BY_HEADER.encode(), membership.id.encode()),
        ]
        query = scope.get("query_string", b"").decode("latin-1")
        target = f"{owner.url}{scope['path']}" + (f"?{query}" if query else "")
        try:
            client = await services.relay.client()
        except RelayClosedError as exc:
            await problem_response(unreachable(owner, exc, membership.config.lease_seconds))(
                scope, _nothing, send
            )
            return None
        import httpx  # loaded with the relay's client (core/outbound.py)

        try:
            request = client.build_request(scope["method"], target, headers=headers, content=body)
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            log.warning(
                "could not relay %s %s to %s: %r", scope["method"], scope["path"], owner.url, exc
            )
            err = unreachable(owner, exc, membership.config.lease_seconds)
            await problem_response(err)(scope, _nothing, send)
            return None
        try:
            moved_to: str | None = response.headers.get(NOT_OWNER_HEADER)
            if response.status_code == 409 and moved_to is not None:
                return moved_to
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    # Lower-cased, as ASGI requires of a header name: the layers above
                    # (compression, the guard's headers) match names as they are.
                    "headers": [
                        (k.lower(), v) for k, v in response.headers.raw if k.lower() not in _HOP
                    ],
                }
            )
            try:
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx.HTTPError as exc:
                # Too late for a problem: the client sees the response cut short.
                log.warning("the relayed answer of %s broke off: %r", owner.url, exc)
                return None
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return None
        finally:
            await response.aclose()


def _lookup_failed(target: str, exc: Exception) -> Problem:
    """The answer when a session's owner could not be found out: its DomainError, or a 503
    for a database that could not be read (never a 500)."""
    if isinstance(exc, DomainError):
        return exc
    log.warning("could not find the owner of session %s: %s", target, exc)
    return StoreUnavailableError("the session's owner cannot be looked up now", retry_after=1)


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
