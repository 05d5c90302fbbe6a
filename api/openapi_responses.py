"""Exact responses in the OpenAPI document: per-status problem codes, headers, 415, op outcomes.

Applied by `api.openapi.document` after FastAPI built the document from the route table, so
new routes, ops and error classes are covered without listing them here.
"""

from __future__ import annotations

import copy
from typing import Any

PROBLEM_MEDIA_TYPE = "application/problem+json"
_REF = "#/components/schemas/"
# HttpError carries whatever status the framework reported, so any status may answer it.
_ANY_STATUS_CODES = ("http_error",)
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
    "Location": {
        "description": "The created resource.",
        "schema": {"type": "string", "format": "uri-reference"},
    },
}


def _header(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/headers/{name}"}


def _problem_for_status(schemas: dict[str, Any], status: str, codes: list[dict[str, Any]]) -> str:
    """`Problem<status>`: Problem whose `code` enumerates the codes of that status."""
    allowed = sorted(
        {str(c["code"]) for c in codes if str(c["status"]) == status} | set(_ANY_STATUS_CODES)
    )
    name = f"Problem{status}"
    schema = copy.deepcopy(schemas["Problem"])
    schema.pop("x-codes", None)
    schema["title"] = name
    schema["description"] = f"A {status} problem; `code` is one of the stable codes below."
    schema["properties"]["code"] = {"type": "string", "enum": allowed}
    schemas[name] = schema
    return name


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


def apply(doc: dict[str, Any], codes: list[dict[str, Any]], op_tag: str) -> None:
    """Make every response exact; `op_tag` is the FastAPI tag of the op routes."""
    schemas = doc["components"]["schemas"]
    doc["components"]["headers"] = HEADERS
    op_paths = {
        (path, method)
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        if op_tag in operation.get("tags", [])
    }
    _op_outcomes(doc, op_paths)
    for item in doc["paths"].values():
        for operation in item.values():
            responses = operation["responses"]
            if "requestBody" in operation:
                responses.setdefault(
                    "415",
                    {
                        "description": "The body is not sent as application/json (problem)",
                        "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": _REF + "Problem"}}},
                    },
                )
            correlated = _correlated(operation, schemas)
            for status, response in responses.items():
                media = response.get("content", {}).get(PROBLEM_MEDIA_TYPE)
                if media is not None and media["schema"] == {"$ref": _REF + "Problem"}:
                    if status != "default":
                        name = _problem_for_status(schemas, status, codes)
                        media["schema"] = {"$ref": _REF + name}
                headers = response.setdefault("headers", {})
                if status in ("429", "503"):
                    headers["Retry-After"] = _header("RetryAfter")
                if correlated and status != "default":
                    headers["Request-Id"] = _header("RequestId")
                    if status in _SUCCESS:
                        headers["Idempotent-Replayed"] = _header("IdempotentReplayed")
                if status == "201":
                    headers["Location"] = _header("Location")
                if not headers:
                    del response["headers"]
