"""`GET /v1/sessions` a page at a time (issue 17): limit, cursor, next_cursor, bad cursors."""

from __future__ import annotations

from pathlib import Path

from tests.api.conftest import AppClient

ECHO = {"custom": "echo"}


async def test_session_pages_follow_next_cursor_newest_first(app_client: AppClient, tmp_path):
    """Five sessions in pages of two: every session once, newest first, then no cursor."""
    made = []
    for _ in range(5):
        body = {"provider": ECHO, "cwd": str(tmp_path), "use_worktree": False}
        made.append((await app_client.http.post("/v1/sessions", json=body)).json()["id"])
    seen: list[str] = []
    cursor = None
    for _ in range(3):
        params = {"limit": 2} | ({} if cursor is None else {"cursor": cursor})
        page = (await app_client.http.get("/v1/sessions", params=params)).json()
        assert page["kind"] == "sessions" and len(page["sessions"]) <= 2
        seen += [s["id"] for s in page["sessions"]]
        cursor = page["next_cursor"]
    assert seen == made[::-1] and cursor is None
    whole = (await app_client.http.get("/v1/sessions")).json()
    assert [s["id"] for s in whole["sessions"]] == seen and whole["next_cursor"] is None


async def test_session_pages_reject_bad_cursors_and_limits(app_client: AppClient, tmp_path: Path):
    """A cursor this server did not make is a 422 invalid_cursor; a limit outside 1..200 a
    422 validation_error."""
    for cursor in ("garbage!", "djI6MTpzMQ", "x" * 129):
        resp = await app_client.http.get("/v1/sessions", params={"cursor": cursor})
        assert resp.status_code == 422, cursor
        assert resp.headers["content-type"].startswith("application/problem+json")
        assert resp.json()["code"] == (
            "invalid_cursor" if len(cursor) <= 128 else "validation_error"
        )
    for limit in (0, 201):
        resp = await app_client.http.get("/v1/sessions", params={"limit": limit})
        assert resp.status_code == 422 and resp.json()["code"] == "validation_error"
