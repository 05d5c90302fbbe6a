"""The web client's issue-14 resources, driven by Chromium against a real c2, the scripted
agent making real file changes in real git worktrees: a turn's diff (and the session's, and a
running turn's so far), rewind with its refusals and undo, fork with lineage and the primed
mark, the follow-up queue (order, edit, remove, pause on cancel, resume) seen alike by two
tabs, and the discarded worktree staying discarded after a reload.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from tests.e2e.harness import SCRIPTED, C2Process
from tests.gitrepos import RepoFixture, make_repo
from tests.web.conftest import api, new_session, open_session, send, until

pytestmark = pytest.mark.timeout(300)


def worktree_session(server: C2Process, repo: RepoFixture) -> dict[str, Any]:
    with api(server) as client:
        body = {"provider": SCRIPTED, "cwd": str(repo.cwd), "use_worktree": True}
        resp = client.post("/v1/sessions", json=body)
        assert resp.status_code == 201, resp.text
        session: dict[str, Any] = resp.json()
        return session


def run_turn(server: C2Process, session_id: str, script: str) -> None:
    """One turn through the API, to its end."""
    with api(server) as client:
        resp = client.post(
            f"/v1/sessions/{session_id}/prompt", json={"doc": [{"type": "text", "text": script}]}
        )
        assert resp.status_code == 202, resp.text
        until(lambda: idle(client, session_id), "the turn to end")


def idle(client: httpx.Client, session_id: str) -> bool:
    state = client.get(f"/v1/sessions/{session_id}").json()["activity"]["state"]["kind"]
    return bool(state == "idle")


def turns(page: Page) -> Locator:
    return page.get_by_role("region", name="Conversation").get_by_role("article")


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_a_turns_changes_all_changes_and_a_running_turns_so_far(
    page: Page, c2: C2Process, tmp_path: Path
):
    """The "Changes" control on a finished turn lists an added and a modified file with their
    +/- lines coloured (file content stays text), "All changes" the session's, and a running turn's
    diff says "so far"."""
    repo = make_repo(tmp_path, with_origin=False)
    session = worktree_session(c2, repo)
    open_session(page, c2, session["id"])
    send(
        page,
        "/write a.txt one\\ntwo\\n\n/write module.py VALUE = 2\\n\n"
        "/write note.md <b>bold</b> <img src=x onerror=window.__x=1>\\n\n/text done",
    )
    turn = turns(page).last
    expect(turn.locator(".reply")).to_contain_text("done")
    turn.get_by_role("button", name="Changes", exact=True).click()
    dialog = page.get_by_role("dialog", name="Changes of turn 1")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("3 files changed: 2 added, 1 modified")
    files = dialog.locator("li.file")
    expect(files).to_have_count(3)
    added = files.filter(has_text="pkg/a.txt")
    expect(added.locator(".badge").first).to_have_text("added")
    expect(added.get_by_label("Diff of pkg/a.txt").locator(".add")).to_have_text(["+one", "+two"])
    modified = files.filter(has_text="pkg/module.py")
    expect(modified.locator(".badge").first).to_have_text("modified")
    diff = modified.get_by_label("Diff of pkg/module.py")
    expect(diff.locator(".del")).to_have_text(["-VALUE = 1"])
    expect(diff.locator(".add")).to_have_text(["+VALUE = 2"])
    expect(diff.locator(".hunk")).to_have_count(1)
    # +/- lines are coloured, and HTML in a file is shown, never built.
    colours = diff.evaluate(
        "el => [...el.querySelectorAll('.add, .del')].map(l => getComputedStyle(l).backgroundColor)"
    )
    assert len(set(colours)) == 2 and "rgba(0, 0, 0, 0)" not in colours, colours
    note = files.filter(has_text="pkg/note.md")
    expect(note.locator(".add")).to_have_text(["+<b>bold</b> <img src=x onerror=window.__x=1>"])
    assert dialog.locator("b, img").count() == 0 and page.evaluate("window.__x") is None
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_have_count(0)

    page.get_by_role("button", name="All changes").click()
    whole = page.get_by_role("dialog", name="All changes")
    expect(whole.locator("li.file")).to_have_count(3)
    whole.get_by_role("button", name="Close").click()

    send(page, "/write c.txt so far\\n\n/text written\n/hang")
    running = turns(page).last
    # The write shows nothing itself: the text after it says the file is there to diff.
    expect(running.locator(".reply")).to_contain_text("written")
    running.get_by_role("button", name="Changes so far").click()
    sofar = page.get_by_role("dialog", name="Changes of turn 2 so far")
    expect(sofar).to_contain_text("still running")
    expect(sofar.locator("li.file")).to_have_count(1)
    expect(sofar.locator("li.file")).to_contain_text("pkg/c.txt")
    sofar.get_by_role("button", name="Close").click()
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    # Ended, the turn offers its own changes (the checkpoint came with turn_ended).
    expect(turns(page).last.get_by_role("button", name="Changes", exact=True)).to_be_visible()


def test_rewind_refusals_force_and_undo(page: Page, c2: C2Process, tmp_path: Path):
    """The "Rewind to here" control restores turn 1's files and shows the rewind with "Undo rewind",
    which brings turn 2's back; outside changes are listed with "Rewind anyway"; a rewind
    while a turn runs says so; undoing the forced one says so; the rewinds stay in the
    conversation after a reload."""
    repo = make_repo(tmp_path, with_origin=False)
    session = worktree_session(c2, repo)
    sid, tree = session["id"], Path(session["worktree_path"])
    target = tree / "pkg" / "a.txt"
    run_turn(c2, sid, "/write a.txt one\\n\n/text first")
    run_turn(c2, sid, "/write a.txt two\\n\n/text second")
    open_session(page, c2, sid)
    first = turns(page).first
    expect(first.locator(".reply")).to_contain_text("first")
    first.get_by_role("button", name="Rewind to here").click()  # confirm() is accepted
    notes = page.get_by_role("region", name="Conversation").get_by_role("note")
    expect(notes.filter(has_text="Files rewound to after turn 1")).to_have_count(1)
    until(lambda: read(target) == "one\n", "turn 1's file back")

    notes.last.get_by_role("button", name="Undo rewind").click()
    expect(notes.filter(has_text="Files rewound to after turn 2")).to_have_count(1)
    # Only the latest rewind offers its undo.
    expect(notes.get_by_role("button", name="Undo rewind")).to_have_count(1)
    expect(notes.last.get_by_role("button", name="Undo rewind")).to_be_visible()
    until(lambda: read(target) == "two\n", "the undo to restore turn 2's file")

    target.write_text("mine\n", encoding="utf-8")  # a change made outside any turn
    first.get_by_role("button", name="Rewind to here").click()
    refused = page.get_by_role("region", name="Rewind refused")
    expect(refused).to_contain_text("pkg/a.txt")
    assert read(target) == "mine\n"
    refused.get_by_role("button", name="Rewind anyway").click()
    expect(refused).to_have_count(0)
    until(lambda: read(target) == "one\n", "the forced rewind")
    expect(notes).to_have_count(3)
    # Its undo goes back to a tree no turn ended (the outside change): said as an undo.
    notes.last.get_by_role("button", name="Undo rewind").click()
    expect(notes).to_have_count(4)
    expect(notes.last).to_contain_text("Rewind undone")
    until(lambda: read(target) == "mine\n", "the undo to restore the outside change")

    send(page, "/hang")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(notes.get_by_role("button", name="Undo rewind")).to_have_count(0)  # a turn ran since
    first.get_by_role("button", name="Rewind to here").click()
    expect(page.get_by_role("alert")).to_contain_text("The agent is still working")
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)

    page.reload()
    expect(notes).to_have_count(4)
    expect(notes.nth(0)).to_contain_text("after turn 1")
    expect(notes.nth(1)).to_contain_text("after turn 2")
    expect(notes.nth(2)).to_contain_text("after turn 1")
    expect(notes.last).to_contain_text("Rewind undone")


def test_fork_from_a_turn_opens_the_child_with_lineage_and_primed_mark(
    page: Page, c2: C2Process, tmp_path: Path
):
    """The "Fork from here" control on turn 1 of 2 opens the child, titled "(fork)", with
    "forked from <parent> at turn 1" linking back and the parent's files of turn 1; its first
    turn is marked as primed from the parent (the scripted agent cannot fork its own session),
    after a reload too."""
    repo = make_repo(tmp_path, with_origin=False)
    parent = worktree_session(c2, repo)
    pid = parent["id"]
    run_turn(c2, pid, "/write a.txt one\\n\n/text first")
    run_turn(c2, pid, "/write a.txt two\\n\n/text second")
    with api(c2) as client:
        title = client.get(f"/v1/sessions/{pid}").json()["title"] or "Untitled"
    open_session(page, c2, pid)
    expect(turns(page)).to_have_count(2)
    turns(page).first.get_by_role("button", name="Fork from here").click()
    expect(page).not_to_have_url(re.compile(re.escape(pid)))
    child_id = page.url.rsplit("/", 1)[-1]
    expect(page.get_by_role("heading", level=1)).to_have_text(f"{title} (fork)")
    lineage = page.locator(".session-head .lineage")
    expect(lineage).to_contain_text("Forked from")
    expect(lineage).to_contain_text("at turn 1")
    expect(lineage.get_by_role("link", name=title)).to_have_attribute("href", f"#/s/{pid}")
    expect(turns(page)).to_have_count(1)  # the parent's turn 1, copied
    with api(c2) as client:
        child = client.get(f"/v1/sessions/{child_id}").json()
    assert child["forked_from"] == {"session": pid, "turn": 1}
    assert read(Path(child["worktree_path"]) / "pkg" / "a.txt") == "one\n"

    send(page, "/text continuing")
    expect(turns(page)).to_have_count(2)
    expect(turns(page).last.get_by_role("note")).to_contain_text(
        f"Primed from “{title}” up to turn 1"
    )
    expect(turns(page).last.locator(".reply")).to_contain_text("continuing")
    page.reload()  # the mark comes from the transcript too, not only from the live event
    expect(turns(page)).to_have_count(2)
    expect(turns(page).last.get_by_role("note")).to_contain_text(
        f"Primed from “{title}” up to turn 1"
    )
    lineage.get_by_role("link", name=title).click()
    expect(page).to_have_url(re.compile(re.escape(pid) + "$"))
    expect(turns(page)).to_have_count(2)


def queued_texts(panel: Locator) -> list[str]:
    return [t.strip() for t in panel.locator(".queued-text").all_text_contents()]


def test_queue_edit_remove_pause_on_cancel_resume_in_order_in_two_tabs(
    context: BrowserContext, page: Page, c2: C2Process, workdir: Path
):
    """While a turn runs the composer queues; items can be edited and removed; Stop pauses
    the queue (shown with its reason in both tabs), Resume runs the rest in order."""
    session = new_session(c2, workdir)
    sid = session["id"]
    other = context.new_page()
    try:
        open_session(page, c2, sid)
        open_session(other, c2, sid)
        send(page, "/hang")
        expect(page.get_by_role("button", name="Stop")).to_be_visible()
        assert page.get_by_role("button", name="Send").count() == 0
        box = page.get_by_role("textbox", name="Message")
        for text in ("/text q-one", "/text q-two", "/text q-three"):
            box.fill(text)
            page.get_by_role("button", name="Queue").click()
            expect(box).to_have_value("")
        panel = page.get_by_role("region", name="Queue")
        mirror = other.get_by_role("region", name="Queue")
        expect(panel.get_by_role("listitem")).to_have_count(3)
        assert queued_texts(panel) == ["/text q-one", "/text q-two", "/text q-three"]

        panel.get_by_role("listitem").nth(1).get_by_role("button", name="Edit").click()
        panel.get_by_role("textbox", name="Queued message").fill("/text q-two-edited")
        panel.get_by_role("button", name="Save").click()
        expect(panel.locator(".queued-text").nth(1)).to_have_text("/text q-two-edited")
        panel.get_by_role("listitem").nth(2).get_by_role("button", name="Remove").click()
        expect(panel.get_by_role("listitem")).to_have_count(2)
        expect(mirror.locator(".queued-text")).to_have_text(["/text q-one", "/text q-two-edited"])

        page.get_by_role("button", name="Stop").click()
        for tab in (panel, mirror):
            expect(tab.get_by_role("status")).to_contain_text(
                "Queue paused: the last turn was stopped"
            )
        with api(c2) as client:
            view = client.get(f"/v1/sessions/{sid}/queue").json()
        assert view["paused"] is True and view["pause_reason"] == "cancelled"
        assert [i["doc"][0]["text"] for i in view["items"]] == ["/text q-one", "/text q-two-edited"]
        mirror.get_by_role("button", name="Resume").click()
        for view in (page, other):
            expect(turns(view)).to_have_count(3)
            expect(view.get_by_role("region", name="Queue")).to_have_count(0)
            expect(turns(view).nth(1).locator(".prompt")).to_have_text("/text q-one")
            expect(turns(view).nth(2).locator(".prompt")).to_have_text("/text q-two-edited")
            expect(turns(view).nth(2).locator(".reply")).to_contain_text("q-two-edited")
    finally:
        other.close()
    with api(c2) as client:
        until(lambda: idle(client, sid), "the queue to finish")
        entries = client.get(f"/v1/sessions/{sid}/transcript").json()["entries"]
    prompts = [e["part"]["text"] for e in entries if e["role"] == "user"]
    assert prompts == ["/hang", "/text q-one", "/text q-two-edited"]


def test_a_discarded_worktree_stays_discarded_after_reload(
    page: Page, c2: C2Process, context: BrowserContext, tmp_path: Path
):
    """After "Discard worktree" another open tab stops offering it at once (the
    `worktree_discarded` event), and a reload no longer offers it (nor diffs or rewinds): the
    snapshot says the worktree was discarded."""
    repo = make_repo(tmp_path, with_origin=False)
    session = worktree_session(c2, repo)
    open_session(page, c2, session["id"])
    other = context.new_page()
    try:
        open_session(other, c2, session["id"])
        expect(other.get_by_role("button", name="Discard worktree")).to_be_visible()
        expect(page.get_by_role("button", name="All changes")).to_be_visible()
        page.get_by_role("button", name="Discard worktree").click()
        expect(page.get_by_role("button", name="Discard worktree")).to_have_count(0)
        expect(other.get_by_role("button", name="Discard worktree")).to_have_count(0)
        expect(other.get_by_role("button", name="All changes")).to_have_count(0)
    finally:
        other.close()
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    expect(page.locator(".session-head .badge.worktree")).to_contain_text("worktree discarded")
    expect(page.get_by_role("button", name="Discard worktree")).to_have_count(0)
    expect(page.get_by_role("button", name="All changes")).to_have_count(0)
    expect(page.get_by_role("button", name="Fork session")).to_be_visible()
    entry = (
        page.get_by_role("navigation", name="Sessions")
        .get_by_role("listitem")
        .filter(has=page.locator(f'a[href="#/s/{session["id"]}"]'))
    )
    expect(entry).to_have_count(1)
    expect(entry.locator(".badge.worktree")).to_have_count(0)


def test_screenshots_of_the_diff_view_and_the_queue(
    browser: Browser, c2: C2Process, context: BrowserContext, tmp_path: Path
):
    """Dark phone (390x844) and desktop shots of turns with their actions and rewinds, a turn's
    diff and the queue panel (docs/ keeps a copy: C2_SCREENSHOT_DIR=docs/screenshots)."""
    repo = make_repo(tmp_path, with_origin=False)
    session = worktree_session(c2, repo)
    sid = session["id"]
    run_turn(c2, sid, "/write util.py def helper():\\n    return 1\\n\n/text Added a helper.")
    run_turn(
        c2,
        sid,
        "/write module.py VALUE = 2\\n\\n\\ndef double(x):\\n    return VALUE * x\\n\n"
        "/rename util.py helpers.py\n/binary logo.png 300\n"
        "/write NOTES.md # Notes\\n\\n- checkpoints per turn\\n- rewind, undo\\n\n"
        "/text Doubled the value, renamed the helpers and added notes.",
    )
    with api(c2) as client:  # a rewind and its undo, as the conversation shows them
        done = client.post(f"/v1/sessions/{sid}/rewind", json={"to_turn": 1}).json()
        undo = {"to_checkpoint": done["pre_rewind_checkpoint"]}
        assert client.post(f"/v1/sessions/{sid}/rewind", json=undo).status_code == 200
    out = Path(os.environ.get("C2_SCREENSHOT_DIR") or tmp_path / "shots")
    out.mkdir(parents=True, exist_ok=True)
    state = context.storage_state()
    for name, size in (("phone", (390, 844)), ("desktop", (1280, 800))):
        shot = browser.new_context(
            viewport={"width": size[0], "height": size[1]}, storage_state=state, color_scheme="dark"
        )
        try:
            page = shot.new_page()
            open_session(page, c2, sid)
            expect(turns(page)).to_have_count(2)
            expect(page.get_by_role("note").filter(has_text="Files rewound")).to_have_count(2)
            expect(page.get_by_role("button", name="Undo rewind")).to_have_count(1)
            page.screenshot(path=str(out / f"web-turns-{name}-dark.png"))
            turns(page).last.get_by_role("button", name="Changes", exact=True).click()
            dialog = page.get_by_role("dialog", name="Changes of turn 2")
            expect(dialog.locator("li.file")).to_have_count(4)
            page.screenshot(path=str(out / f"web-diff-{name}-dark.png"))

            queued = new_session(c2, tmp_path)
            open_session(page, c2, queued["id"])
            send(page, "/text Working on the tests first.\n/hang")
            expect(page.get_by_role("button", name="Stop")).to_be_visible()
            box = page.get_by_role("textbox", name="Message")
            for text in ("Then update the README", "Run the linters and fix what they find"):
                box.fill(text)
                page.get_by_role("button", name="Queue").click()
                expect(box).to_have_value("")
            panel = page.get_by_role("region", name="Queue")
            expect(panel.get_by_role("listitem")).to_have_count(2)
            if name == "phone":  # the paused state, as a cancel leaves it
                page.get_by_role("button", name="Stop").click()
                expect(panel.get_by_role("status")).to_contain_text("paused")
            page.screenshot(path=str(out / f"web-queue-{name}-dark.png"))
            if name != "phone":
                page.get_by_role("button", name="Stop").click()
            expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        finally:
            shot.close()
    for shot_name in (
        "turns-phone",
        "turns-desktop",
        "diff-phone",
        "diff-desktop",
        "queue-phone",
        "queue-desktop",
    ):
        assert (out / f"web-{shot_name}-dark.png").stat().st_size > 5000
