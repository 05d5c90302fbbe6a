"""Exact responses in the OpenAPI document: the headers each response carries, op outcomes.

Applied by `api.openapi.document` after FastAPI built the document from the route table (and
api/openapi_problems.py added the problem responses), so new routes and ops are covered
without listing them here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from c2.api.openapi_problems import replayable_statuses

_REF = "#/components/schemas/"
_SUCCESS = ("200", "201", "202")

HEADERS: dict[str, Any] = {
    "RequestId": {
        "description": "The request's `request_id`, echoed (non-ASCII percent-encoded UTF-8).",
        "schema": {"type": "string"},
    },
    "IdempotentReplayed": {
        "description": "`true` when this is the stored outcome of an earlier identical request.",
        "schema": {"type": "string", "enum": ["true"]},
    },
    "RetryAfter": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 0},
    },
    "WWWAuthenticate": {
        "description": 'The authentication scheme to use: `Bearer realm="c2"`.',
        "schema": {"type": "string"},
    },
    "Location": {
        "description": "The created resource.",
        "schema": {"type": "string", "format": "uri-reference"},
    },
}


def _header(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/headers/{name}"}


def _correlated(operation: dict[str, Any], schemas: dict[str, Any]) -> bool:
    """Whether the operation's body can carry a `request_id` (idempotent retry, echo)."""
    content = operation.get("requestBody", {}).get("content", {})
    stack = [media.get("schema", {}) for media in content.values()]
    while stack:
        schema = stack.pop()
        if "$ref" in schema:
            schema = schemas.get(schema["$ref"].removeprefix(_REF), {})
        if "request_id" in schema.get("properties", {}):
            return True
        stack.extend(schema.get("oneOf", []) + schema.get("anyOf", []))
    return False


def _op_outcomes(doc: dict[str, Any], op_paths: set[tuple[str, str]]) -> None:
    """`POST /v1/ops` answers what the resource route of each op answers: per success status,
    the union of their outcome schemas."""
    by_status: dict[str, list[dict[str, Any]]] = {}
    submit = None
    for path, method in sorted(op_paths):
        operation = doc["paths"][path][method]
        if operation["operationId"] == "submitOp":
            submit = operation
            continue
        for status in _SUCCESS:
            media = operation["responses"].get(status, {}).get("content", {})
            schema = media.get("application/json", {}).get("schema")
            if schema and schema not in by_status.setdefault(status, []):
                by_status[status].append(schema)
    if submit is None:
        return
    for status, members in by_status.items():
        response = submit["responses"].setdefault(status, {"description": "Op outcome"})
        one = members[0] if len(members) == 1 else {"anyOf": members}
        response["content"] = {"application/json": {"schema": one}}


def op_outcomes(doc: dict[str, Any], op_tag: str) -> None:
    """`POST /v1/ops` success bodies: the union of the op routes' outcomes, per status."""
    op_paths = {
        (path, method)
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        if op_tag in operation.get("tags", [])
    }
    _op_outcomes(doc, op_paths)


def headers(doc: dict[str, Any], op_ids: Iterable[str]) -> None:
    """Declare on each response the headers it may carry; `op_ids` are the operationIds of
    the op routes. A correlated operation's successes and the 4xx refusals its retry may
    replay carry `Idempotent-Replayed`."""
    schemas = doc["components"]["schemas"]
    doc["components"]["headers"] = HEADERS
    for item in doc["paths"].values():
        for operation in item.values():
            correlated = _correlated(operation, schemas)
            replayable = {*_SUCCESS, *replayable_statuses(operation["operationId"], op_ids)}
            for status, response in operation["responses"].items():
                declared = response.setdefault("headers", {})
                if status in ("429", "503"):
                    declared["Retry-After"] = _header("RetryAfter")
                if correlated and status != "default":
                    declared["Request-Id"] = _header("RequestId")
                    if status in replayable:
                        declared["Idempotent-Replayed"] = _header("IdempotentReplayed")
                if status == "201":
                    declared["Location"] = _header("Location")
                if status == "401":
                    declared["WWW-Authenticate"] = _header("WWWAuthenticate")
                if not declared:
                    del response["headers"]
