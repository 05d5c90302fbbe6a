"""Responses are what the OpenAPI document says: media types, headers, per-status codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from c2.api.app import create_app
from c2.api.openapi import document
from tests.api.conftest import AppClient
from tests.conftest import make_settings

ECHO = {"custom": "echo"}


def _doc(tmp_path: Path) -> dict[str, Any]:
    return document(create_app(make_settings(tmp_path / "doc")))


async def test_media_type_non_json_body_is_415(app_client: AppClient, tmp_path: Path):
    """A body sent as text/plain or without Content-Type is 415, not 422; JSON passes."""
    body = json.dumps({"provider": ECHO, "cwd": str(tmp_path), "use_worktree": False})
    for headers in ({"Content-Type": "text/plain"}, {}):
        resp = await app_client.http.post("/v1/sessions", content=body, headers=headers)
        assert resp.status_code == 415, resp.text
        assert resp.headers["content-type"] == "application/problem+json"
        assert resp.json()["code"] == "unsupported_media_type"
    created = await app_client.http.post(
        "/v1/sessions", content=body, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    assert created.headers["location"] == f"/v1/sessions/{sid}"
    bare = await app_client.http.post(f"/v1/sessions/{sid}/cancel")  # no body: no media type
    assert bare.status_code == 202, bare.text


def test_openapi_declares_headers_outcomes_and_timestamps(tmp_path: Path):
    """Retry-After, Request-Id, Idempotent-Replayed, Location; /v1/ops outcomes; date-time."""
    doc = _doc(tmp_path)
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    create = paths["/v1/sessions"]["post"]["responses"]
    assert {"Location", "Request-Id", "Idempotent-Replayed"} <= set(create["201"]["headers"])
    assert "Retry-After" in create["503"]["headers"]
    assert "Retry-After" in paths["/v1/pair"]["post"]["responses"]["429"]["headers"]
    unauthorized = paths["/v1/sessions/{session_id}"]["get"]["responses"]["401"]
    assert "WWW-Authenticate" in unauthorized["headers"]
    ops = paths["/v1/ops"]["post"]["responses"]
    accepted = {
        m["$ref"].rsplit("/", 1)[-1]
        for m in ops["202"]["content"]["application/json"]["schema"]["anyOf"]
    }
    assert accepted == {"PromptAccepted", "CancelResult"}
    created = {  # new_session and fork answer a snapshot, queue_prompt the queued item
        m["$ref"].rsplit("/", 1)[-1]
        for m in ops["201"]["content"]["application/json"]["schema"]["anyOf"]
    }
    assert created == {"SessionSnapshot", "QueueItem"}
    assert "AnswerResult" in json.dumps(ops["200"])
    assert "415" in paths["/v1/sessions/{session_id}/prompt"]["post"]["responses"]
    snapshot = schemas["SessionSnapshot"]["properties"]
    assert snapshot["created_at"]["format"] == snapshot["updated_at"]["format"] == "date-time"


async def test_errors_teach_empty_doc_and_cwd_file(app_client: AppClient, tmp_path: Path):
    """An empty `doc` is a 422; a `cwd` that is a file says so."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x", encoding="utf-8")
    body = {"provider": ECHO, "cwd": str(a_file), "use_worktree": False}
    resp = await app_client.http.post("/v1/sessions", json=body)
    assert resp.status_code == 422 and resp.json()["code"] == "invalid_cwd"
    assert "is a file, not a directory" in resp.json()["detail"]
    body["cwd"] = str(tmp_path)
    sid = (await app_client.http.post("/v1/sessions", json=body)).json()["id"]
    empty = await app_client.http.post(f"/v1/sessions/{sid}/prompt", json={"doc": []})
    assert empty.status_code == 422 and empty.json()["code"] == "validation_error"
    assert "doc" in empty.json()["detail"]


async def test_errors_teach_custom_provider_syntax(app_client: AppClient, tmp_path: Path):
    """`"provider":"echo"` is a 422 that shows the `{"custom":"echo"}` spelling."""
    body = {"provider": "echo", "cwd": str(tmp_path), "use_worktree": False}
    resp = await app_client.http.post("/v1/sessions", json=body)
    assert resp.status_code == 422, resp.text
    assert '{"custom": "echo"}' in resp.json()["detail"]
    assert len(resp.json()["errors"]) == 1


def test_openapi_requires_what_responses_always_carry(tmp_path: Path):
    """Output fields with a non-null default or a default factory are required, snapshot
    fields are all required (nulls included), request bodies keep their defaults optional,
    and the usage `since` filter is a date-time."""
    doc = _doc(tmp_path)
    schemas = doc["components"]["schemas"]
    assert {"revision", "state"} <= set(schemas["SessionActivity"]["required"])
    assert {"kind", "prompt_request_id"} & set(schemas["RunningState"]["required"]) == {"kind"}
    snapshot = schemas["SessionSnapshot"]
    assert set(snapshot["required"]) == set(snapshot["properties"])
    assert "choices" in schemas["ConfigOption"]["required"]
    assert "transcript_seq" not in schemas["AgentText"]["required"]  # omitted when null
    assert "initial_policy" not in schemas["NewSessionBody"]["required"]
    since = next(p for p in doc["paths"]["/v1/usage"]["get"]["parameters"] if p["name"] == "since")
    assert since["schema"]["anyOf"][0]["format"] == "date-time"
