"""Domain errors with stable codes; api/errors.py maps them to problem+json.

The domain never speaks HTTP, but each error carries the status the API contract assigns to it
(API.md §3) so the mapping lives in one table instead of a chain of isinstance checks.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every error the core reports to a client."""

    code: str = "domain_error"
    status: int = 400
    title: str = "Request failed"

    def __init__(
        self,
        message: str,
        *,
        session: str | None = None,
        request_id: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.session = session
        self.request_id = request_id
        self.retry_after = retry_after
        # Extra problem members (and error-event fields) a person acts on, e.g. an agent's
        # `auth_methods` and `stderr_tail`; never secrets.
        self.details: dict[str, Any] = {}


class SessionNotFoundError(DomainError):
    code = "no_such_session"
    status = 404
    title = "No such session"


class InvalidCwdError(DomainError):
    code = "invalid_cwd"
    status = 422
    title = "Invalid working directory"


class TurnAlreadyRunningError(DomainError):
    code = "turn_already_running"
    status = 409
    title = "A turn is already running"


class PermissionNotPendingError(DomainError):
    code = "permission_not_pending"
    status = 409
    title = "Permission is not pending"


class InvalidOptionError(DomainError):
    code = "invalid_option"
    status = 409
    title = "Option was not offered"


class CapacityError(DomainError):
    code = "capacity"
    status = 503
    title = "Live-agent limit reached"


class StoreUnavailableError(DomainError):
    code = "store_unavailable"
    status = 503
    title = "Store unavailable"


class SessionUnavailableError(DomainError):
    """The session exists but cannot take the request (discarded worktree, missing cwd...)."""

    code = "session_unavailable"
    status = 409
    title = "Session unavailable"


class TurnFailedError(DomainError):
    """A prompt was rejected before `turn_started` (persist failure, revive failure)."""

    code = "turn_failed"
    status = 503
    title = "Turn could not start"


class OperationFailedError(DomainError):
    """A non-terminal op failure the protocol reports as an error event (model, config...)."""

    code = "operation_failed"
    status = 409
    title = "Operation failed"


class TranscriptCursorError(DomainError):
    code = "transcript_error"
    status = 400
    title = "Invalid transcript cursor"


class RequestIdReusedError(DomainError):
    code = "request_id_reused"
    status = 409
    title = "request_id reused with a different body"


class NotImplementedOpError(DomainError):
    code = "not_implemented"
    status = 501
    title = "Not implemented"


class UnknownModelError(DomainError):
    code = "unknown_model"
    status = 422
    title = "Unknown model"


class UnknownModeError(DomainError):
    code = "unknown_mode"
    status = 422
    title = "Unknown session mode"


class AgentAuthRequiredError(DomainError):
    """The agent refused to work until someone logs in (ACP error -32000 / authMethods)."""

    code = "agent_auth_required"
    status = 503
    title = "The agent needs authentication"
