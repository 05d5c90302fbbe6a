"""Which problems each operation answers: the one table, and the responses derived from it.

`OWN_PROBLEMS` lists, per operationId, the errors the operation's own work raises (its core
call). What the request's path through the app adds is derived from the operation's shape:
the Host allowlist, the body limit and the 500 catch-all answer every request; the request
guard's credential and scope checks answer every `/v1` route but pairing; a route with
parameters or a body answers validation errors, one with a body the media-type check; an op
route answers what the dispatcher adds (shutdown, a reused `request_id`); `submitOp` answers
what any op route does. Each status an operation answers then gets its own schema,
`<OperationId>Problem<status>`, whose `code` enumerates exactly those codes (statuses only the
shared checks answer stay in the open `default` Problem). Statuses come from api/errors.py.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from api.errors import (
    PROBLEM_MEDIA_TYPE,
    HostNotAllowedError,
    InternalError,
    InvalidHostError,
    NotReadyError,
    PayloadTooLargeError,
    Problem,
    RequestInvalidError,
    ShuttingDownError,
    TooManyStreamsError,
    UnsupportedMediaTypeError,
    status_of,
)
from core.errors import (
    AgentAuthRequiredError,
    BudgetExceededError,
    CapacityError,
    CheckpointGitError,
    DeviceNotFoundError,
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
    NoCheckpointsError,
    NoSuchCheckpointError,
    NoSuchTurnError,
    OperationFailedError,
    OutsideChangesError,
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

ProblemClass = type[Problem]
_REF = "#/components/schemas/"
SUBMIT_OP = "submitOp"

_SETTINGS = (SessionNotFoundError, OperationFailedError)
# The errors of each operation's own work (its core call), by operationId.
OWN_PROBLEMS: dict[str, tuple[ProblemClass, ...]] = {
    "healthz": (),
    "readyz": (NotReadyError,),
    # devices
    "pair": (InvalidPairingTokenError, RateLimitedError, StoreUnavailableError),
    "createStreamTicket": (),
    "listDevices": (),
    "revokeDevice": (DeviceNotFoundError,),
    "streamEvents": (SessionNotFoundError, TooManyStreamsError, InvalidTicketError),
    # ops (the dispatcher adds its own; submitOp answers all of them)
    SUBMIT_OP: (),
    "createSession": (
        InvalidCwdError,
        UnknownProviderError,
        ProviderUnavailableError,
        AgentAuthRequiredError,
        CapacityError,
        WorktreeError,
        InvalidMcpServerError,
        McpUnsupportedError,
        TurnFailedError,
    ),
    "prompt": (
        SessionNotFoundError,
        SessionUnavailableError,
        TurnAlreadyRunningError,
        TurnFailedError,
        BudgetExceededError,
        CapacityError,
        ProviderUnavailableError,
        AgentAuthRequiredError,
        WorktreeError,
    ),
    "cancel": (SessionNotFoundError,),
    "answerPermission": (SessionNotFoundError, PermissionNotPendingError, InvalidOptionError),
    "setExecutionPolicy": _SETTINGS,
    "setPermissionMode": _SETTINGS,
    "setSandbox": _SETTINGS,
    "setModel": (*_SETTINGS, UnknownModelError),
    "setMode": (*_SETTINGS, UnknownModeError),
    "setConfigOption": (OperationFailedError,),  # only while the agent runs: no load
    # session reads and removals
    "listSessions": (InvalidCursorError,),
    "getSession": (SessionNotFoundError,),
    "deleteSession": (SessionNotFoundError,),
    "discardWorktree": (
        SessionNotFoundError,
        SessionUnavailableError,
        TurnAlreadyRunningError,
        WorktreeError,
    ),
    "getTranscript": (SessionNotFoundError, TranscriptCursorError),
    "previewPrompt": (SessionNotFoundError,),
    # catalogs
    "getWorktreeBaselines": (InvalidCwdError, WorktreeError),
    "listProviders": (),
    "listSkills": (InvalidCwdError,),
    # usage
    "getUsage": (SessionNotFoundError, InvalidUsageQueryError),
    "setSessionBudget": (SessionNotFoundError,),
    "setDeviceBudget": (DeviceNotFoundError,),
    "search": (SessionNotFoundError, InvalidQueryError, InvalidCursorError),
    # notifications
    "createWebhook": (InvalidWebhookUrlError, UnknownEventError, RequestIdReusedError),
    "listWebhooks": (),
    "getWebhook": (WebhookNotFoundError,),
    "updateWebhook": (WebhookNotFoundError, InvalidWebhookUrlError, UnknownEventError),
    "deleteWebhook": (WebhookNotFoundError,),
    "listWebhookDeliveries": (WebhookNotFoundError,),
    "getVapidPublicKey": (),
    "createPushSubscription": (InvalidPushSubscriptionError,),
    "listPushSubscriptions": (),
    "deletePushSubscription": (PushSubscriptionNotFoundError,),
    # checkpoints, forks, the follow-up queue (issue 14)
    "turnDiff": (SessionNotFoundError, NoCheckpointsError, NoSuchTurnError, CheckpointGitError),
    "sessionDiff": (SessionNotFoundError, NoCheckpointsError, CheckpointGitError),
    "rewind": (
        SessionNotFoundError,
        TurnAlreadyRunningError,
        ForceRequiredError,
        OutsideChangesError,
        NoCheckpointsError,
        NoSuchTurnError,
        NoSuchCheckpointError,
        WorktreeError,
        CheckpointGitError,
    ),
    "forkSession": (
        SessionNotFoundError,
        NoSuchTurnError,
        WorktreeError,
        NoCheckpointsError,
        CheckpointGitError,
        ProviderUnavailableError,
        AgentAuthRequiredError,
        CapacityError,
        McpUnsupportedError,
        TurnFailedError,
    ),
    "queuePrompt": (SessionNotFoundError,),
    "getQueue": (SessionNotFoundError,),
    "editQueued": (SessionNotFoundError, QueueItemNotFoundError),
    "removeQueued": (SessionNotFoundError, QueueItemNotFoundError),
    "resumeQueue": (SessionNotFoundError,),
}
# Routes that answer their own errors in a protocol frame shape (api/errors.py `framed`).
FRAMED = {"listSessions": "sessions_error", "getTranscript": "transcript_error"}

# Every request: the Host allowlist, the body limit, the catch-all. They join the codes of a
# status the operation answers anyway, but declare no status by themselves.
_EVERY_REQUEST: tuple[ProblemClass, ...] = (
    InvalidHostError,
    HostNotAllowedError,
    PayloadTooLargeError,
    InternalError,
)
# The request guard of /v1 (api/guard.py): credentials (a store failure while checking them is
# a 503), the failure limiter, the route's scope.
_GUARDED: tuple[ProblemClass, ...] = (
    UnauthorizedError,
    RateLimitedError,
    StoreUnavailableError,
    InsufficientScopeError,
)
# The op dispatcher (api/dispatch.py): a store failure, shutdown, a reused request_id.
_DISPATCHED: tuple[ProblemClass, ...] = (
    StoreUnavailableError,
    ShuttingDownError,
    RequestIdReusedError,
)


_SHARED_CODES = {
    cls.code
    for cls in (
        *_EVERY_REQUEST,
        *_GUARDED,
        *_DISPATCHED,
        RequestInvalidError,
        UnsupportedMediaTypeError,
    )
}


def operation_problems(
    path: str, operation: dict[str, Any], op_ids: Iterable[str]
) -> dict[str, list[ProblemClass]]:
    """The problem classes `operation` answers, by status (as a string), each list in the
    order first met; `op_ids` are the operationIds of the op routes (for submitOp)."""
    op_id = operation["operationId"]
    own = list(OWN_PROBLEMS[op_id])
    if op_id == SUBMIT_OP:
        own += [cls for op in sorted(op_ids) for cls in OWN_PROBLEMS[op]]
    if path.startswith("/v1/") and operation.get("security") != []:
        own += _GUARDED
    if operation.get("parameters") or "requestBody" in operation:
        own.append(RequestInvalidError)
    if "requestBody" in operation:
        own.append(UnsupportedMediaTypeError)
    if op_id in op_ids or op_id == SUBMIT_OP:
        own += _DISPATCHED
    by_status: dict[str, list[ProblemClass]] = {}
    for cls in own:
        listed = by_status.setdefault(str(status_of(cls)), [])
        if cls not in listed:
            listed.append(cls)
    for cls in _EVERY_REQUEST:
        listed = by_status.get(str(status_of(cls)), [])
        if listed and cls not in listed:
            listed.append(cls)
    return by_status


# Problem members only some codes carry (core/errors.py details, api/error_handlers.py).
_MEMBER_CODES = {
    "errors": {"validation_error"},
    "limit": {"budget_exceeded"},
    "used": {"budget_exceeded"},
    "auth_methods": {"agent_auth_required"},
    "stderr_tail": {"agent_auth_required", "provider_unavailable", "turn_failed"},
    "paths": {"outside_changes"},
}


def _pascal(op_id: str) -> str:
    return op_id[:1].upper() + op_id[1:]


def _schema(
    problem: dict[str, Any],
    name: str,
    codes: list[str],
    frame: tuple[str, dict[str, Any], bool] | None,
) -> dict[str, Any]:
    """Problem narrowed to `codes`; with `frame` (kind, members, always framed) the frame's
    members too, required when every code of the status is answered framed."""
    schema = copy.deepcopy(problem)
    schema.pop("x-codes", None)
    schema["title"] = name
    schema["description"] = "A problem; `code` is one of the codes this response answers."
    schema["properties"]["code"] = {"type": "string", "enum": codes}
    for member, carriers in _MEMBER_CODES.items():
        if not carriers & set(codes):
            del schema["properties"][member]
    if frame is not None:
        kind, members, always = frame
        schema["description"] += f" Errors of the route itself also carry the `{kind}` frame."
        schema["properties"] |= copy.deepcopy(members)
        if always:
            schema["required"] = [*schema["required"], *sorted(members)]
    return schema


def apply(doc: dict[str, Any], op_ids: set[str], frame_members: dict[str, Any]) -> None:
    """Replace every operation's problem responses with the ones derived from the table."""
    schemas = doc["components"]["schemas"]
    for path, item in doc["paths"].items():
        for operation in item.values():
            op_id = operation["operationId"]
            responses = operation["responses"]
            for status in [s for s in responses if s[:1] in ("4", "5")]:
                del responses[status]
            framed_kind = FRAMED.get(op_id)
            for status, classes in sorted(operation_problems(path, operation, op_ids).items()):
                codes = [cls.code for cls in classes]
                frame = None
                if framed_kind is not None:
                    framed = {cls.code for cls in OWN_PROBLEMS[op_id]} | {"store_unavailable"}
                    if framed & set(codes):
                        always = set(codes) <= framed - _SHARED_CODES
                        frame = (framed_kind, frame_members[framed_kind], always)
                name = f"{_pascal(op_id)}Problem{status}"
                schemas[name] = _schema(schemas["Problem"], name, codes, frame)
                responses[status] = {
                    "description": ", ".join(f"`{c}`" for c in codes) + " (problem)",
                    "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": _REF + name}}},
                }
            responses["default"] = {
                "description": "Any other error (problem)",
                "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": _REF + "Problem"}}},
            }
