"""RFC 9457 problem+json: the one mapping from DomainError (and framework errors) to HTTP.

Core raises DomainError subclasses carrying a stable `code` and status; this module renders
them, and turns validation, routing and unexpected errors into problems too. A 500 never
carries a stack trace; bad input never reaches the catch-all.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.errors import DomainError, StoreUnavailableError

log = logging.getLogger(__name__)
PROBLEM_MEDIA_TYPE = "application/problem+json"
_PRINTABLE_NO_PERCENT = [chr(c) for c in range(0x20, 0x7F) if chr(c) != "%"]


# -- errors the HTTP layer itself reports ----------------------------------------------------


class RequestInvalidError(DomainError):
    code = "validation_error"
    status = 422
    title = "Request validation failed"


class RouteNotFoundError(DomainError):
    code = "not_found"
    status = 404
    title = "Not found"


class MethodNotAllowedError(DomainError):
    code = "method_not_allowed"
    status = 405
    title = "Method not allowed"


class HttpError(DomainError):
    code = "http_error"
    title = "Request failed"


class InternalError(DomainError):
    code = "internal_error"
    status = 500
    title = "Internal server error"


class HostNotAllowedError(DomainError):
    code = "host_not_allowed"
    status = 421
    title = "Host not allowed"


class InvalidHostError(DomainError):
    code = "invalid_host"
    status = 400
    title = "Missing or malformed Host header"


class ShuttingDownError(DomainError):
    code = "shutting_down"
    status = 503
    title = "Server is shutting down"


class NotReadyError(DomainError):
    code = "not_ready"
    status = 503
    title = "Server is not ready"


class FramedError(Exception):
    """A DomainError answered in one of the protocol's frame shapes (`kind` + `message`) on
    top of the problem fields, e.g. `sessions_error` and `transcript_error` (API.md §4)."""

    def __init__(self, error: DomainError, kind: str, fields: dict[str, Any]) -> None:
        super().__init__(error.message)
        self.error, self.kind, self.fields = error, kind, fields


@contextmanager
def framed(kind: str, *, wrap_unexpected: bool = False, **fields: Any) -> Iterator[None]:
    """Re-raise domain errors (and with `wrap_unexpected`, any failure as a 503 store
    failure) as FramedError of `kind`, so a client never mistakes them for an empty result."""
    try:
        yield
    except DomainError as err:
        raise FramedError(err, kind, fields) from err
    except Exception as exc:
        if not wrap_unexpected:
            raise
        log.exception("%s", kind)
        failure = StoreUnavailableError(f"storage failure ({type(exc).__name__})")
        raise FramedError(failure, kind, fields) from exc


# -- rendering -------------------------------------------------------------------------------


def problem_body(
    err: DomainError, *, request_id: str | None = None, session: str | None = None
) -> dict[str, Any]:
    """The problem+json object of `err`; `request_id`/`session` fill in when it lacks them."""
    body: dict[str, Any] = {
        "type": f"urn:c2:problem:{err.code}",
        "title": err.title,
        "status": err.status,
        "detail": err.message,
        "code": err.code,
    }
    if err.request_id or request_id:
        body["request_id"] = err.request_id or request_id
    if err.session or session:
        body["session"] = err.session or session
    for name, value in err.details.items():
        body.setdefault(name, value)
    return body


def problem_headers(err: DomainError) -> dict[str, str]:
    headers: dict[str, str] = {}
    if err.retry_after is not None:
        headers["Retry-After"] = str(err.retry_after)
    if err.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="c2"'
    return headers


def json_bytes(value: Any) -> bytes:
    # ASCII escapes keep any client string (even a lone surrogate) encodable.
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def header_text(value: str) -> str:
    """`value` as an HTTP header value: printable ASCII as is, anything else percent-encoded
    UTF-8 (RFC 3986), so a client-chosen id never breaks the response. Edge whitespace is
    encoded too: HTTP forbids it at either end of a field value."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return quote(value.encode("utf-8", "surrogatepass"), safe="".join(_PRINTABLE_NO_PERCENT))


def problem_response(
    err: DomainError,
    *,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(
        json_bytes(body if body is not None else problem_body(err)),
        status_code=err.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers={**problem_headers(err), **(headers or {})},
    )


def _validation_detail(errors: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    # Never echo the offending input back: it may be large or hold a secret.
    items = [
        {
            "loc": [str(part) for part in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors[:20]
    ]
    text = "; ".join(f"{'.'.join(i['loc']) or 'request'}: {i['msg']}" for i in items[:5])
    return text or "invalid request", items


# -- handlers --------------------------------------------------------------------------------


async def _domain_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DomainError)
    return problem_response(exc)


async def _framed_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, FramedError)
    body = problem_body(exc.error) | {"kind": exc.kind, "message": exc.error.message}
    body.update(exc.fields)
    return problem_response(exc.error, body=body)


async def _validation_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError | ValidationError)
    detail, items = _validation_detail(list(exc.errors()))  # type: ignore[arg-type]
    err = RequestInvalidError(detail)
    return problem_response(err, body=problem_body(err) | {"errors": items})


async def _http_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    err: DomainError
    if exc.status_code == 404:
        err = RouteNotFoundError("no such resource")
    elif exc.status_code == 405:
        err = MethodNotAllowedError("method not allowed on this resource")
    else:
        err = HttpError(str(exc.detail))
        err.status = exc.status_code
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
    return problem_response(err, headers=headers)


def _allowed_methods(request: Request) -> list[str]:
    # Starlette names only the first route matching the path; a resource may span several.
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(request.scope)
            if match != Match.NONE:
                methods |= route.methods
    return sorted(methods)


class UnhandledErrors:
    """Innermost middleware: an unexpected exception becomes a logged, trace-free 500 problem
    (Starlette's own handler would re-raise it after answering)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            response = problem_response(InternalError("the server failed to handle the request"))
            await response(scope, receive, send)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DomainError, _domain_handler)
    app.add_exception_handler(FramedError, _framed_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.add_exception_handler(ValidationError, _validation_handler)
    app.add_exception_handler(HTTPException, _http_handler)
    app.add_middleware(UnhandledErrors)
