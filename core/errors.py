"""Every error the core reports to a client: one tree of stable codes, no HTTP in it.

A `DomainError` carries a stable `code`, a human `title` and a message; the HTTP status of
each code lives in api/errors.py (`STATUS`), so the domain never speaks HTTP. The tree:

    DomainError
    ├── sessions:    SessionNotFoundError, SessionUnavailableError, InvalidCwdError,
    │                CapacityError, TurnAlreadyRunningError, TurnFailedError
    ├── turns:       PermissionNotPendingError, InvalidOptionError, BudgetExceededError
    ├── settings:    OperationFailedError, UnknownModelError, UnknownModeError,
                     ModeExceedsPolicyError
    ├── agents:      UnknownProviderError, ProviderUnavailableError, AgentAuthRequiredError,
    │                InvalidMcpServerError, McpUnsupportedError
    ├── worktrees:   WorktreeError ← BaselineChangedError, WorktreeUnavailableError,
    │                CheckpointGitError
    ├── checkpoints: NoCheckpointsError, NoSuchTurnError, NoSuchCheckpointError,
    │                OutsideChangesError, ForceRequiredError, QueueItemNotFoundError
    ├── reads:       TranscriptCursorError, InvalidUsageQueryError, InvalidQueryError,
    │                InvalidCursorError
    ├── store:       StoreUnavailableError, RequestIdReusedError
    └── devices:     UnauthorizedError, InvalidPairingTokenError, InvalidTicketError,
                     RateLimitedError, DeviceNotFoundError, InsufficientScopeError

Over 300 lines: one short class per stable code, the whole tree in the one place a reader
looks codes up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from c2.core.protocol.events import BudgetLimit, BudgetUsed


class DomainError(Exception):
    """Base of every error the core reports to a client."""

    code: str = "domain_error"
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


# -- sessions ----------------------------------------------------------------------------------


class OwnerUnavailableError(DomainError):
    """A worktree session's cluster member is gone: its checkout lives there (issue 18)."""

    code = "owner_unavailable"
    title = "The session's instance is gone"


class SessionNotFoundError(DomainError):
    code = "no_such_session"
    title = "No such session"


class SessionUnavailableError(DomainError):
    """The session exists but cannot take the request (discarded worktree, missing cwd...)."""

    code = "session_unavailable"
    title = "Session unavailable"


class InvalidCwdError(DomainError):
    code = "invalid_cwd"
    title = "Invalid working directory"


class CapacityError(DomainError):
    code = "capacity"
    title = "Live-agent limit reached"


class TurnAlreadyRunningError(DomainError):
    code = "turn_already_running"
    title = "A turn is already running"


class TurnFailedError(DomainError):
    """A prompt was rejected before `turn_started` (persist failure, revive failure)."""

    code = "turn_failed"
    title = "Turn could not start"


# -- turns -------------------------------------------------------------------------------------


class PermissionNotPendingError(DomainError):
    code = "permission_not_pending"
    title = "Permission is not pending"


class InvalidOptionError(DomainError):
    code = "invalid_option"
    title = "Option was not offered"


class BudgetExceededError(DomainError):
    """A prompt refused because the session's budget is exceeded (with the figures)."""

    code = "budget_exceeded"
    title = "Budget exceeded"

    def __init__(
        self, message: str, *, limit: BudgetLimit, used: BudgetUsed, **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.limit, self.used = limit, used
        self.details = {"limit": limit.model_dump(), "used": used.model_dump()}


# -- session settings --------------------------------------------------------------------------


class OperationFailedError(DomainError):
    """A non-terminal op failure the protocol reports as an error event (model, config...)."""

    code = "operation_failed"
    title = "Operation failed"


class UnknownModelError(DomainError):
    code = "unknown_model"
    title = "Unknown model"


class UnknownModeError(DomainError):
    code = "unknown_mode"
    title = "Unknown session mode"


class ModeExceedsPolicyError(DomainError):
    """An agent mode in which it acts unasked beyond what the session's policy allows."""

    code = "mode_exceeds_policy"
    title = "Mode not allowed by the execution policy"


# -- agents and providers ----------------------------------------------------------------------


class UnknownProviderError(DomainError):
    code = "unknown_provider"
    title = "Unknown provider"


class ProviderUnavailableError(DomainError):
    code = "provider_unavailable"
    title = "Provider unavailable"


class AgentAuthRequiredError(DomainError):
    """The agent refused to work until someone logs in (ACP error -32000 / authMethods)."""

    code = "agent_auth_required"
    title = "The agent needs authentication"


class InvalidMcpServerError(DomainError):
    code = "invalid_mcp_server"
    title = "Invalid MCP server"


class McpUnsupportedError(DomainError):
    code = "mcp_unsupported"
    title = "MCP transport not supported by this agent"


# -- worktrees (docs/protocol.md: Ops, new_session; docs/api.md §4) ---------------------------


class WorktreeError(DomainError):
    """A baseline could not be resolved, or a session checkout could not be made or used."""

    code = "worktree_error"
    title = "Worktree operation failed"


class BaselineChangedError(WorktreeError):
    """The previewed worktree_base_sha no longer matches the freshly resolved local ref."""


class WorktreeUnavailableError(WorktreeError):
    """A session's checkout is gone, replaced, or no longer a worktree on its branch."""


class CheckpointGitError(WorktreeError):
    """A git command behind a checkpoint, diff or rewind failed."""

    code = "checkpoint_failed"
    title = "Checkpoint operation failed"


# -- checkpoints, forks and the follow-up queue (issue 14) -------------------------------------


class NoCheckpointsError(DomainError):
    code = "no_checkpoints"
    title = "The session has no checkpoints"


class NoSuchTurnError(DomainError):
    code = "no_such_turn"
    title = "No such turn"


class NoSuchCheckpointError(DomainError):
    code = "no_such_checkpoint"
    title = "No such checkpoint"


class OutsideChangesError(DomainError):
    """The tree changed outside any turn since c2 last recorded it; `paths` lists them."""

    code = "outside_changes"
    title = "The working tree has changes made outside any turn"


class ForceRequiredError(DomainError):
    code = "force_required"
    title = "Rewinding this folder needs force"


class QueueItemNotFoundError(DomainError):
    code = "no_such_queue_item"
    title = "No such queued prompt"


# -- reads -------------------------------------------------------------------------------------


class TranscriptCursorError(DomainError):
    code = "transcript_error"
    title = "Invalid transcript cursor"


class InvalidUsageQueryError(DomainError):
    code = "invalid_usage_query"
    title = "Invalid usage query"


class InvalidQueryError(DomainError):
    """A search query the syntax cannot parse (core/search/query.py)."""

    code = "invalid_query"
    title = "Invalid search query"


class InvalidCursorError(DomainError):
    """A page cursor (search hits, the session list) that this server did not return."""

    code = "invalid_cursor"
    title = "Invalid cursor"


# -- notifications (core/notify/) ---------------------------------------------------------------


class UnknownEventError(DomainError):
    code = "unknown_event"
    title = "Unknown event name"


class InvalidWebhookUrlError(DomainError):
    code = "invalid_webhook_url"
    title = "Invalid webhook URL"


class WebhookNotFoundError(DomainError):
    code = "no_such_webhook"
    title = "No such webhook"


class InvalidPushSubscriptionError(DomainError):
    code = "invalid_push_subscription"
    title = "Invalid push subscription"


class PushSubscriptionNotFoundError(DomainError):
    code = "no_such_push_subscription"
    title = "No such push subscription"


# -- store and idempotency ---------------------------------------------------------------------


class StoreWriteError(Exception):
    """A write could not be committed: the database stayed unreachable, unwritable or owned by
    another c2 for longer than the write could wait, or the store was closing. Not a
    DomainError: the core's services decide what it means where they catch it; one that
    reaches the API is a 503 like StoreUnavailableError (api/error_handlers.py)."""


class StoreUnavailableError(DomainError):
    code = "store_unavailable"
    title = "Store unavailable"


class RequestIdReusedError(DomainError):
    code = "request_id_reused"
    title = "request_id reused with a different body"


# -- devices (docs/api.md §2) ------------------------------------------------------------------


class UnauthorizedError(DomainError):
    code = "unauthorized"
    title = "Authentication required"


class InvalidPairingTokenError(DomainError):
    code = "invalid_pairing_token"
    title = "Invalid, expired or used pairing token"


class InvalidTicketError(DomainError):
    code = "invalid_ticket"
    title = "Invalid, expired or used stream ticket"


class RateLimitedError(DomainError):
    code = "rate_limited"
    title = "Too many attempts"


class DeviceNotFoundError(DomainError):
    code = "no_such_device"
    title = "No such device"


class InsufficientScopeError(DomainError):
    code = "insufficient_scope"
    title = "The device's scopes do not allow this"
