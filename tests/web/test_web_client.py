"""The web client end to end: Chromium drives the UI by role and name against a real c2.

Pairing from the printed URL, sessions (plain and worktree), streamed text / tool call / plan,
permissions across tabs, Stop, paging through 100 turns, model and policy, and untrusted agent
text that must never execute. (Restart and revocation: test_web_resilience.py.)
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.e2e.harness import C2Process
from tests.gitrepos import make_repo
from tests.web.conftest import api, new_session, open_session, pair_url, send, until

# A module starts a server, a browser and pairs it: more than the default 120 s under load.
pytestmark = pytest.mark.timeout(300)


def test_unpaired_browser_is_told_how_to_pair(browser: Browser, c2: C2Process):
    """Without a credential `/` explains `c2 pair` and the pairing URL; it never loads data."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(c2.base_url + "/")
        expect(page.get_by_role("heading", name="Pair this browser with c2")).to_be_visible()
        expect(page.get_by_text("c2 pair-url")).to_be_visible()
        expect(page.get_by_role("navigation", name="Sessions")).to_have_count(0)
    finally:
        context.close()


def test_pairing_url_redeems_once_and_survives_reload_and_second_tab(
    browser: Browser, c2: C2Process
):
    """The token is spent once, leaves the address bar, and a reload or a second tab of the
    same link neither spends another token nor loses the credential."""
    with api(c2) as client:
        before = len(client.get("/v1/devices").json())
    context = browser.new_context()
    try:
        url = pair_url(c2)
        page = context.new_page()
        page.goto(url)
        expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
        assert "token" not in page.url and page.url == c2.base_url + "/"
        stored = page.evaluate("localStorage.getItem('c2.credential')")
        assert stored and "bearer" in stored
        assert page.evaluate("document.documentElement.outerHTML").count("bearer") == 0
        page.reload()
        expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
        second = context.new_page()
        second.goto(url)  # the same (spent) link in another tab
        expect(second.get_by_role("status", name="Connection")).to_contain_text("Connected")
        with api(c2) as client:
            devices = client.get("/v1/devices").json()
        assert len(devices) == before + 1
        assert devices[-1]["name"] == "Chrome on Linux"
    finally:
        context.close()
    # A spent link in a browser without a credential says so.
    stranger = browser.new_context()
    try:
        page = stranger.new_page()
        page.goto(url)
        expect(page.get_by_role("alert")).to_contain_text("already used or has expired")
    finally:
        stranger.close()


def test_create_session_and_see_streamed_text_tool_call_and_plan(
    page: Page, c2: C2Process, workdir: Path
):
    """New session with the demo agent from the dialog; a prompt streams back as Markdown with
    its thought, plan checklist and tool call; the list shows the session live."""
    page.goto(c2.base_url + "/")
    page.get_by_role("button", name="New session").click()
    dialog = page.get_by_role("dialog", name="New session")
    dialog.get_by_role("combobox", name="Agent").select_option(label="Echo (demo agent)")
    dialog.get_by_role("textbox", name="Folder").fill(str(workdir))
    dialog.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"#/s/"))
    send(page, "hello **bold** world")
    conversation = page.get_by_role("region", name="Conversation")
    turn = conversation.get_by_role("article").last
    expect(turn.locator(".md strong")).to_have_text("bold")
    expect(turn).to_contain_text("hello bold world")
    expect(turn.locator(".plan li")).to_have_count(2)
    expect(turn.locator(".plan")).to_contain_text("Echo it back")
    tool = turn.locator("details.tool")
    expect(tool).to_contain_text("read")
    expect(tool).to_contain_text("Read the prompt")
    expect(tool).to_contain_text("completed")
    expect(turn.locator("details.thought")).to_have_count(1)
    nav = page.get_by_role("navigation", name="Sessions")
    expect(nav.get_by_role("link")).not_to_have_count(0)
    # The turn's end follows its last chunk by up to a commit and a write interval.
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)


def test_worktree_session_pins_the_baseline_then_discard_and_delete(
    page: Page, c2: C2Process, tmp_path: Path
):
    """For a git folder the dialog previews `current` and `origin_default` with short SHAs and
    creates the worktree from the previewed commit; the worktree is discarded, then the
    session deleted (it leaves the list)."""
    repo = make_repo(tmp_path)
    page.goto(c2.base_url + "/")
    page.get_by_role("button", name="New session").click()
    dialog = page.get_by_role("dialog", name="New session")
    dialog.get_by_role("combobox", name="Agent").select_option(label="Echo (demo agent)")
    dialog.get_by_role("textbox", name="Folder").fill(str(repo.cwd))
    dialog.get_by_role("checkbox", name="Use a git worktree").check()
    start = dialog.get_by_role("radiogroup", name="Start from")
    head = repo.git("rev-parse", "HEAD")
    expect(start).to_contain_text(head[:8])
    assert repo.origin_sha is not None
    expect(start).to_contain_text(repo.origin_sha[:8])
    start.get_by_role("radio").last.check()  # origin's default branch
    dialog.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"#/s/"))
    session_id = page.url.rsplit("/", 1)[-1]
    with api(c2) as client:
        snapshot = client.get(f"/v1/sessions/{session_id}").json()
    assert snapshot["worktree_baseline"]["sha"] == repo.origin_sha
    expect(page.locator(".session-head .badge.worktree")).to_be_visible()
    checkout = Path(snapshot["worktree_path"])
    assert checkout.is_dir()
    page.get_by_role("button", name="Discard worktree").click()  # confirm() is accepted
    expect(page.get_by_role("button", name="Discard worktree")).to_have_count(0)
    assert not checkout.exists()
    link = page.get_by_role("navigation", name="Sessions").locator(f'a[href="#/s/{session_id}"]')
    expect(link).to_have_count(1)
    page.get_by_role("button", name="Delete session").click()
    expect(page).to_have_url(re.compile(r"#/$"))
    expect(link).to_have_count(0)


def test_permission_answered_in_one_tab_vanishes_in_the_other(
    context: BrowserContext, page: Page, c2: C2Process, workdir: Path
):
    """A parked permission shows in both tabs with one button per option and Deny; answering
    in one removes it from the other, and the 'needs you' badge shows on other pages."""
    session = new_session(c2, workdir)
    other = context.new_page()
    try:
        other.goto(c2.base_url + "/#/devices")
        open_session(page, c2, session["id"])
        send(page, "/permission execute Run the tests")
        card = page.get_by_role("region", name="Permission request")
        expect(card).to_contain_text("Run the tests")
        expect(card.get_by_role("button", name="Deny")).to_be_visible()
        expect(other.get_by_role("link", name=re.compile("needs you"))).to_be_visible()
        other.get_by_role("link", name=re.compile("needs you")).click()
        other_card = other.get_by_role("region", name="Permission request")
        expect(other_card).to_be_visible()
        options = card.get_by_role("button")
        assert options.count() >= 2  # the agent's options, then Deny
        options.first.click()
        expect(card).to_have_count(0)
        expect(other_card).to_have_count(0)
        turn = page.get_by_role("region", name="Conversation").get_by_role("article").last
        expect(turn.locator(".md")).to_contain_text("allow")
    finally:
        other.close()


# A run of chunks, then blocks taller than a phone's screen: a thought, a plan, a tool call.
TALL_REPLY = (
    "/chunks 60\n/think long " + "t" * 400 + "\n/plan a " + "p" * 200 + "|b|c\n"
    "/tool t1 edit completed Edit " + "d/" * 60 + "f.py\n/text end-marker"
)
GAP = "el => el.scrollHeight - el.scrollTop - el.clientHeight"  # px below the view


def test_the_conversation_follows_tall_replies_and_stops_when_scrolled_up(
    page: Page, c2: C2Process, workdir: Path
):
    """On a phone the view stays at the end of a reply whose blocks are taller than the
    screen, turn after turn (the scroll event of the app's own follow, measured after a tall
    block landed below, used to read as the reader scrolling away); scrolling up stops it."""
    page.set_viewport_size({"width": 390, "height": 844})
    session = new_session(c2, workdir)
    open_session(page, c2, session["id"])
    scroller = page.locator(".scroller")
    for _ in range(3):
        send(page, TALL_REPLY)
        expect(page.get_by_role("article").last).to_contain_text("end-marker")
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        # The prompt's own answer may land after its short turn's events: the composer then
        # empties, and a next message typed before that would be emptied with it.
        expect(page.get_by_role("textbox", name="Message")).to_have_value("")
        until(lambda: scroller.evaluate(GAP) < 40, "the view at the reply's end", timeout=5)
    send(page, "/stamped 150 30")
    expect(page.get_by_role("article")).to_have_count(4)
    expect(page.get_by_role("article").last).to_contain_text("t=")
    scroller.evaluate("el => { el.scrollTop = 0; }")
    expect(page.get_by_role("button", name="Stop")).to_have_count(0, timeout=20_000)
    assert scroller.evaluate("el => el.scrollTop") < 200  # left where the reader went


def test_stop_ends_a_running_turn(page: Page, c2: C2Process, workdir: Path):
    """Stop shows while a turn runs and cancels it."""
    session = new_session(c2, workdir)
    open_session(page, c2, session["id"])
    send(page, "/text started\n/hang")
    conversation = page.get_by_role("region", name="Conversation")
    expect(conversation).to_contain_text("started")
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    with api(c2) as client:
        page_ = client.get(f"/v1/sessions/{session['id']}/transcript").json()
    assert page_["entries"][0]["part"]["text"].startswith("/text started")


def test_paging_back_through_100_turns(page: Page, c2: C2Process, workdir: Path):
    """The newest turns load first; 'Load earlier messages' pages in the rest, in order, each
    turn once."""
    session = new_session(c2, workdir)
    with api(c2) as client:
        for n in range(100):
            resp = client.post(
                f"/v1/sessions/{session['id']}/prompt",
                json={"doc": [{"type": "text", "text": f"/text reply-{n}"}]},
            )
            assert resp.status_code == 202, resp.text
            _wait_idle(client, session["id"])
    open_session(page, c2, session["id"])
    conversation = page.get_by_role("region", name="Conversation")
    articles = conversation.get_by_role("article")
    expect(articles.last).to_contain_text("reply-99")
    earlier = page.get_by_role("button", name="Load earlier messages")
    expect(articles).to_have_count(20)
    for shown in (40, 60, 80, 100):
        earlier.click()
        expect(articles).to_have_count(shown)
    expect(earlier).to_have_count(0)
    texts = [t.strip() for t in conversation.locator(".reply").all_text_contents()]
    assert texts == [f"reply-{n}" for n in range(100)]


def test_a_turn_larger_than_a_page_reads_as_one_turn(page: Page, c2: C2Process, workdir: Path):
    """A 1.5 MB reply spans two byte-bounded pages: the newest holds its tail, 'Load earlier
    messages' joins the rest to it, and the turn shows once with its whole text."""
    session = new_session(c2, workdir)
    lines = ["/text START-", *["/bigline 300000"] * 5, "/text -END"]
    with api(c2) as client:
        resp = client.post(
            f"/v1/sessions/{session['id']}/prompt",
            json={"doc": [{"type": "text", "text": "\n".join(lines)}]},
        )
        assert resp.status_code == 202, resp.text
        _wait_idle(client, session["id"])
        newest = client.get(f"/v1/sessions/{session['id']}/transcript").json()
    assert newest["entries"][0]["role"] == "agent" and newest["next_before"] is not None
    open_session(page, c2, session["id"])
    conversation = page.get_by_role("region", name="Conversation")
    articles = conversation.get_by_role("article")
    expect(articles).to_have_count(1)
    page.get_by_role("button", name="Load earlier messages").click()
    expect(page.get_by_role("button", name="Load earlier messages")).to_have_count(0)
    expect(articles).to_have_count(1)
    expect(articles.first.locator(".prompt")).to_contain_text("/text START")
    reply = articles.first.locator(".reply").text_content() or ""
    assert reply.strip() == "START-" + "x" * 1_500_000 + "-END"


def _wait_idle(client: httpx.Client, session_id: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        state = client.get(f"/v1/sessions/{session_id}").json()["activity"]["state"]["kind"]
        if state == "idle":
            return
        time.sleep(0.02)
    raise AssertionError("the turn did not end")


def test_change_model_and_policy(page: Page, c2: C2Process, workdir: Path):
    """Model, approval and sandbox apply live and land in the session snapshot."""
    session = new_session(c2, workdir)
    open_session(page, c2, session["id"])
    page.get_by_role("combobox", name="Model").select_option(label="Echo smart")
    # Both axes changed back to back: the second write must not undo the first.
    page.get_by_role("combobox", name="Approval").select_option("yolo")
    page.get_by_role("combobox", name="Sandbox").select_option("read_only")
    expect(page.get_by_role("combobox", name="Approval")).to_have_value("yolo")
    expect(page.get_by_role("combobox", name="Sandbox")).to_have_value("read_only")
    expect(page.get_by_role("combobox", name="Model")).to_have_value("echo-smart")
    with api(c2) as client:
        deadline = time.monotonic() + 15  # both PUTs may still be in flight: a bounded wait
        while True:
            snapshot = client.get(f"/v1/sessions/{session['id']}").json()
            if snapshot["policy"] == {"mode": "yolo", "sandbox": "read_only"}:
                break
            assert time.monotonic() < deadline, snapshot["policy"]
            time.sleep(0.05)
    page.reload()  # what the server holds, not what the page last sent
    expect(page.get_by_role("combobox", name="Approval")).to_have_value("yolo")
    expect(page.get_by_role("combobox", name="Sandbox")).to_have_value("read_only")
    assert snapshot["models"]["current"] == "echo-smart"
    send(page, "which model")
    expect(page.locator("details.thought").last).to_contain_text("echo-smart")


XSS_TEXT = (
    "<img src=x onerror=\"window.__xss='img'\"> "
    "[click me](javascript:window.__xss='link') "
    "<script>window.__xss='script'</script> "
    "[data](data:text/html,<script>alert(1)</script>) "
    '<a href="javascript:window.__xss=1">raw</a> '
    "![pic](javascript:window.__xss='image')"
)


def test_agent_html_and_javascript_links_never_execute(page: Page, c2: C2Process, workdir: Path):
    """Agent (and prompt) text with HTML, <img onerror>, javascript: and data: links shows as
    text: no element is created from it and nothing runs."""
    session = new_session(c2, workdir)
    open_session(page, c2, session["id"])
    send(page, f"/text {XSS_TEXT}\n/text  [ok](https://example.com/x)")
    conversation = page.get_by_role("region", name="Conversation")
    turn = conversation.get_by_role("article").last
    expect(turn.locator(".reply")).to_contain_text("onerror")
    expect(turn.get_by_role("link", name="ok")).to_have_attribute("href", "https://example.com/x")
    assert conversation.locator("img, script, iframe").count() == 0
    hrefs = conversation.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert hrefs == ["https://example.com/x"], hrefs
    for link in conversation.get_by_text("click me").all():
        link.click()
    page.wait_for_load_state()
    assert page.evaluate("window.__xss") is None
    assert "<img" in turn.locator(".prompt").inner_text()


def test_urls_in_agent_text_become_links(page: Page, c2: C2Process, workdir: Path):
    """A bare https:// URL, a link whose label is its own URL and a bold URL each render as
    one link (a bare URL used to be parsed as a link inside its own label, forever: the page
    died and the session could not be opened again)."""
    session = new_session(c2, workdir)
    open_session(page, c2, session["id"])
    send(
        page,
        "/text docs at https://example.com/docs, then\n"
        "/text  see [https://example.com/x](https://example.com/x)"
        " and **https://example.com/b**",
    )
    turn = page.get_by_role("region", name="Conversation").get_by_role("article").last
    links = turn.locator(".reply a")
    expect(links).to_have_count(3)
    assert links.evaluate_all("els => els.map(e => [e.getAttribute('href'), e.textContent])") == [
        ["https://example.com/docs", "https://example.com/docs"],
        ["https://example.com/x", "https://example.com/x"],
        ["https://example.com/b", "https://example.com/b"],
    ]
    assert turn.locator(".reply a a").count() == 0
    page.reload()  # the stored transcript renders too
    expect(page.get_by_role("region", name="Conversation").locator(".reply a")).to_have_count(3)


def test_screenshots_phone_and_desktop(
    browser: Browser, c2: C2Process, context: BrowserContext, workdir: Path, tmp_path: Path
):
    """Phone (390x844) and desktop shots of a live conversation (docs/ keeps a copy:
    C2_SCREENSHOT_DIR=docs/screenshots)."""
    import os

    session = new_session(c2, workdir, {"custom": "echo"})
    with api(c2) as client:
        client.post(
            f"/v1/sessions/{session['id']}/prompt",
            json={"doc": [{"type": "text", "text": "Summarise **core/engine.py** in `3` bullets"}]},
        )
        _wait_idle(client, session["id"])
    out = Path(os.environ.get("C2_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    state = context.storage_state()
    for name, size in (("phone", (390, 844)), ("desktop", (1280, 800))):
        shot = browser.new_context(
            viewport={"width": size[0], "height": size[1]}, storage_state=state
        )
        try:
            page = shot.new_page()
            open_session(page, c2, session["id"])
            expect(page.get_by_role("article").last).to_contain_text("bullets")
            page.locator("details.tool").last.click()
            page.screenshot(path=str(out / f"web-{name}.png"))
            assert (out / f"web-{name}.png").stat().st_size > 5000
        finally:
            shot.close()
    # Dark scheme, a parked permission on a phone.
    waiting = new_session(c2, workdir)
    shot = browser.new_context(
        viewport={"width": 390, "height": 844}, storage_state=state, color_scheme="dark"
    )
    try:
        page = shot.new_page()
        open_session(page, c2, waiting["id"])
        send(page, "/text Running the suite first.\n/permission execute Run `make test`")
        expect(page.get_by_role("region", name="Permission request")).to_be_visible()
        page.screenshot(path=str(out / "web-phone-dark-permission.png"))
        page.get_by_role("button", name="Deny").click()
        expect(page.get_by_role("region", name="Permission request")).to_have_count(0)
    finally:
        shot.close()


SKILL = """---
name: Reviewer
description: Review a change
params:
  focus: tests
---
Review the change with a focus on {{focus}}.
"""


def test_composer_skill_chat_reference_and_preview(page: Page, c2: C2Process, workdir: Path):
    """A skill (with a parameter) and an @chat reference join the text; Preview shows exactly
    what the agent receives, and Send delivers it."""
    skill = c2.home / "skills" / "reviewer"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(SKILL, encoding="utf-8")
    referenced = new_session(c2, workdir)
    session = new_session(c2, workdir)
    open_session(page, c2, session["id"])
    page.get_by_role("combobox", name="Add skill").select_option(label="Reviewer")
    page.get_by_role("textbox", name="focus").fill("security")
    page.get_by_role("combobox", name="Reference a chat").select_option(referenced["id"])
    page.get_by_role("textbox", name="Message").fill("and be brief")
    page.get_by_role("button", name="Preview").click()
    preview = page.get_by_label("Prompt preview")
    expect(preview).to_contain_text("Review the change with a focus on security.")
    expect(preview).to_contain_text("and be brief")
    with api(c2) as client:
        expected = client.post(
            f"/v1/sessions/{session['id']}/prompt-preview",
            json={
                "doc": [
                    {"type": "skill", "skill_id": "reviewer", "params": {"focus": "security"}},
                    {"type": "session", "session_id": referenced["id"]},
                    {"type": "text", "text": "and be brief"},
                ]
            },
        ).json()["prompt"]
    assert preview.text_content() == expected
    page.get_by_role("button", name="Send").click()
    turn = page.get_by_role("region", name="Conversation").get_by_role("article").last
    expect(turn.locator(".reply")).to_contain_text("focus on security")
    expect(page.get_by_label("Prompt preview")).to_have_count(0)


def test_keyboard_only_new_session_dialog(page: Page, c2: C2Process, workdir: Path):
    """The dialog opens from the keyboard with focus inside it, fields are reachable by Tab,
    and Escape closes it, returning to the page."""
    page.goto(c2.base_url + "/")
    expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
    page.get_by_role("button", name="New session").focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="New session")
    expect(dialog).to_be_visible()
    assert page.evaluate("document.activeElement.closest('dialog') !== null")
    reached = set()
    for _ in range(8):
        page.keyboard.press("Tab")
        reached.add(page.evaluate("document.activeElement.labels?.[0]?.textContent?.trim()"))
    for name in ("Agent", "Folder", "Use a git worktree"):
        assert any(r and r.startswith(name) for r in reached), (name, reached)
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
