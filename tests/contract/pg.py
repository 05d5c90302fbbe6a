"""The stores tests run on: SQLite always, PostgreSQL (a schema of a test's own in the test
database) when C2_TEST_DATABASE_URL is set. Parametrize a fixture with `STORES` and open the
store with `database_url_for` (a Store) or `running_server` (a real `c2 serve`)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text

from c2.core.store.database import sqlite_url
from tests.e2e.harness import C2Process

PG_URL = os.environ.get("C2_TEST_DATABASE_URL")
STORES = [
    "sqlite",
    pytest.param(
        "postgres",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(not PG_URL, reason="C2_TEST_DATABASE_URL is not set"),
        ],
    ),
]


@contextmanager
def pg_schema_url(prefix: str, base: str | None = None) -> Iterator[str]:
    """`base` (C2_TEST_DATABASE_URL unless given) with its search_path set to a fresh schema,
    dropped afterwards."""
    base = base or PG_URL
    assert base is not None
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    # pre-ping: a test may have restarted the cluster under the pooled connection
    admin = create_engine(base, pool_pre_ping=True)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in base else "?"
    try:
        yield f"{base}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@contextmanager
def database_url_for(store: str, folder: Path, prefix: str) -> Iterator[str]:
    """`store` ("sqlite" / "postgres" of STORES): SQLite in `folder`, or a fresh schema."""
    if store == "sqlite":
        yield sqlite_url(folder)
        return
    with pg_schema_url(prefix) as url:
        yield url


@contextmanager
def running_server(
    store: str, home: Path, prefix: str, env: dict[str, str] | None = None
) -> Iterator[C2Process]:
    """A started `c2 serve` on `home` whose database is `store` (SQLite: the home's own)."""
    with contextlib.ExitStack() as stack:
        env = dict(env or {})
        if store != "sqlite":
            env["C2_DATABASE_URL"] = stack.enter_context(pg_schema_url(prefix))
        server = C2Process(home, env=env)
        server.start()
        try:
            yield server
        finally:
            server.stop()
