"""The web client over a session list longer than the welcome frame's first page (issue 17):
it pages the rest in, and a session beyond the first page opens.

Seeds its server's database directly, so it has this module's server to itself.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from c2.core.session import SessionRecord, utcnow
from c2.core.session_list import DEFAULT_LIMIT
from c2.core.store.database import Store, UnitOfWork, sqlite_url
from tests.e2e.harness import C2Process

pytestmark = pytest.mark.timeout(300)
SEEDED = DEFAULT_LIMIT + 10


def seed_sessions(server: C2Process) -> None:
    """SEEDED sessions, a day apart, written to the running server's database."""
    start = utcnow() - timedelta(days=SEEDED + 1)
    records = [
        SessionRecord(
            id=f"seeded-{n:03d}",
            provider="custom:scripted",
            cwd=str(server.home),
            title=f"Seeded {n:03d}",
            created_at=start + timedelta(days=n),
        )
        for n in range(SEEDED)
    ]
    store = Store(sqlite_url(server.home))
    try:

        def insert(uow: UnitOfWork) -> None:
            for rec in records:
                uow.sessions.insert(rec)

        store.write_sync(insert)
    finally:
        store.close()


def test_session_list_pages_in_beyond_the_welcome_frame(page: Page, c2: C2Process):
    """Every session is listed, not only the welcome frame's page, and the oldest opens."""
    seed_sessions(c2)
    page.goto(f"{c2.base_url}/#/")
    expect(page.get_by_role("status", name="Connection")).to_contain_text("Connected")
    listed = page.get_by_role("navigation", name="Sessions").get_by_role("link")
    expect(listed).to_have_count(SEEDED)
    expect(listed.first).to_have_text(f"Seeded {SEEDED - 1:03d}")
    expect(listed.last).to_have_text("Seeded 000")
    page.goto(f"{c2.base_url}/#/s/seeded-000")
    expect(page.get_by_role("heading", level=1)).to_have_text("Seeded 000")
    expect(page.get_by_role("region", name="Conversation")).to_contain_text("No messages yet")
