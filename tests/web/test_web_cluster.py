"""The web client on a cluster (issue 18), driven by Chromium against two real `c2 serve
--cluster` members on the local PostgreSQL (skipped without C2_TEST_DATABASE_URL): the
Instances page lists the live members, a session shows the instance that runs it, and a
session whose instance is gone says so, naming it, instead of a generic error. The browser
is paired with B; the sessions belong to A."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.cluster.conftest import member
from tests.contract.pg import PG_URL, pg_schema_url
from tests.e2e.harness import SCRIPTED, C2Process
from tests.gitrepos import make_repo
from tests.web.conftest import api, new_session, open_session, pair_url, until

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not PG_URL, reason="C2_TEST_DATABASE_URL is not set"),
]


def _id(server: C2Process) -> str:
    return (server.home / "instance-id").read_text(encoding="utf-8").strip()


@pytest.fixture(scope="module")
def members(web_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[C2Process]]:
    """Members A and B, started in that order, sharing one device for the tests' API calls."""
    with pg_schema_url("c2_webcluster") as url:
        a = member(tmp_path_factory.mktemp("a"), url)
        b = member(tmp_path_factory.mktemp("b"), url)
        try:
            a.start()
            b.bearer = a.bearer
            b.start()
            yield [a, b]
        finally:
            b.stop()
            a.stop()


@pytest.fixture(scope="module")
def on_b(browser: Browser, members: list[C2Process]) -> Iterator[BrowserContext]:
    """A dark desktop browser profile paired with B from a URL `c2 pair-url` printed."""
    printed = pair_url(members[1])
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="dark")
    page = context.new_page()
    page.goto(printed)
    expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
    page.close()
    yield context
    context.close()


@pytest.fixture
def page(on_b: BrowserContext) -> Iterator[Page]:
    page = on_b.new_page()
    yield page
    page.close()


def _session_with_a_turn(server: C2Process, cwd: Path, text: str) -> str:
    """A session owned by `server` whose first turn (its prompt's first line is its title)
    has ended."""
    sid = str(new_session(server, cwd)["id"])
    with api(server) as client:
        body = {"doc": [{"type": "text", "text": f"{text}\n/text Done."}]}
        assert client.post(f"/v1/sessions/{sid}/prompt", json=body).status_code == 202
        until(
            lambda: client.get(f"/v1/sessions/{sid}").json()["activity"]["state"]["kind"] == "idle",
            "the turn to end",
        )
    return sid


def test_the_instances_page_lists_the_live_members(
    page: Page, members: list[C2Process], tmp_path: Path
) -> None:
    """Each live member with its short id (the full one on hover), its URL, a heartbeat age
    and the sessions it owns; the member serving this page is marked."""
    a, b = members
    for n, (server, text) in enumerate(
        ((a, "Fix the flaky login test"), (a, "Write the release notes"), (b, "Tidy the CI"))
    ):
        (tmp_path / str(n)).mkdir()
        _session_with_a_turn(server, tmp_path / str(n), text)
    page.goto(b.base_url + "/")
    expect(page.get_by_role("complementary").get_by_role("link")).to_have_count(3)
    page.get_by_role("link", name="Instances").click()  # in the header of a cluster member
    table = page.get_by_role("table", name="Instances")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(2)
    # Rows by member id, not position: the list is in start order, and a member that misses
    # its lease on a busy machine re-joins with a later start.
    for server, owned in ((a, "2"), (b, "1")):
        row = rows.filter(has=page.locator(f'code[title="{_id(server)}"]'))
        expect(row.locator("code")).to_have_text(_id(server)[:8])
        expect(row.locator("td").nth(1)).to_have_text(server.base_url)
        expect(row.locator("td").nth(2)).to_have_text(re.compile(r"^\d+ s ago$"))
        expect(row.locator("td").nth(4)).to_have_text(owned)
    serving = rows.filter(has=page.locator(f'code[title="{_id(b)}"]'))
    expect(serving.locator(".badge")).to_have_text("this server")
    expect(rows.filter(has=page.locator(f'code[title="{_id(a)}"]'))).not_to_contain_text(
        "this server"
    )
    # Kept in docs/screenshots when C2_SCREENSHOT_DIR=docs/screenshots (README "Web client").
    out = Path(os.environ.get("C2_SCREENSHOT_DIR") or tmp_path)
    page.screenshot(path=str(out / "web-instances-desktop-dark.png"))
    assert (out / "web-instances-desktop-dark.png").stat().st_size > 5000


def test_a_session_shows_the_instance_that_runs_it(
    page: Page, members: list[C2Process], tmp_path: Path
) -> None:
    a, b = members
    session = new_session(a, tmp_path)
    assert session["owner"] == _id(a)
    open_session(page, b, session["id"])
    badge = page.locator(".session-head .badge.owner")
    expect(badge).to_have_text(f"on {_id(a)[:8]} (127.0.0.1:{a.port})")
    expect(badge).to_have_attribute("title", f"Runs on c2 instance {_id(a)}")


def test_a_worktree_session_whose_instance_is_gone_says_so(
    page: Page, members: list[C2Process], tmp_path: Path
) -> None:
    """A stops (a clean stop leaves the cluster at once): its worktree session stays
    readable through B, is marked gone, and a prompt is refused with a sentence naming A."""
    a, b = members
    repo = make_repo(tmp_path, with_origin=False)
    with api(a) as client:
        made = client.post(
            "/v1/sessions",
            json={"provider": SCRIPTED, "cwd": str(repo.cwd), "use_worktree": True},
        )
        assert made.status_code == 201, made.text
    sid = made.json()["id"]
    a.stop()
    try:
        open_session(page, b, sid)
        expect(page.locator(".session-head .badge.owner")).to_have_text(f"on {_id(a)[:8]} · gone")
        page.get_by_role("textbox", name="Message").fill("/text hello")
        page.get_by_role("button", name="Send").click()
        alert = page.locator(".composer").get_by_role("alert")
        named = f"The c2 instance {_id(a)[:8]} that runs this session is gone"
        expect(alert).to_contain_text(named)
        expect(alert).to_contain_text("only when that instance is back")
        expect(alert).not_to_contain_text("request failed")
    finally:
        a.start()
