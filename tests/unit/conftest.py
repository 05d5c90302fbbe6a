"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from c2.core.store.database import Store, sqlite_url


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A migrated SQLite store of the test's own."""
    db = Store(sqlite_url(tmp_path))
    db.migrate()
    yield db
    db.close()
