"""Persistence: SQLModel tables, repositories, the event log, Alembic migrations."""
