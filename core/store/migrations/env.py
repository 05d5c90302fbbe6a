"""Alembic environment: runs on the connection the Store hands in (no ini file, no URL here)."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from c2.core.store import auth_tables, queue, tables, usage  # noqa: F401  (registers the metadata)

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=SQLModel.metadata)
with context.begin_transaction():
    context.run_migrations()
