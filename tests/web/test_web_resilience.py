"""The web client across a server restart mid-stream, a page opened mid-stream, and device
revocation.

These restart or revoke things, so they have this module's server to themselves.
"""

from __future__ import annotations

import contextlib
import re
import socket
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.e2e.harness import C2Process
from tests.web.conftest import api, new_session, open_session, paired, send, until

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


class LateStream:
    """A proxy for one event stream that answers the browser at once and takes the stream
    from c2 only `delay` seconds later, as a busy server may: the app sees its connection
    open well before the server subscribed it and read the welcome's log position."""

    def __init__(self, upstream: str, delay: float) -> None:
        parsed = urlsplit(upstream)
        self._upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self._delay = delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            browser, _ = self._listener.accept()
            with browser, socket.create_connection(self._upstream) as upstream:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += browser.recv(65536)
                host = f"Host: {self._upstream[0]}:{self._upstream[1]}".encode()
                request = re.sub(rb"(?im)^host:[^\r\n]*", host, request, count=1)
                browser.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"cache-control: no-store\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                time.sleep(self._delay)
                upstream.sendall(request)
                answer = b""
                while b"\r\n\r\n" not in answer:
                    answer += upstream.recv(65536)
                head, body = answer.split(b"\r\n\r\n", 1)
                assert b"transfer-encoding: chunked" in head.lower(), head
                while body:  # c2's body is chunked as this proxy declared: passed on as is
                    browser.sendall(body)
                    body = upstream.recv(65536)

    def close(self) -> None:
        self._listener.close()


def test_a_page_opened_mid_stream_shows_every_chunk_once(
    browser: Browser, c2: C2Process, workdir: Path
):
    """Opening (or reloading) a session while its turn streams shows the stored reply exactly,
    even when c2 takes the event stream well after the app saw it open: the page is read once
    the stream's welcome arrived, and the events buffered meanwhile fill in the rest. (Read
    when the connection opened, it missed what committed before the server subscribed.)"""
    session = new_session(c2, workdir)
    with api(c2) as client:
        sent = client.post(
            f"/v1/sessions/{session['id']}/prompt",
            json={"doc": [{"type": "text", "text": "/stamped 300 100"}]},
        )
        assert sent.status_code == 202, sent.text
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    late = LateStream(c2.base_url, delay=0.7)
    try:
        page = paired(context, c2)
        # Open the session once the turn is well under way, while it still streams.
        while _transcript_text(c2, session["id"]).count("t=") < 50:
            page.wait_for_timeout(50)
        proxied: list[str] = []

        def through_the_proxy(route: Route) -> None:
            if proxied:  # a reconnect goes straight to c2
                route.continue_()
                return
            path = urlsplit(route.request.url)
            proxied.append(path.path)
            route.continue_(url=f"http://127.0.0.1:{late.port}{path.path}?{path.query}")

        page.route("**/v1/events?*", through_the_proxy)
        page.goto(f"{c2.base_url}/#/s/{session['id']}")
        page.reload()
        reply = page.get_by_role("region", name="Conversation").get_by_role("article").last
        expect(reply.locator(".md")).to_contain_text(re.compile(r"(t=\d+){20}"))
        assert proxied == ["/v1/events"]
        with api(c2) as client:
            until(
                lambda: (
                    client.get(f"/v1/sessions/{session['id']}").json()["activity"]["state"]["kind"]
                    == "idle"
                ),
                "the turn ends",
            )
        stamps = re.findall(r"t=\d+", _transcript_text(c2, session["id"]))
        assert len(stamps) == 300
        expect(reply.locator(".md")).to_contain_text(stamps[-1])
        shown = re.findall(r"t=\d+", reply.locator(".md").text_content() or "")
        missing = [n for n, stamp in enumerate(stamps) if stamp not in shown]
        assert missing == [], f"{len(missing)} of 300 chunks not shown, from #{missing[0]}"
        assert shown == stamps  # each once, in order
    finally:
        context.close()
        late.close()


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
