"""The committed OpenAPI document matches the app, and declares what clients rely on."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from c2.api.app import create_app
from c2.api.openapi import document, dumps
from tests.conftest import make_settings

COMMITTED = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def _current(tmp_path: Path) -> dict[str, object]:
    return document(create_app(make_settings(tmp_path)))


def test_openapi_matches_committed_document(tmp_path: Path):
    """openapi/openapi.json is what `c2 openapi` prints now (regenerate with `make openapi`)."""
    current = _current(tmp_path)
    assert json.loads(COMMITTED.read_text(encoding="utf-8")) == current
    assert COMMITTED.read_text(encoding="utf-8") == dumps(current)


def test_openapi_declares_problems_codes_and_the_stream(tmp_path: Path):
    """Problems and their stable codes are documented; the SSE route is text/event-stream."""
    doc = _current(tmp_path)
    problem = doc["components"]["schemas"]["Problem"]  # type: ignore[index]
    codes = {c["code"] for c in problem["x-codes"]}
    assert {
        "no_such_session",
        "request_id_reused",
        "validation_error",
        "unauthorized",
        "turn_already_running",
        "capacity",
        "internal_error",
    } <= codes
    stream = doc["paths"]["/v1/events"]["get"]["responses"]["200"]["content"]  # type: ignore[index]
    assert list(stream) == ["text/event-stream"]
    pair = doc["paths"]["/v1/pair"]["post"]  # type: ignore[index]
    assert pair["security"] == []
    assert "application/problem+json" in pair["responses"]["401"]["content"]


# The published operationIds (part of the contract: a generated client's function names).
OPERATION_IDS = {
    ("get", "/healthz"): "healthz",
    ("get", "/readyz"): "readyz",
    ("put", "/v1/devices/{device_id}/budget"): "setDeviceBudget",
    ("get", "/v1/devices"): "listDevices",
    ("delete", "/v1/devices/{device_id}"): "revokeDevice",
    ("get", "/v1/events"): "streamEvents",
    ("post", "/v1/ops"): "submitOp",
    ("post", "/v1/pair"): "pair",
    ("get", "/v1/providers"): "listProviders",
    ("get", "/v1/search"): "search",
    ("get", "/v1/sessions"): "listSessions",
    ("post", "/v1/sessions"): "createSession",
    ("delete", "/v1/sessions/{session_id}"): "deleteSession",
    ("get", "/v1/sessions/{session_id}"): "getSession",
    ("post", "/v1/sessions/{session_id}/cancel"): "cancel",
    ("put", "/v1/sessions/{session_id}/config-options/{config_id}"): "setConfigOption",
    ("put", "/v1/sessions/{session_id}/budget"): "setSessionBudget",
    ("put", "/v1/sessions/{session_id}/execution-policy"): "setExecutionPolicy",
    ("put", "/v1/sessions/{session_id}/mode"): "setMode",
    ("put", "/v1/sessions/{session_id}/model"): "setModel",
    ("put", "/v1/sessions/{session_id}/permission-mode"): "setPermissionMode",
    ("post", "/v1/sessions/{session_id}/permissions/{input_id}"): "answerPermission",
    ("post", "/v1/sessions/{session_id}/prompt"): "prompt",
    ("post", "/v1/sessions/{session_id}/prompt-preview"): "previewPrompt",
    ("put", "/v1/sessions/{session_id}/sandbox"): "setSandbox",
    ("get", "/v1/sessions/{session_id}/transcript"): "getTranscript",
    ("delete", "/v1/sessions/{session_id}/worktree"): "discardWorktree",
    ("get", "/v1/sessions/{session_id}/turns/{turn}/diff"): "turnDiff",
    ("get", "/v1/sessions/{session_id}/diff"): "sessionDiff",
    ("post", "/v1/sessions/{session_id}/rewind"): "rewind",
    ("post", "/v1/sessions/{session_id}/fork"): "forkSession",
    ("post", "/v1/sessions/{session_id}/queue"): "queuePrompt",
    ("get", "/v1/sessions/{session_id}/queue"): "getQueue",
    ("patch", "/v1/sessions/{session_id}/queue/{item}"): "editQueued",
    ("delete", "/v1/sessions/{session_id}/queue/{item}"): "removeQueued",
    ("post", "/v1/sessions/{session_id}/queue/resume"): "resumeQueue",
    ("get", "/v1/skills"): "listSkills",
    ("get", "/v1/usage"): "getUsage",
    ("get", "/v1/push/vapid-public-key"): "getVapidPublicKey",
    ("post", "/v1/push-subscriptions"): "createPushSubscription",
    ("get", "/v1/push-subscriptions"): "listPushSubscriptions",
    ("delete", "/v1/push-subscriptions/{subscription_id}"): "deletePushSubscription",
    ("get", "/v1/webhooks"): "listWebhooks",
    ("post", "/v1/webhooks"): "createWebhook",
    ("get", "/v1/webhooks/{webhook_id}"): "getWebhook",
    ("patch", "/v1/webhooks/{webhook_id}"): "updateWebhook",
    ("delete", "/v1/webhooks/{webhook_id}"): "deleteWebhook",
    ("get", "/v1/webhooks/{webhook_id}/deliveries"): "listWebhookDeliveries",
    ("post", "/v1/stream-tickets"): "createStreamTicket",
    ("get", "/v1/worktree-baselines"): "getWorktreeBaselines",
}


def _operations(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m, p): op for p, item in doc["paths"].items() for m, op in item.items()}


def test_openapi_operation_ids_are_pinned(tmp_path: Path):
    """Every operation has its published short operationId and exactly one resource tag."""
    operations = _operations(_current(tmp_path))
    assert {key: op["operationId"] for key, op in operations.items()} == OPERATION_IDS
    tags = {key: op["tags"] for key, op in operations.items()}
    assert all(len(t) == 1 for t in tags.values())
    assert tags[("post", "/v1/sessions/{session_id}/prompt")] == ["sessions"]
    assert tags[("get", "/readyz")] == ["health"]


def _pascal(name: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in re.split(r"[^0-9A-Za-z]+", name) if w)


def _class_names(doc: dict[str, Any]) -> list[str]:
    """The model names a generator derives: one per component, one per inline object or enum
    (named parent + property, `Item` for array items), and an allOf child re-deriving the
    inline models of the schemas it extends under their names again."""
    schemas = doc["components"]["schemas"]
    names: list[str] = []

    def inline(owner: str, schema: dict[str, Any]) -> None:
        for member in schema.get("allOf", []):
            if "$ref" in member:
                parent = member["$ref"].rsplit("/", 1)[-1]
                inline(parent, schemas[parent])
            else:
                inline(owner, member)
        for prop, sub in schema.get("properties", {}).items():
            walk(owner + _pascal(prop), sub)

    def walk(name: str, schema: dict[str, Any]) -> None:
        if "$ref" in schema:
            return
        if "properties" in schema or "enum" in schema:
            names.append(name)
        if "items" in schema:
            walk(name + "Item", schema["items"])
        for key in ("anyOf", "oneOf"):
            for i, member in enumerate(schema.get(key, [])):
                walk(f"{name}Type{i}", member)
        inline(name, schema)

    for name, schema in schemas.items():
        names.append(_pascal(name))
        inline(_pascal(name), schema)
    return names


def test_openapi_has_no_colliding_generated_names(tmp_path: Path):
    """No two schemas (named or inline) map to the same generated class name."""
    names = _class_names(_current(tmp_path))
    assert [n for n in set(names) if names.count(n) > 1] == []


def test_class_names_detects_the_allof_collision():
    """The checker flags the old SessionsError/TranscriptError allOf-Problem layout."""
    problem = {"properties": {"errors": {"type": "array", "items": {"properties": {}}}}}
    child = {"allOf": [{"$ref": "#/components/schemas/Problem"}], "properties": {}}
    doc = {"components": {"schemas": {"Problem": problem, "A": child, "B": dict(child)}}}
    names = _class_names(doc)
    assert names.count("ProblemErrorsItem") == 3
