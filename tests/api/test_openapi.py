"""The committed OpenAPI document matches the app, and declares what clients rely on."""

from __future__ import annotations

import json
from pathlib import Path

from api.app import create_app
from api.openapi import document, dumps
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
