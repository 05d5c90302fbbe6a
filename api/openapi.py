"""The OpenAPI document: problem schemas, the stable error-code table, deterministic output.

`document(app)` is what `GET /openapi.json` serves and `c2 openapi` prints; `problems()` is
how routes declare their problem responses so schemathesis can check conformance.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

import core.auth
import core.engine
import core.errors
import core.scopes
from api import errors as api_errors
from api import media as api_media
from api import openapi_responses
from api.errors import PROBLEM_MEDIA_TYPE

Responses = dict[int | str, dict[str, Any]]
TITLE = "c2"
API_VERSION = "1.0.0"
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
# Every module the app raises DomainErrors from, so the code table does not depend on what
# else happens to be imported.
_ERROR_MODULES = (core.auth, core.engine, core.errors, core.scopes, api_errors, api_media)
_DESCRIPTIONS = {
    400: "Bad request (problem)",
    401: "Missing, invalid or revoked credentials (problem)",
    403: "Outside the device's scopes: `insufficient_scope` (problem)",
    404: "Not found (problem)",
    409: "Conflict (problem)",
    421: "Host not allowed (problem)",
    422: "Validation failed (problem)",
    429: "Rate limited (problem, Retry-After)",
    501: "Not implemented (problem)",
    503: "Unavailable (problem, Retry-After when known)",
}


# operationIds are the route function's name in camelCase, except where that name does not
# read as a verb phrase in a generated client. Published ids are part of the contract.
_OPERATION_IDS = {
    "new_session": "createSession",
    "transcript": "getTranscript",
    "events": "streamEvents",
    "worktree_baselines": "getWorktreeBaselines",
    "providers": "listProviders",
    "skills": "listSkills",
    "prompt_preview": "previewPrompt",
    "stream_ticket": "createStreamTicket",
}
# One tag per resource: the first path segment after /v1, except the probes and pairing.
_TAGS = {"healthz": "health", "readyz": "health", "pair": "devices", "push-subscriptions": "push"}


def operation_id(route: APIRoute) -> str:
    """FastAPI's `generate_unique_id_function`: a short stable id from the route's name."""
    if route.name in _OPERATION_IDS:
        return _OPERATION_IDS[route.name]
    head, *rest = route.name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def resource_tag(path: str) -> str:
    """The tag of an operation on `path`: its resource (`/v1/sessions/{id}/prompt` → sessions)."""
    segments = [s for s in path.split("/") if s and s != "v1"]
    head = segments[0] if segments else "root"
    return _TAGS.get(head, head)


def problems(*statuses: int, schema: str = "Problem") -> Responses:
    """Route `responses=` entries: each status plus `default` answer a problem+json body."""
    ref = {"$ref": f"#/components/schemas/{schema}"}
    declared: Responses = {
        status: {
            "description": _DESCRIPTIONS.get(status, "Error (problem)"),
            "content": {PROBLEM_MEDIA_TYPE: {"schema": ref}},
        }
        for status in statuses
    }
    declared["default"] = {
        "description": "Any other error (problem)",
        "content": {PROBLEM_MEDIA_TYPE: {"schema": _PROBLEM_REF}},
    }
    return declared


def error_codes() -> list[dict[str, Any]]:
    """Every stable problem code of core/ and api/, sorted by code."""
    seen: dict[str, dict[str, Any]] = {}
    stack = [core.errors.DomainError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] in ("core", "api") and cls.code not in seen:
            seen[cls.code] = {"code": cls.code, "status": cls.status, "title": cls.title}
    return sorted(seen.values(), key=lambda c: str(c["code"]))


def _problem_properties(codes: list[dict[str, Any]]) -> dict[str, Any]:
    table = "\n".join(f"- `{c['code']}` ({c['status']}): {c['title']}" for c in codes)
    return {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string", "description": f"Stable error code:\n{table}"},
        "request_id": {"type": "string"},
        "session": {"type": "string"},
        "errors": {"type": "array", "items": {"$ref": "#/components/schemas/FieldError"}},
        "auth_methods": {
            "type": "array",
            "description": "agent_auth_required: the agent's ACP authMethods",
            "items": {"$ref": "#/components/schemas/AuthMethod"},
        },
        "stderr_tail": {
            "type": "string",
            "description": "Agent failures: what the agent wrote to stderr meanwhile "
            "(last 2 KiB / 20 lines)",
        },
        "limit": {
            "$ref": "#/components/schemas/BudgetLimit",
            "description": "`budget_exceeded`: the session's budget",
        },
        "used": {
            "$ref": "#/components/schemas/BudgetUsed",
            "description": "`budget_exceeded`: summed cost and total tokens so far",
        },
    }


def _problem_schemas() -> dict[str, Any]:
    # Each problem schema is self-contained (no allOf, no inline objects): generators name
    # inline objects after their parent, and an allOf child re-creates its parent's inline
    # models under the same names (the ProblemErrorsItem collision).
    codes = error_codes()
    required = ["type", "title", "status", "detail", "code"]
    problem = {
        "type": "object",
        "title": "Problem",
        "description": "RFC 9457 problem details. `code` is stable; see x-codes.",
        "required": required,
        "properties": _problem_properties(codes),
        "x-codes": codes,
    }
    field_error = {
        "type": "object",
        "title": "FieldError",
        "description": "One validation failure: where (`loc`), what (`msg`), its `type`.",
        "required": ["loc", "msg", "type"],
        "properties": {
            "loc": {"type": "array", "items": {"type": "string"}},
            "msg": {"type": "string"},
            "type": {"type": "string"},
        },
    }
    sessions_error = {
        "type": "object",
        "title": "SessionsError",
        "description": "A problem that is also the protocol's `sessions_error` frame.",
        "required": [*required, "kind", "message"],
        "properties": _problem_properties(codes)
        | {"kind": {"type": "string", "enum": ["sessions_error"]}, "message": {"type": "string"}},
    }
    transcript_error = {
        "type": "object",
        "title": "TranscriptError",
        "description": "A problem that is also the protocol's `transcript_error` frame.",
        "required": [*required, "kind", "session", "message"],
        "properties": _problem_properties(codes)
        | {
            "kind": {"type": "string", "enum": ["transcript_error"]},
            "request_id": {"type": ["string", "null"]},
            "message": {"type": "string"},
        },
    }
    auth_method = {
        "type": "object",
        "title": "AuthMethod",
        "description": "One of the agent's ACP authMethods.",
        "required": ["id", "name"],
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "description": {"type": ["string", "null"]},
        },
    }
    budget_limit = {
        "type": "object",
        "title": "BudgetLimit",
        "description": "A budget's limits (null: no limit).",
        "required": ["max_cost", "max_tokens"],
        "properties": {
            "max_cost": {"type": ["number", "null"]},
            "max_tokens": {"type": ["integer", "null"]},
        },
    }
    budget_used = {
        "type": "object",
        "title": "BudgetUsed",
        "description": "Usage counted against a budget.",
        "required": ["cost", "tokens"],
        "properties": {"cost": {"type": "number"}, "tokens": {"type": "integer"}},
    }
    return {
        "Problem": problem,
        "FieldError": field_error,
        "AuthMethod": auth_method,
        "BudgetLimit": budget_limit,
        "BudgetUsed": budget_used,
        "SessionsError": sessions_error,
        "TranscriptError": transcript_error,
    }


def _require_discriminators(schemas: dict[str, Any]) -> None:
    """A union's tag is always on the wire: make it required in every member it maps to
    (pydantic leaves a defaulted `Literal` tag optional), so generators narrow on it."""
    for schema in list(schemas.values()):
        discriminator = schema.get("discriminator")
        if not isinstance(discriminator, dict):
            continue
        tag = discriminator["propertyName"]
        for ref in discriminator.get("mapping", {}).values():
            member = schemas[ref.rsplit("/", 1)[-1]]
            member["properties"][tag].pop("default", None)
            if tag not in member.setdefault("required", []):
                member["required"].insert(0, tag)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def document(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document with the problem schemas, keys sorted."""
    doc = get_openapi(
        title=TITLE,
        version=API_VERSION,
        description="HTTP + Server-Sent Events API hosting coding-agent sessions (API v1).",
        routes=app.routes,
    )
    doc.setdefault("components", {}).setdefault("schemas", {}).update(_problem_schemas())
    _require_discriminators(doc["components"]["schemas"])
    openapi_responses.apply(doc, error_codes(), op_tag="ops")
    for path, item in doc["paths"].items():
        for operation in item.values():
            operation["tags"] = [resource_tag(path)]
    schemas = doc["components"]["schemas"]
    # FastAPI's default 422 body is replaced by Problem everywhere; drop its orphans.
    for unused in ("HTTPValidationError", "ValidationError"):
        if unused in schemas and unused not in json.dumps(doc["paths"]):
            del schemas[unused]
    return _sorted(doc)  # type: ignore[no-any-return]


def install_openapi(app: FastAPI) -> None:
    cache: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not cache:
            cache.update(document(app))
        return cache

    app.openapi = openapi  # type: ignore[method-assign]


def dumps(doc: dict[str, Any]) -> str:
    """The committed text form: sorted keys, two-space indent, trailing newline."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
