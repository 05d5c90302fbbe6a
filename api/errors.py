"""RFC 9457 problem+json: the HTTP status of every stable code, and the problem renderer.

Core raises `DomainError`s (core/errors.py) that carry a stable `code` but no HTTP status;
`STATUS` below is the one table giving each its status (looked up along the class's MRO, so a
subclass answers its parent's status unless listed). Problems only the HTTP layer reports
(Host checks, media type, body size, framework 404/405/422, shutdown, 500) derive from
`HttpProblem`, which carries its status itself. api/error_handlers.py installs the handlers;
a 500 never carries a stack trace.

Over 300 lines: the status table (one line per stable code), the HTTP-layer problems and the
renderer are the one error-to-problem mapping of docs/decisions.md; the handlers that use it
are api/error_handlers.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from starlette.responses import Response

from c2.core.errors import (
    AgentAuthRequiredError,
    BudgetExceededError,
    CapacityError,
    CheckpointGitError,
    DeviceNotFoundError,
    DomainError,
    ForceRequiredError,
    InsufficientScopeError,
    InvalidCursorError,
    InvalidCwdError,
    InvalidMcpServerError,
    InvalidOptionError,
    InvalidPairingTokenError,
    InvalidPushSubscriptionError,
    InvalidQueryError,
    InvalidTicketError,
    InvalidUsageQueryError,
    InvalidWebhookUrlError,
    McpUnsupportedError,
    ModeExceedsPolicyError,
    NoCheckpointsError,
    NoSuchCheckpointError,
    NoSuchTurnError,
    OperationFailedError,
    OutsideChangesError,
    OwnerUnavailableError,
    PermissionNotPendingError,
    ProviderUnavailableError,
    PushSubscriptionNotFoundError,
    QueueItemNotFoundError,
    RateLimitedError,
    RequestIdReusedError,
    SessionNotFoundError,
    SessionUnavailableError,
    StoreUnavailableError,
    TranscriptCursorError,
    TurnAlreadyRunningError,
    TurnFailedError,
    UnauthorizedError,
    UnknownEventError,
    UnknownModeError,
    UnknownModelError,
    UnknownProviderError,
    WebhookNotFoundError,
    WorktreeError,
)

log = logging.getLogger(__name__)
PROBLEM_MEDIA_TYPE = "application/problem+json"
_PRINTABLE_NO_PERCENT = [chr(c) for c in range(0x20, 0x7F) if chr(c) != "%"]

# The HTTP status of each domain error (docs/api.md §3).
STATUS: dict[type[DomainError], int] = {
    DomainError: 400,
    SessionNotFoundError: 404,
    SessionUnavailableError: 409,
    OwnerUnavailableError: 409,
    InvalidCwdError: 422,
    CapacityError: 503,
    TurnAlreadyRunningError: 409,
    TurnFailedError: 503,
    PermissionNotPendingError: 409,
    InvalidOptionError: 409,
    BudgetExceededError: 409,
    OperationFailedError: 409,
    UnknownModelError: 422,
    UnknownModeError: 422,
    ModeExceedsPolicyError: 409,
    UnknownProviderError: 422,
    ProviderUnavailableError: 503,
    AgentAuthRequiredError: 503,
    InvalidMcpServerError: 422,
    McpUnsupportedError: 422,
    WorktreeError: 422,
    CheckpointGitError: 503,  # a git failure behind a checkpoint, not the request's fault
    NoCheckpointsError: 409,
    NoSuchTurnError: 404,
    NoSuchCheckpointError: 404,
    OutsideChangesError: 409,
    ForceRequiredError: 409,
    QueueItemNotFoundError: 404,
    TranscriptCursorError: 400,
    InvalidUsageQueryError: 422,
    InvalidQueryError: 422,
    InvalidCursorError: 422,
    UnknownEventError: 422,
    InvalidWebhookUrlError: 422,
    WebhookNotFoundError: 404,
    InvalidPushSubscriptionError: 422,
    PushSubscriptionNotFoundError: 404,
    StoreUnavailableError: 503,
    RequestIdReusedError: 409,
    UnauthorizedError: 401,
    InvalidPairingTokenError: 401,
    InvalidTicketError: 401,
    RateLimitedError: 429,
    DeviceNotFoundError: 404,
    InsufficientScopeError: 403,
}


class HttpProblem(Exception):  # noqa: N818 - a problem (RFC 9457), as the subclasses' codes
    """A problem only the HTTP layer reports; unlike a DomainError it knows its status."""

    code: str = "http_error"
    status: int = 400
    title: str = "Request failed"

    def __init__(self, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.session: str | None = None
        self.request_id: str | None = None
        self.details: dict[str, Any] = {}


Problem = DomainError | HttpProblem


def status_of(err: Problem | type[Problem]) -> int:
    """The HTTP status of a problem (or problem class): its own, or STATUS along its MRO."""
    if isinstance(err, HttpProblem) or (isinstance(err, type) and issubclass(err, HttpProblem)):
        return err.status
    cls = err if isinstance(err, type) else type(err)
    return next(STATUS[c] for c in cls.__mro__ if c in STATUS)


# -- problems of the HTTP layer ----------------------------------------------------------------


class RequestInvalidError(HttpProblem):
    code = "validation_error"
    status = 422
    title = "Request validation failed"


class RouteNotFoundError(HttpProblem):
    code = "not_found"
    status = 404
    title = "Not found"


class MethodNotAllowedError(HttpProblem):
    code = "method_not_allowed"
    status = 405
    title = "Method not allowed"


class HttpError(HttpProblem):
    """Any other status the framework reported (its status is set per instance)."""

    code = "http_error"
    title = "Request failed"


class InternalError(HttpProblem):
    code = "internal_error"
    status = 500
    title = "Internal server error"


class HostNotAllowedError(HttpProblem):
    code = "host_not_allowed"
    status = 421
    title = "Host not allowed"


class InvalidHostError(HttpProblem):
    code = "invalid_host"
    status = 400
    title = "Missing or malformed Host header"


class PayloadTooLargeError(HttpProblem):
    code = "payload_too_large"
    status = 413
    title = "Request body too large"


class UnsupportedMediaTypeError(HttpProblem):
    code = "unsupported_media_type"
    status = 415
    title = "Unsupported media type"


class TooManyStreamsError(HttpProblem):
    code = "too_many_streams"
    status = 429
    title = "Too many open event streams"


class ShuttingDownError(HttpProblem):
    code = "shutting_down"
    status = 503
    title = "Server is shutting down"


class OwnerUnreachableError(HttpProblem):
    """A cluster member owns the session but did not answer the relayed request (issue 18)."""

    code = "owner_unreachable"
    status = 503
    title = "The session's instance did not answer"


class NotOwnerError(HttpProblem):
    """A relayed request reached a member that no longer owns its session (issue 18); the
    relaying member looks the owner up again (api/forward.py). Never reaches a client."""

    code = "not_owner"
    status = 409
    title = "This instance does not own the session"


class NotReadyError(HttpProblem):
    code = "not_ready"
    status = 503
    title = "Server is not ready"


def _by_code() -> dict[str, type[Problem]]:
    found: dict[str, type[Problem]] = {}
    classes: list[type[Problem]] = [*STATUS, *HttpProblem.__subclasses__()]
    for cls in classes:
        if found.setdefault(cls.code, cls) is not cls:
            raise TypeError(f"two problems answer the code {cls.code!r}")
    return found


_BY_CODE = _by_code()


def problem_class(code: str) -> type[Problem]:
    """The problem class answering `code` (a class of STATUS, or an HttpProblem)."""
    return _BY_CODE[code]


class FramedError(Exception):
    """A problem answered in one of the protocol's frame shapes (`kind` + `message`) on
    top of the problem fields, e.g. `sessions_error` and `transcript_error` (docs/api.md §4)."""

    def __init__(self, error: Problem, kind: str, fields: dict[str, Any]) -> None:
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
    err: Problem, *, request_id: str | None = None, session: str | None = None
) -> dict[str, Any]:
    """The problem+json object of `err`; `request_id`/`session` fill in when it lacks them."""
    body: dict[str, Any] = {
        "type": f"urn:c2:problem:{err.code}",
        "title": err.title,
        "status": status_of(err),
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


def problem_headers(err: Problem) -> dict[str, str]:
    headers: dict[str, str] = {}
    if err.retry_after is not None:
        headers["Retry-After"] = str(err.retry_after)
    if status_of(err) == 401:
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
    err: Problem,
    *,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(
        json_bytes(body if body is not None else problem_body(err)),
        status_code=status_of(err),
        media_type=PROBLEM_MEDIA_TYPE,
        headers={**problem_headers(err), **(headers or {})},
    )
