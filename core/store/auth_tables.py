"""Tables of device auth (docs/api.md §2): paired devices, pairing tokens, stream tickets.

Secrets are never stored: every credential column holds the sha256 hex digest of the secret.
Every schema change here needs an Alembic revision in migrations/versions/.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, DateTime, Index, Text
from sqlmodel import Field, SQLModel


class DeviceRow(SQLModel, table=True):
    """A paired device; its bearer is known only by hash."""

    __tablename__ = "devices"

    id: str = Field(primary_key=True, max_length=64)
    name: str = Field(sa_column=Column(Text, nullable=False))
    bearer_hash: str = Field(max_length=64, unique=True)
    # Comma-separated scope names (core/scopes.py); devices paired before scopes hold all four.
    scopes: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    last_seen: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class PairingTokenRow(SQLModel, table=True):
    """A one-time pairing token: redeemable once, before `expires_at`."""

    __tablename__ = "pairing_tokens"

    token_hash: str = Field(primary_key=True, max_length=64)
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    scopes: str = Field(sa_column=Column(Text, nullable=False))  # given to the device it pairs
    used_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class StreamTicketRow(SQLModel, table=True):
    """A single-use SSE ticket of one device (for EventSource, which cannot send headers)."""

    __tablename__ = "stream_tickets"

    ticket_hash: str = Field(primary_key=True, max_length=64)
    device_id: str = Field(max_length=64)
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))

    __table_args__ = (Index("ix_stream_tickets_device", "device_id"),)
