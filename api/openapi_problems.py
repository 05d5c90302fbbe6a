"""Which problems each operation answers: the one table, and the responses derived from it.

`OWN_PROBLEMS` lists, per operationId, the errors the operation's own work raises (its core
call), written as their stable codes; the classes, and so the statuses, are api/errors.py's
(`problem_class`), so no error list is spelled twice. What the request's path through the
app adds is derived from the operation's shape: the Host allowlist answers every request
(400 `invalid_host`, 421 `host_not_allowed`), the body limit every operation taking a body
(413 `payload_too_large`); the request guard's credential and scope checks answer every
`/v1` route but pairing; a route with parameters or a body answers validation errors, one
with a body the media-type check; an op route answers what the dispatcher adds (shutdown, a
reused `request_id`); `submitOp` answers what any op route does. Each status an operation
answers then gets its own schema, `<OperationId>Problem<status>`, whose `code` enumerates
exactly those codes. The 500 catch-all (and the body limit, should a request without a
declared body send one) joins a status the operation answers anyway but declares none by
itself: it stays in the open `default` Problem. `replayable_statuses` names the 4xx statuses
whose answer may be a kept reply replayed (core/idempotent.py keeps 2xx and 4xx outcomes).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from c2.api.errors import PROBLEM_MEDIA_TYPE, Problem, problem_class, status_of
from c2.api.forward import session_target

ProblemClass = type[Problem]
_REF = "#/components/schemas/"
SUBMIT_OP = "submitOp"
# Marks an operation that a cluster member relays to the session's owner (api/forward.py).
RELAYED = "x-c2-relayed-to-owner"


def _classes(*codes: str) -> tuple[ProblemClass, ...]:
    return tuple(problem_class(code) for code in codes)


_SETTINGS = ("no_such_session", "operation_failed")
# The codes of each operation's own work (its core call), by operationId; the classes (and
# so the statuses) are api/errors.py's, found by code.
_OWN_CODES: dict[str, tuple[str, ...]] = {
    "healthz": (),
    "readyz": ("not_ready",),
    # devices
    "pair": ("invalid_pairing_token", "rate_limited", "store_unavailable"),
    "createStreamTicket": (),
    "listDevices": (),
    "revokeDevice": ("no_such_device",),
    "streamEvents": ("no_such_session", "too_many_streams", "invalid_ticket"),
    # cluster (issue 18)
    "listInstances": (),
    # ops (the dispatcher adds its own; submitOp answers all of them)
    SUBMIT_OP: (),
    "createSession": (
        "invalid_cwd",
        "unknown_provider",
        "provider_unavailable",
        "agent_auth_required",
        "capacity",
        "worktree_error",
        "invalid_mcp_server",
        "mcp_unsupported",
        "turn_failed",
    ),
    "prompt": (
        "no_such_session",
        "session_unavailable",
        "turn_already_running",
        "turn_failed",
        "budget_exceeded",
        "capacity",
        "provider_unavailable",
        "agent_auth_required",
        "worktree_error",
    ),
    "cancel": ("no_such_session",),
    "answerPermission": ("no_such_session", "permission_not_pending", "invalid_option"),
    "setExecutionPolicy": _SETTINGS,
    "setPermissionMode": _SETTINGS,
    "setSandbox": _SETTINGS,
    "setModel": (*_SETTINGS, "unknown_model"),
    "setMode": (*_SETTINGS, "unknown_mode", "mode_exceeds_policy"),
    "setConfigOption": ("no_such_session", "operation_failed"),  # only while the agent runs
    # session reads and removals
    "listSessions": ("invalid_cursor",),
    "getSession": ("no_such_session",),
    "deleteSession": ("no_such_session",),
    "discardWorktree": (
        "no_such_session",
        "session_unavailable",
        "turn_already_running",
        "worktree_error",
    ),
    "getTranscript": ("no_such_session", "transcript_error"),
    "previewPrompt": ("no_such_session",),
    # catalogs
    "getWorktreeBaselines": ("invalid_cwd", "worktree_error"),
    "listProviders": (),
    "listSkills": ("invalid_cwd",),
    # usage
    "getUsage": ("no_such_session", "invalid_usage_query"),
    "setSessionBudget": ("no_such_session",),
    "setDeviceBudget": ("no_such_device",),
    "search": ("no_such_session", "invalid_query", "invalid_cursor"),
    # notifications
    "createWebhook": ("invalid_webhook_url", "unknown_event", "request_id_reused"),
    "listWebhooks": (),
    "getWebhook": ("no_such_webhook",),
    "updateWebhook": ("no_such_webhook", "invalid_webhook_url", "unknown_event"),
    "deleteWebhook": ("no_such_webhook",),
    "listWebhookDeliveries": ("no_such_webhook",),
    "getVapidPublicKey": (),
    "createPushSubscription": ("invalid_push_subscription",),
    "listPushSubscriptions": (),
    "deletePushSubscription": ("no_such_push_subscription",),
    # checkpoints, forks, the follow-up queue (issue 14)
    "turnDiff": ("no_such_session", "no_checkpoints", "no_such_turn", "checkpoint_failed"),
    "sessionDiff": ("no_such_session", "no_checkpoints", "checkpoint_failed"),
    "rewind": (
        "no_such_session",
        "turn_already_running",
        "force_required",
        "outside_changes",
        "no_checkpoints",
        "no_such_turn",
        "no_such_checkpoint",
        "worktree_error",
        "checkpoint_failed",
    ),
    "forkSession": (
        "no_such_session",
        "no_such_turn",
        "worktree_error",
        "no_checkpoints",
        "checkpoint_failed",
        "provider_unavailable",
        "agent_auth_required",
        "capacity",
        "mcp_unsupported",
        "turn_failed",
    ),
    "queuePrompt": ("no_such_session",),
    "getQueue": ("no_such_session",),
    "editQueued": ("no_such_session", "no_such_queue_item"),
    "removeQueued": ("no_such_session", "no_such_queue_item"),
    "resumeQueue": ("no_such_session",),
}
OWN_PROBLEMS: dict[str, tuple[ProblemClass, ...]] = {
    op_id: _classes(*codes) for op_id, codes in _OWN_CODES.items()
}
# Routes that answer their own errors in a protocol frame shape (api/errors.py `framed`).
FRAMED = {"listSessions": "sessions_error", "getTranscript": "transcript_error"}

# Every request: the Host allowlist (api/hosts.py), declared on every operation; the body
# limit (api/guard.py), declared on every operation taking a body.
_HOST_CHECKS = _classes("invalid_host", "host_not_allowed")
_TOO_LARGE = problem_class("payload_too_large")
# The body limit and the catch-all join the codes of a status the operation answers anyway,
# but declare no status by themselves (the limit does on an operation with a body).
_EVERY_REQUEST = (*_HOST_CHECKS, _TOO_LARGE, problem_class("internal_error"))
# The request guard of /v1 (api/guard.py): credentials (a store failure while checking them is
# a 503), the failure limiter, the route's scope.
_GUARDED = _classes("unauthorized", "rate_limited", "store_unavailable", "insufficient_scope")
# The op dispatcher (api/dispatch.py): a store failure, shutdown, a reused request_id.
_DISPATCHED = _classes("store_unavailable", "shutting_down", "request_id_reused")
# A route with parameters or a body: validation; one with a body: its media type.
_INVALID, _MEDIA_TYPE = _classes("validation_error", "unsupported_media_type")


_SHARED_CODES = {
    cls.code for cls in (*_EVERY_REQUEST, *_GUARDED, *_DISPATCHED, _INVALID, _MEDIA_TYPE)
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
        own.append(_INVALID)
    if "requestBody" in operation:
        own.append(_MEDIA_TYPE)
    if op_id in op_ids or op_id == SUBMIT_OP:
        own += _DISPATCHED
    if operation.get(RELAYED):
        own += _classes("owner_unreachable", "owner_unavailable")
    own += _HOST_CHECKS
    if "requestBody" in operation:
        own.append(_TOO_LARGE)
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


def replayable_statuses(op_id: str, op_ids: Iterable[str]) -> set[str]:
    """The 4xx statuses at which the operation, asked again with a used `request_id`, may
    answer a kept reply (`Idempotent-Replayed: true`): those of its own work's refusals, which
    an idempotency record keeps as it keeps a success. The request's checks (credentials,
    validation, media type, Host, size) answer before anything is kept, and a reused
    `request_id` is refused afresh each time."""
    ops = [op_id, *sorted(op_ids)] if op_id == SUBMIT_OP else [op_id]
    return {
        str(status_of(cls))
        for op in ops
        for cls in OWN_PROBLEMS[op]
        if 400 <= status_of(cls) < 500 and cls.code != "request_id_reused"
    }


# Problem members only some codes carry (core/errors.py details, api/error_handlers.py).
_MEMBER_CODES = {
    "errors": {"validation_error"},
    "limit": {"budget_exceeded"},
    "used": {"budget_exceeded"},
    "auth_methods": {"agent_auth_required"},
    "stderr_tail": {"agent_auth_required", "provider_unavailable", "turn_failed"},
    "paths": {"outside_changes"},
    "owner": {"owner_unavailable", "owner_unreachable"},
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
        for method, operation in item.items():
            op_id = operation["operationId"]
            if op_id == SUBMIT_OP or session_target(method.upper(), path) is not None:
                operation[RELAYED] = True  # a cluster relays it to the session's owner
            responses = operation["responses"]
            for status in [s for s in responses if s[:1] in ("4", "5")]:
                del responses[status]
            framed_kind = FRAMED.get(op_id)
            for status, classes in sorted(operation_problems(path, operation, op_ids).items()):
                codes = [cls.code for cls in classes]
                frame = None
                if framed_kind is not None:
                    framed = {*_OWN_CODES[op_id], "store_unavailable"}
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
