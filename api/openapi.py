"""The OpenAPI document: operation ids and tags, problem schemas, exact responses, sorted.

`document(app)` is what `GET /openapi.json` serves and `c2 openapi` prints. Problem responses
are derived from api/openapi_problems.py (which codes each operation answers), headers and op
outcomes from api/openapi_responses.py; nothing about errors is declared route by route.

Over 300 lines: the problem schema's members and the passes FastAPI's document needs
(discriminators required, always-present fields required, optional bodies without a null
branch, sorting), in the order `document` runs them; the problem table and the headers are
modules of their own already.
"""

from __future__ import annotations

import json
import re
import threading
import typing
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from c2.api import openapi_problems, openapi_responses
from c2.api.errors import HttpProblem, status_of
from c2.core.errors import DomainError
from c2.core.protocol.events import Event
from c2.core.protocol.state import SessionSnapshot

Responses = dict[int | str, dict[str, Any]]
TITLE = "c2"
API_VERSION = "1.0.0"
OP_TAG = "ops"  # the FastAPI tag of the op routes (api/routes/ops.py)


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


def error_codes() -> list[dict[str, Any]]:
    """Every stable problem code of core/ and api/, sorted by code."""
    seen: dict[str, dict[str, Any]] = {}
    stack: list[type[DomainError] | type[HttpProblem]] = [DomainError, HttpProblem]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith(("c2.core.", "c2.api.")) and cls.code not in seen:
            seen[cls.code] = {"code": cls.code, "status": status_of(cls), "title": cls.title}
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
        "paths": {
            "type": "array",
            "description": "`outside_changes`: the paths changed outside any turn",
            "items": {"type": "string"},
        },
        "owner": {
            "type": "string",
            "description": "`owner_unavailable`, `owner_unreachable`: the id of the cluster "
            "instance that owns the session (as in `GET /v1/instances`)",
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
    }


# The protocol frame members a framed problem carries on top of the problem (docs/api.md §4).
FRAME_MEMBERS: dict[str, dict[str, Any]] = {
    "sessions_error": {
        "kind": {"type": "string", "enum": ["sessions_error"]},
        "message": {"type": "string"},
    },
    "transcript_error": {
        "kind": {"type": "string", "enum": ["transcript_error"]},
        "message": {"type": "string"},
        "session": {"type": "string"},
        "request_id": {"type": ["string", "null"]},
    },
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


def _refs(value: Any) -> set[str]:
    return set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(value)))


def _reachable(schemas: dict[str, Any], roots: set[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name not in seen and name in schemas:
            seen.add(name)
            stack.extend(_refs(schemas[name]))
    return seen


def _null_default(prop: dict[str, Any]) -> bool:
    """Whether an optional pydantic field defaults to None (FastAPI drops `default: null`;
    a non-null default is kept, a default_factory leaves no default and no null type)."""
    if "default" in prop:
        return prop["default"] is None
    types = [prop.get("type")] + [member.get("type") for member in prop.get("anyOf", [])]
    return "null" in types or any(isinstance(t, list) and "null" in t for t in types)


def _require_always_present(doc: dict[str, Any], written: set[str]) -> None:
    """Mark `required` what the wire always carries, in schemas only responses use: a field
    whose default is not None (no serializer drops those; `exclude_none` drops only the
    `= None` ones), every SessionSnapshot field (its `wire()` keeps nulls) and the fields an
    event keeps as null (`_always_present`). The problem schemas written here (`written`)
    are exact already."""
    schemas = doc["components"]["schemas"]
    requests = [
        {key: op.get(key) for key in ("requestBody", "parameters")}
        for item in doc["paths"].values()
        for op in item.values()
    ]
    inputs = _reachable(schemas, _refs(requests))
    always: dict[str, set[str]] = {SessionSnapshot.__name__: set(SessionSnapshot.model_fields)}
    for member in typing.get_args(typing.get_args(Event)[0]):
        always[member.__name__] = set(getattr(member, "_always_present", ()))
    for name in _reachable(schemas, _refs(doc["paths"])) - inputs - written:
        schema = schemas[name]
        properties = schema.get("properties", {})
        present = always.get(name, set()) | {
            prop for prop, sub in properties.items() if not _null_default(sub)
        }
        missing = sorted(present & set(properties) - set(schema.get("required", [])))
        if missing:
            schema["required"] = [*schema.get("required", []), *missing]


def _optional_bodies(doc: dict[str, Any]) -> None:
    """An optional body's schema is its model, not FastAPI's `anyOf [model, null]` (from
    `body: Model | None = None`): `required: false` already lets a client leave it out, and
    openapi-python-client sends its UNSET default as the JSON value of a nullable body, which
    fails. The server still takes no body, an empty one, `null` or the object."""
    for item in doc["paths"].values():
        for operation in item.values():
            body = operation.get("requestBody", {})
            if body.get("required", False):
                continue
            for media in body.get("content", {}).values():
                members = media.get("schema", {}).get("anyOf", [])
                kept = [member for member in members if member != {"type": "null"}]
                if len(kept) == 1 < len(members):
                    media["schema"] = kept[0]


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
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    problems = _problem_schemas()
    schemas.update(problems)
    _require_discriminators(schemas)
    _require_always_present(doc, set(problems))
    _optional_bodies(doc)
    op_ids = {  # the op routes, by the router tag FastAPI copied onto them
        op["operationId"]
        for item in doc["paths"].values()
        for op in item.values()
        if OP_TAG in op.get("tags", []) and op["operationId"] != openapi_problems.SUBMIT_OP
    }
    openapi_responses.op_outcomes(doc, OP_TAG)
    openapi_problems.apply(doc, op_ids, FRAME_MEMBERS)
    openapi_responses.headers(doc, op_ids)
    for path, item in doc["paths"].items():
        for operation in item.values():
            operation["tags"] = [resource_tag(path)]
    # FastAPI's default 422 body is replaced by a problem everywhere; drop its orphans.
    for unused in ("HTTPValidationError", "ValidationError"):
        if unused in schemas and unused not in json.dumps(doc["paths"]):
            del schemas[unused]
    return _sorted(doc)  # type: ignore[no-any-return]


def install_openapi(app: FastAPI) -> None:
    """`app.openapi()` builds the document once. GET /openapi.json builds it on a worker thread
    while the loop serves on (api/routes/docs.py): one build, however many ask first."""
    cache: dict[str, Any] = {}
    lock = threading.Lock()

    def openapi() -> dict[str, Any]:
        with lock:
            if not cache:
                cache.update(document(app))
        return cache

    app.openapi = openapi  # type: ignore[method-assign]


def dumps(doc: dict[str, Any]) -> str:
    """The committed text form: sorted keys, two-space indent, trailing newline."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
