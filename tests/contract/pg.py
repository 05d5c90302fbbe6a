"""PostgreSQL for the contract tests: the test database URL and a schema of a test's own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

from sqlalchemy import create_engine, text

PG_URL = os.environ.get("C2_TEST_DATABASE_URL")


@contextmanager
def pg_schema_url(prefix: str) -> Iterator[str]:
    """A C2_TEST_DATABASE_URL whose search_path is a fresh schema, dropped afterwards."""
    assert PG_URL is not None
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    # pre-ping: a test may have restarted the cluster under the pooled connection
    admin = create_engine(PG_URL, pool_pre_ping=True)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
