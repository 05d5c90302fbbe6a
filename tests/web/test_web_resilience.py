"""The web client across a server restart mid-stream and across device revocation.

These restart or revoke things, so they have this module's server to themselves.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.harness import C2Process
from tests.web.conftest import api, new_session, open_session, paired, send

# A module starts a server, a browser and pairs it: more than the default 120 s under load.
pytestmark = pytest.mark.timeout(300)


def _transcript_text(server: C2Process, session_id: str) -> str:
    with api(server) as client:
        page = client.get(f"/v1/sessions/{session_id}/transcript").json()
    return "".join(
        e["part"]["text"]
        for e in page["entries"]
        if e["role"] == "agent" and e["part"]["kind"] == "text"
    )


def test_server_restart_mid_stream_loses_and_doubles_nothing(
    page: Page, c2: C2Process, workdir: Path
):
    """The stream resumes from Last-Event-ID after a restart: the reply shown is exactly the
    stored one, every chunk once."""
    session = new_session(c2, workdir)
    open_session(page, c2, session["id"])
    send(page, "/stamped 400 40")
    reply = page.get_by_role("region", name="Conversation").get_by_role("article").last
    expect(reply.locator(".md")).to_contain_text(re.compile(r"(t=\d+){5}"))
    c2.stop()
    status = page.get_by_role("status", name="Connection")
    expect(status).not_to_contain_text("Connected")
    c2.start()
    expect(status).to_contain_text("Connected")
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    stored = _transcript_text(c2, session["id"])
    assert stored.count("t=") >= 5
    expect(reply.locator(".md")).to_have_text(stored)
    shown = reply.locator(".md").text_content() or ""
    stamps = re.findall(r"t=\d+", shown)
    assert len(stamps) == len(set(stamps)) == stored.count("t=")
    # A new turn after the restart streams normally into the same view.
    send(page, "/text after the restart")
    expect(page.get_by_role("article").last).to_contain_text("after the restart")


def test_revoking_this_browser_returns_to_pairing(browser: Browser, c2: C2Process):
    """The Devices page revokes this browser; it lands on the pairing screen."""
    context = browser.new_context()
    try:
        page = paired(context, c2)
        page.on("dialog", lambda dialog: dialog.accept())
        page.get_by_role("link", name="Devices").click()
        mine = page.locator("li", has_text="this browser")
        mine.get_by_role("button", name=re.compile("^Revoke")).click()
        expect(page.get_by_role("heading", name="Pair this browser with c2")).to_be_visible()
        assert page.evaluate("localStorage.getItem('c2.credential')") is None
    finally:
        context.close()


def test_a_browser_revoked_elsewhere_returns_to_pairing(browser: Browser, c2: C2Process):
    """Revoked from another device, an open tab loses its stream and shows pairing."""
    context = browser.new_context()
    try:
        page = paired(context, c2)
        device_id = page.evaluate("JSON.parse(localStorage.getItem('c2.credential')).device_id")
        with api(c2) as client:
            assert client.delete(f"/v1/devices/{device_id}").status_code == 204
        expect(page.get_by_role("heading", name="Pair this browser with c2")).to_be_visible()
    finally:
        context.close()


def test_resync_reloads_the_conversation_cleanly(page: Page, c2: C2Process, workdir: Path):
    """When the stream cannot resume (its position is past the server's log), `resync` and a
    fresh `sessions` frame come instead: the open conversation reloads from the transcript —
    so a row no event ever carried shows — each turn once, and goes on live."""
    session = new_session(c2, workdir)
    open_session(page, c2, session["id"])
    send(page, "/text before the resync")
    conversation = page.get_by_role("region", name="Conversation")
    expect(conversation.get_by_role("article").last).to_contain_text("before the resync")
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    c2.stop()
    db = sqlite3.connect(c2.home / "c2.db")
    with db:
        # A stored reply row that no event announces, and a log cut below the browser's
        # Last-Event-ID: only a resync (and a reload of the page) can show the row.
        top_part = db.execute(
            "SELECT MAX(seq) FROM parts WHERE session_id = ?", (session["id"],)
        ).fetchone()[0]
        db.execute(
            "INSERT INTO parts (session_id, seq, role, part_json) VALUES (?, ?, 'agent', ?)",
            (session["id"], top_part + 1, '{"kind":"text","text":" — and a stored epilogue"}'),
        )
        top = db.execute("SELECT MAX(seq) FROM events").fetchone()[0]
        db.execute("DELETE FROM events WHERE seq > ?", (top - 3,))
    db.close()
    c2.start()
    expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
    last = conversation.get_by_role("article").last
    expect(last).to_contain_text("before the resync — and a stored epilogue")
    send(page, "/text after the resync")
    expect(conversation.get_by_role("article").last).to_contain_text("after the resync")
    expect(conversation.get_by_role("article")).to_have_count(2)
    expect(conversation.locator(".md", has_text="before the resync")).to_have_count(1)
