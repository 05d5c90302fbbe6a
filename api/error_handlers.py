"""The app's error handlers: every failure answers a problem+json (api/errors.py renders it).

Domain errors and HTTP-layer problems render directly; framework validation, routing and
HTTP errors are reshaped into problems; an unexpected exception becomes a logged, trace-free
500. Bad input never reaches the catch-all.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from c2.api.dispatch import KeptReply, kept_reply_handler
from c2.api.errors import (
    FramedError,
    HttpError,
    HttpProblem,
    InternalError,
    MethodNotAllowedError,
    RequestInvalidError,
    RouteNotFoundError,
    header_text,
    problem_body,
    problem_response,
)
from c2.core.errors import DomainError, StoreUnavailableError, StoreWriteError
from c2.core.protocol.values import RequestId

log = logging.getLogger(__name__)
# FastAPI's 400 for a body it could not decode at all (fastapi/routing.py).
UNPARSABLE_BODY = "There was an error parsing the body"


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
    assert isinstance(exc, DomainError | HttpProblem)
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
    # The body's own request_id, when it is a valid one: a client correlates the refusal as it
    # would any other answer to its op (docs/api.md §1).
    request_id = _request_id_of(exc.body) if isinstance(exc, RequestValidationError) else None
    headers = {"Request-Id": header_text(request_id)} if request_id else {}
    body = problem_body(err, request_id=request_id) | {"errors": items}
    return problem_response(err, body=body, headers=headers)


_REQUEST_ID: TypeAdapter[str] = TypeAdapter(RequestId)


def _request_id_of(body: Any) -> str | None:
    if not isinstance(body, dict) or "request_id" not in body:
        return None
    try:
        return _REQUEST_ID.validate_python(body["request_id"])
    except ValidationError:
        return None


async def _store_write_handler(_request: Request, exc: Exception) -> Response:
    """A write the store gave up on (the database unreachable, a full disk) past its retry
    window: the service is unavailable, as for any read it cannot serve (never a 500)."""
    assert isinstance(exc, StoreWriteError)
    log.warning("a write failed: %s", exc)
    return problem_response(StoreUnavailableError(f"the database could not take the write: {exc}"))


async def _http_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    err: HttpProblem
    if exc.status_code == 400 and exc.detail == UNPARSABLE_BODY:
        # Malformed input, as an unreadable JSON text already is (422): a body FastAPI could
        # not even decode (not UTF-8, nested past the parser's depth) must not answer otherwise.
        err = RequestInvalidError("the request body is not readable JSON (UTF-8)")
        return problem_response(err, body=problem_body(err) | {"errors": []})
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
    # Starlette names only the first route matching the path; a resource may span several
    # (GET and POST on /v1/sessions). The resource is the most literal template the path
    # matches, as OpenAPI matches paths: `/queue/resume`, not `/queue/{item_id}`. The routers
    # are those create_app included: FastAPI keeps each in `app.routes` as one opaque entry.
    by_params: dict[int, set[str]] = {}
    for router in request.app.state.routers:
        for route in router.routes:
            if isinstance(route, Route) and route.methods:
                match, _ = route.matches(request.scope)
                if match != Match.NONE:
                    by_params.setdefault(len(route.param_convertors), set()).update(route.methods)
    methods = by_params[min(by_params)] if by_params else set()
    if "GET" in methods:
        methods.add("HEAD")  # api/head.py
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
    app.add_exception_handler(KeptReply, kept_reply_handler)
    app.add_exception_handler(DomainError, _domain_handler)
    app.add_exception_handler(HttpProblem, _domain_handler)
    app.add_exception_handler(FramedError, _framed_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.add_exception_handler(ValidationError, _validation_handler)
    app.add_exception_handler(HTTPException, _http_handler)
    app.add_exception_handler(StoreWriteError, _store_write_handler)
    app.add_middleware(UnhandledErrors)
