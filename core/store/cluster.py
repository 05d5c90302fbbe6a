"""Cluster tables and their repository (issue 18): who the members are and until when.

`cluster_instances`: one row per member (`c2 serve --cluster`), its advertised URL and a lease
renewed by its heartbeat. Every time is the database's clock (`now()`), never a host's, so
members with skewed clocks judge each other alike. `cluster_settings`: cluster-wide values,
today the key members authenticate each other with. Every schema change here needs an Alembic
revision in migrations/versions/.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Column, Connection, DateTime, Text, delete, text
from sqlmodel import Field, SQLModel


class ClusterInstanceRow(SQLModel, table=True):
    """One live (or not yet expired) cluster member and its lease."""

    __tablename__ = "cluster_instances"

    id: str = Field(primary_key=True, max_length=64)
    url: str = Field(sa_column=Column(Text, nullable=False))
    started_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    heartbeat_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    lease_expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class ClusterSettingRow(SQLModel, table=True):
    """A cluster-wide setting (the cluster key)."""

    __tablename__ = "cluster_settings"

    name: str = Field(primary_key=True, max_length=32)
    value: str = Field(sa_column=Column(Text, nullable=False))


_INSTANCES = ClusterInstanceRow.__table__  # type: ignore[attr-defined]
SECRET = "secret"
# PostgreSQL only (a cluster needs it): upserts judged by the database's clock.
_REGISTER = text(
    "INSERT INTO cluster_instances (id, url, started_at, heartbeat_at, lease_expires_at) "
    "VALUES (:id, :url, now(), now(), now() + make_interval(secs => :lease)) "
    "ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, started_at = EXCLUDED.started_at, "
    "heartbeat_at = EXCLUDED.heartbeat_at, lease_expires_at = EXCLUDED.lease_expires_at"
)
# An expired lease is not renewed: the member must join again (its peers may be taking its
# sessions over).
_HEARTBEAT = text(
    "UPDATE cluster_instances SET heartbeat_at = now(), "
    "lease_expires_at = now() + make_interval(secs => :lease) "
    "WHERE id = :id AND lease_expires_at > now()"
)
_LIVE = text(
    "SELECT id, url, started_at, heartbeat_at, lease_expires_at FROM cluster_instances "
    "WHERE lease_expires_at > now() ORDER BY started_at, id"
)
_REMOVE_EXPIRED = text("DELETE FROM cluster_instances WHERE id = :id AND lease_expires_at <= now()")
_IS_LIVE = text("SELECT 1 FROM cluster_instances WHERE id = :id AND lease_expires_at > now()")
_EXPIRED = text("SELECT id FROM cluster_instances WHERE lease_expires_at <= now() ORDER BY id")
_SETTING_INSERT = text(
    "INSERT INTO cluster_settings (name, value) VALUES (:name, :value) "
    "ON CONFLICT (name) DO NOTHING"
)
_SETTING_READ = text("SELECT value FROM cluster_settings WHERE name = :name")
_SETTING_REPLACE = text(
    "INSERT INTO cluster_settings (name, value) VALUES (:name, :value) "
    "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
)
_HEARTBEAT_OF = text(
    "SELECT heartbeat_at FROM cluster_instances WHERE id = :id AND lease_expires_at > now()"
)
_NOTIFY_CONTROL = text("SELECT pg_notify('c2_ctl_' || md5(current_schema()), :p)")
# The fence of a member's writes: its own row, with a live lease, locked against the DELETE of
# a survivor taking it over until this transaction ends (KEY SHARE: heartbeats still pass).
_HOLDS_LEASE = text(
    "SELECT 1 FROM cluster_instances WHERE id = :id AND lease_expires_at > now() FOR KEY SHARE"
)


class LeaseLostError(Exception):
    """This member's lease has expired: its writes are refused until it joins again (peers
    may be taking its sessions over)."""


def require_lease(conn: Connection, instance_id: str) -> None:
    """Fence a member's write: raise LeaseLostError unless `instance_id` holds a live lease,
    and keep it from being taken over until `conn`'s transaction ends. A write that commits
    is therefore ordered before any takeover of its member; one after it is refused."""
    if conn.execute(_HOLDS_LEASE, {"id": instance_id}).first() is None:
        raise LeaseLostError(f"the cluster lease of {instance_id} has expired")


def notify_members(conn: Connection, message: str) -> None:
    """Send `message` to every member's listener when this transaction commits
    (core/cluster/fanout.py), e.g. `revoke <device id>`."""
    conn.execute(_NOTIFY_CONTROL, {"p": message})


@dataclass(frozen=True)
class Instance:
    """A member as `GET /v1/instances` lists it."""

    id: str
    url: str
    started_at: datetime
    heartbeat_at: datetime
    lease_expires_at: datetime


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


class ClusterRepository:
    """Members, leases and cluster settings on one connection."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def register(self, instance_id: str, url: str, lease_seconds: float) -> None:
        """(Re)start `instance_id`'s membership with a fresh lease."""
        self._conn.execute(_REGISTER, {"id": instance_id, "url": url, "lease": lease_seconds})

    def heartbeat(self, instance_id: str, lease_seconds: float) -> bool:
        """Renew the lease; False when it expired (or a peer already removed the row)."""
        done = self._conn.execute(_HEARTBEAT, {"id": instance_id, "lease": lease_seconds})
        return bool(done.rowcount)

    def leave(self, instance_id: str) -> None:
        """Remove the member's row (a clean shutdown)."""
        self._conn.execute(delete(_INSTANCES).where(_INSTANCES.c.id == instance_id))

    def live(self) -> list[Instance]:
        """Members whose lease has not expired by the database's clock, oldest first."""
        return [
            Instance(r[0], r[1], _utc(r[2]), _utc(r[3]), _utc(r[4]))
            for r in self._conn.execute(_LIVE).all()
        ]

    def remove_expired(self, instance_id: str) -> bool:
        """Delete `instance_id`'s row if its lease has expired; True for the one member
        whose transaction did (it takes the dead member's sessions over)."""
        done = self._conn.execute(_REMOVE_EXPIRED, {"id": instance_id})
        return bool(done.rowcount)

    def is_live(self, instance_id: str) -> bool:
        """Whether the member's lease has not expired (by the database's clock)."""
        return self._conn.execute(_IS_LIVE, {"id": instance_id}).first() is not None

    def expired(self) -> list[str]:
        """Members whose lease has expired (their sessions are to be taken over)."""
        return [str(r[0]) for r in self._conn.execute(_EXPIRED).all()]

    def heartbeat_of(self, instance_id: str) -> datetime | None:
        """When a live member last renewed its lease; None when it has no live lease."""
        row = self._conn.execute(_HEARTBEAT_OF, {"id": instance_id}).first()
        return None if row is None else _utc(row[0])

    def setting(self, name: str, default: str) -> str:
        """A cluster setting, stored as `default` by the first member that asks."""
        self._conn.execute(_SETTING_INSERT, {"name": name, "value": default})
        return str(self._conn.execute(_SETTING_READ, {"name": name}).scalar_one())

    def replace_setting(self, name: str, value: str) -> None:
        """Set a cluster setting, whatever it was."""
        self._conn.execute(_SETTING_REPLACE, {"name": name, "value": value})

    def secret(self) -> str:
        """The cluster's instance-to-instance key, created by the first member that asks."""
        return self.setting(SECRET, secrets.token_urlsafe(32))
