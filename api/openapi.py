"""The OpenAPI document: problem schemas, the stable error-code table, deterministic output.

`document(app)` is what `GET /openapi.json` serves and `c2 openapi` prints; `problems()` is
how routes declare their problem responses so schemathesis can check conformance.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

import core.auth
import core.engine
import core.errors
from api import errors as api_errors
from api.errors import PROBLEM_MEDIA_TYPE

Responses = dict[int | str, dict[str, Any]]
TITLE = "c2"
API_VERSION = "1.0.0"
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
# Every module the app raises DomainErrors from, so the code table does not depend on what
# else happens to be imported.
_ERROR_MODULES = (core.auth, core.engine, core.errors, api_errors)
_DESCRIPTIONS = {
    400: "Bad request (problem)",
    401: "Missing, invalid or revoked credentials (problem)",
    404: "Not found (problem)",
    409: "Conflict (problem)",
    421: "Host not allowed (problem)",
    422: "Validation failed (problem)",
    429: "Rate limited (problem, Retry-After)",
    501: "Not implemented (problem)",
    503: "Unavailable (problem, Retry-After when known)",
}


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


def _problem_schemas() -> dict[str, Any]:
    codes = error_codes()
    table = "\n".join(f"- `{c['code']}` ({c['status']}): {c['title']}" for c in codes)
    problem = {
        "type": "object",
        "title": "Problem",
        "description": "RFC 9457 problem details. `code` is stable; see x-codes.",
        "required": ["type", "title", "status", "detail", "code"],
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "code": {"type": "string", "description": f"Stable error code:\n{table}"},
            "request_id": {"type": ["string", "null"]},
            "session": {"type": ["string", "null"]},
            "errors": {"type": "array", "items": {"type": "object"}},
            "auth_methods": {
                "type": "array",
                "description": "agent_auth_required: the agent's ACP authMethods",
                "items": {
                    "type": "object",
                    "required": ["id", "name"],
                    "properties": {
                        "id": {"type": "string"},
                        "name": {"type": "string"},
                        "description": {"type": ["string", "null"]},
                    },
                },
            },
            "stderr_tail": {
                "type": "string",
                "description": "Agent failures: what the agent wrote to stderr meanwhile "
                "(last 2 KiB / 20 lines)",
            },
            "limit": {
                "type": "object",
                "description": "`budget_exceeded`: the session's budget",
                "properties": {
                    "max_cost": {"type": ["number", "null"]},
                    "max_tokens": {"type": ["integer", "null"]},
                },
            },
            "used": {
                "type": "object",
                "description": "`budget_exceeded`: summed cost and total tokens so far",
                "properties": {"cost": {"type": "number"}, "tokens": {"type": "integer"}},
            },
        },
        "x-codes": codes,
    }
    sessions_error = {
        "allOf": [_PROBLEM_REF],
        "type": "object",
        "title": "SessionsError",
        "required": ["kind", "message"],
        "properties": {"kind": {"const": "sessions_error"}, "message": {"type": "string"}},
    }
    transcript_error = {
        "allOf": [_PROBLEM_REF],
        "type": "object",
        "title": "TranscriptError",
        "required": ["kind", "session", "request_id", "message"],
        "properties": {
            "kind": {"const": "transcript_error"},
            "session": {"type": "string"},
            "request_id": {"type": ["string", "null"]},
            "message": {"type": "string"},
        },
    }
    return {
        "Problem": problem,
        "SessionsError": sessions_error,
        "TranscriptError": transcript_error,
    }


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
