"""Fixtures for the browser tests: a real `c2 serve`, Debian's Chromium driven by Playwright.

One server and one browser per module keep the suite quick. The web client
is built (`make web`, a no-op when up to date) before the first server starts; Chromium is
`/usr/bin/chromium` (`make test` installs it), never a downloaded browser.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from tests.e2e.harness import REPO, SCRIPTED, C2Process

PAIR_URL = (sys.executable, "-m", "c2.api.cli", "pair-url")
CHROMIUM = os.environ.get("C2_TEST_CHROMIUM", "/usr/bin/chromium")
expect.set_options(timeout=15_000)


def until(check: Callable[[], Any], what: str, timeout: float = 15) -> Any:
    """Poll `check` until it is truthy (a bounded wait, for state outside the page)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="session")
def web_build() -> Path:
    """The built client in the package (built now when missing or stale)."""
    make = shutil.which("make")
    assert make is not None, "make is required to build the web client"
    done = subprocess.run(
        [make, "-s", "web"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    index = REPO / "api" / "web_dist" / "index.html"
    assert index.is_file()
    return index


# Module scope, not session: the sync driver runs an event loop in this thread while it is
# open, which would stop pytest-asyncio's tests in later modules from running.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: `make browser` installs it"
    browser = playwright.chromium.launch(executable_path=CHROMIUM)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def c2(web_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[C2Process]:
    server = C2Process(tmp_path_factory.mktemp("c2home"))
    server.start()
    yield server
    server.stop()


def pair_url(server: C2Process) -> str:
    """A fresh one-time pairing URL, as `c2 pair-url` prints it (in the server's environment:
    a cluster member's database URL included)."""
    done = subprocess.run(
        [*PAIR_URL, "--home", str(server.home), "--port", str(server.port)],
        cwd=REPO,
        env=server._env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def api(server: C2Process) -> httpx.Client:
    """An HTTP client of the server with the tests' own bearer (not the browser's)."""
    headers = {"Authorization": f"Bearer {server.bearer}"}
    return httpx.Client(base_url=server.base_url, headers=headers, timeout=30)


def new_session(server: C2Process, cwd: Path, provider: Any = None) -> dict[str, Any]:
    with api(server) as client:
        body = {"provider": provider or SCRIPTED, "cwd": str(cwd), "use_worktree": False}
        resp = client.post("/v1/sessions", json=body)
        assert resp.status_code == 201, resp.text
        session: dict[str, Any] = resp.json()
        return session


def paired(context: BrowserContext, server: C2Process) -> Page:
    """Pair `context` from a fresh printed URL; returns the page, live in the app."""
    page = context.new_page()
    page.goto(pair_url(server))
    expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
    return page


@pytest.fixture(scope="module")
def context(browser: Browser, c2: C2Process) -> Iterator[BrowserContext]:
    """A browser profile paired with the module's server (tabs share its credential)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    paired(context, c2).close()
    yield context
    context.close()


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    """A tab of the paired profile; an uncaught error in the app fails the test that made it
    (a render that throws leaves a blank or frozen page that no assertion may look at)."""
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"{error.name}: {error.message}"))
    yield page
    page.close()
    assert errors == [], errors


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def open_session(page: Page, server: C2Process, session_id: str) -> None:
    page.goto(f"{server.base_url}/#/s/{session_id}")
    expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
    expect(page.get_by_role("region", name="Conversation")).to_be_visible()


def send(page: Page, text: str) -> None:
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("button", name="Send").click()
