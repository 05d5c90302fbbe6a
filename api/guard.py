"""The request guard: credentials first, then a bounded body (docs/api.md §2, docs/security.md).

A pure ASGI middleware inside the Host allowlist and CORS. For `/v1/*` (except `POST /v1/pair`)
it verifies the bearer before a single body byte is read, so an unauthenticated client can
neither make the server buffer a body nor parse one; outside `/v1` (no route there takes a
body) the app is handed an empty body and the client's bytes are never read. Then it checks
the device's scopes against the route's declared scope (api/scopes.py): a 403 before any
validation or lookup; for `POST /v1/ops` the op's tag in the buffered body names the scope.
It spends every stream ticket a GET presents (even one that then fails validation; a HEAD
spends none), rate-limits failed credential checks per client address and globally (a valid
ticket or a bearer verified before is never refused by that limit), and hands the verified
device to the routes in the scope state.
Bodies above the limit are a 413, counted as they arrive (chunked bodies included). Every
response gets `Cache-Control: no-store` under `/v1`; HTML responses get security headers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import parse_qsl

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from c2.api.errors import PayloadTooLargeError, problem_response
from c2.api.head import HEAD_REQUEST
from c2.api.scopes import check_op, check_route
from c2.api.settings import Settings
from c2.core.auth import AttemptLimiter, DeviceAuth
from c2.core.devices import Device
from c2.core.errors import (
    DomainError,
    InvalidTicketError,
    RateLimitedError,
    StoreUnavailableError,
    UnauthorizedError,
)

log = logging.getLogger(__name__)

DEVICE_KEY = "c2_device"  # scope["state"] key of the verified device
PAIR_PATH = "/v1/pair"
EVENTS_PATH = "/v1/events"
# The pairing body is a token and a device name: nothing unauthenticated needs more.
UNAUTHENTICATED_BODY_BYTES = 16 * 1024
HTML_HEADERS = {
    # A page that needs a script names it by hash in its own header (see the pairing page).
    "Content-Security-Policy": (
        "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _bearer(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if value is None:
        return None
    scheme, _, credentials = value.partition(" ")
    credentials = credentials.strip()
    return credentials if scheme.lower() == "bearer" and credentials else None


def _tickets(scope: Scope) -> list[str]:
    query = scope.get("query_string", b"").decode("latin-1")
    return [v for k, v in parse_qsl(query, keep_blank_values=True) if k == "ticket" and v]


def _rate_limited(retry_after: int) -> RateLimitedError:
    return RateLimitedError("too many failed authentications", retry_after=retry_after)


def _empty_body(receive: Receive) -> Receive:
    """A receive whose first message is an empty, complete body; the client's own messages
    after it (a disconnect is what a response may listen for)."""
    sent = False

    async def empty() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": b"", "more_body": False}

    return empty


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class RequestGuard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.max_body = settings.max_body_bytes
        self.per_client = AttemptLimiter(settings.auth_failures_per_minute, 60.0)
        self.everyone = AttemptLimiter(settings.auth_failures_per_minute_total, 60.0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        api = path == "/v1" or path.startswith("/v1/")
        send = self._headers(send, api=api)
        limit = self.max_body
        device: Device | None = None
        op_scopes: Mapping[str, str] | None = None
        if not api:
            # Outside /v1 every route is a GET and no one is authenticated: nothing a client
            # sends there is read, buffered or parsed.
            await self.app(scope, _empty_body(receive), send)
            return
        if path == PAIR_PATH:
            limit = min(limit, UNAUTHENTICATED_BODY_BYTES)
        else:
            try:
                device = await self._authenticate(scope)
                op_scopes = check_route(device, scope)
            except DomainError as err:
                await problem_response(err)(scope, receive, send)
                return
            scope.setdefault("state", {})[DEVICE_KEY] = device
        try:
            receive, body = await self._bounded_body(scope, receive, limit)
        except PayloadTooLargeError as err:
            response = problem_response(err, headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        if op_scopes is not None and device is not None:
            try:
                check_op(device, body, op_scopes)
            except DomainError as err:
                await problem_response(err)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    # -- credentials -----------------------------------------------------------------------------

    def _over_budget(self, client: str) -> int | None:
        """The seconds until `client` may fail again, None while it is within both budgets."""
        return self.per_client.check(client) or self.everyone.check("*")

    def _failed(self, client: str, over_budget: int | None) -> None:
        if over_budget is None:  # a refused attempt does not count again
            self.per_client.fail(client)
            self.everyone.fail("*")

    async def _redeem(
        self,
        auth: DeviceAuth,
        tickets: list[str],
        client: str,
        over_budget: int | None,
        *,
        spend: bool,
    ) -> tuple[Device | None, InvalidTicketError | None]:
        """Check (and `spend`) every ticket; the first valid one's device, the first refusal."""
        device: Device | None = None
        refused: InvalidTicketError | None = None
        for ticket in tickets:
            try:
                redeemed = await auth.redeem_ticket(ticket, spend=spend)
            except InvalidTicketError as err:
                self._failed(client, over_budget)
                refused = refused or err
            else:
                device = device or redeemed
        return device, refused

    async def _authenticate(self, scope: Scope) -> Device:
        auth: DeviceAuth = scope["app"].state.services.auth
        client = _client(scope)
        bearer, tickets = _bearer(scope), _tickets(scope)
        over_budget = self._over_budget(client)
        head = bool(scope.get(HEAD_REQUEST))
        try:
            # Every ticket a GET presents is spent, whatever happens next, and checked whatever
            # the limiter says: a valid one is a credential that proved itself (the web client
            # needs a fresh one per stream), so a flood of failures never locks browsers out.
            # A HEAD opens no stream, so it spends none (api.md: HEAD opens no stream), but
            # is authenticated by it as its GET would be.
            ticket_device, refused = await self._redeem(
                auth, tickets, client, over_budget, spend=not head
            )
            if bearer is not None:
                if over_budget is not None and not auth.recognizes(bearer):
                    # A bearer that proved itself before is never refused here; another one
                    # waits out a flood without a database read.
                    raise _rate_limited(over_budget)
                try:
                    return await auth.authenticate(bearer)
                except UnauthorizedError:
                    self._failed(client, over_budget)
                    raise
            if refused is not None:
                raise _rate_limited(over_budget) if over_budget is not None else refused
            if ticket_device is not None and scope["path"] == EVENTS_PATH:
                return ticket_device
        except DomainError:
            raise
        except Exception as exc:  # the store failed: say so, never a 500 or a pass
            log.warning("credential check failed: %s", exc)
            raise StoreUnavailableError("credentials cannot be checked right now") from exc
        if over_budget is not None:
            raise _rate_limited(over_budget)
        raise UnauthorizedError("an `Authorization: Bearer <bearer>` header is required")

    # -- body ------------------------------------------------------------------------------------

    async def _bounded_body(
        self, scope: Scope, receive: Receive, limit: int
    ) -> tuple[Receive, bytes]:
        """Read the whole body (at most `limit` bytes); a receive that replays it, and it."""
        length = _header(scope, b"content-length")
        if length is None and _header(scope, b"transfer-encoding") is None:
            return receive, b""  # no body to read
        if length is not None and length.strip().isdigit() and int(length) > limit:
            raise PayloadTooLargeError(f"the request body is larger than {limit} bytes")
        chunks: list[bytes] = []
        body = b""
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending: list[Message] = [message]  # a disconnect: let the app see it
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLargeError(f"the request body is larger than {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                body = b"".join(chunks)
                pending = [{"type": "http.request", "body": body, "more_body": False}]
                break

        async def replay() -> Message:
            return pending.pop(0) if pending else await receive()

        return replay, body

    # -- response headers ------------------------------------------------------------------------

    @staticmethod
    def _headers(send: Send, *, api: bool) -> Send:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if api and "cache-control" not in headers:
                    headers["Cache-Control"] = "no-store"
                if headers.get("content-type", "").startswith("text/html"):
                    for name, value in HTML_HEADERS.items():
                        headers.setdefault(name, value)
            await send(message)

        return with_headers
