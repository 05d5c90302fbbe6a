"""Webhooks, their delivery outbox, and Web Push subscriptions (issue 15, part 3).

Deliveries are rows of `webhook_deliveries`, inserted by `record_deliveries` in the very
transaction that appends their event (core/store/database.py calls it for the events in
WEBHOOK_EVENTS), so an event is never committed without its pending deliveries, nor the
reverse, and both survive a crash. Each body is rendered once there; retries send it again
byte for byte under the same delivery id. Every schema change here needs an Alembic
revision in migrations/versions/.

Over 300 lines: the tables, the outbox written in the event's transaction and the delivery
bookkeeping the worker reads are one design; push subscriptions, a table of the same
migration (0008), sit with them.
A delivery is sent only by the sender that claimed it (`claim`): a conditional update of the
due, pending row that names the sender and moves `next_attempt_at` one claim lease ahead, so
exactly one sender's update matches and nobody else finds it due until its outcome is
recorded or the lease ran out (the sender died). Cluster members judge this by the
database's clock (`now()`); SQLite has one writer and uses this host's.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Connection,
    DateTime,
    Index,
    Integer,
    String,
    Text,
    and_,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlmodel import Field, SQLModel

from c2.core.notify.payloads import webhook_body
from c2.core.protocol.events import Event
from c2.core.session import rfc3339, utcnow
from c2.core.store.auth_tables import DeviceRow
from c2.core.store.tables import USER_ROW, PartRow, SessionRow, aware

PUSH_PER_DEVICE = 8  # push subscriptions a device keeps (its newest)

# Consecutive failed attempts (any delivery of the webhook) after which it is disabled.
DISABLE_AFTER = 10


class WebhookRow(SQLModel, table=True):
    """A webhook: where to deliver, which events, signed with what."""

    __tablename__ = "webhooks"

    id: str = Field(primary_key=True, max_length=64)
    url: str = Field(sa_column=Column(Text, nullable=False))
    # A signing key the receiver shares, kept as given (it must be usable to sign).
    secret: str = Field(sa_column=Column(Text, nullable=False))
    events: str = Field(sa_column=Column(Text, nullable=False))  # comma-separated names
    include_content: bool = Field(default=False)
    enabled: bool = Field(default=True)
    failures: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    created_by: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    updated_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class WebhookDeliveryRow(SQLModel, table=True):
    """One event to deliver to one webhook; `state` pending until a 2xx answer."""

    __tablename__ = "webhook_deliveries"

    id: str = Field(primary_key=True, max_length=64)
    webhook_id: str = Field(max_length=64)
    event_seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    event: str = Field(max_length=64)
    body: str = Field(sa_column=Column(Text, nullable=False))
    state: str = Field(default="pending", max_length=16)  # pending | delivered
    attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    last_status: int | None = Field(default=None, sa_column=Column(Integer))
    next_attempt_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    delivered_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    # The sender whose claim holds the delivery while it is being sent (see the module doc).
    claimed_by: str | None = Field(default=None, sa_column=Column(String(80)))

    __table_args__ = (
        Index("ix_webhook_deliveries_due", "state", "next_attempt_at"),
        Index("ix_webhook_deliveries_webhook", "webhook_id", "event_seq"),
    )


class PushSubscriptionRow(SQLModel, table=True):
    """A browser's Web Push subscription (`PushSubscription.toJSON()`), per device."""

    __tablename__ = "push_subscriptions"

    id: str = Field(primary_key=True, max_length=64)  # sha256 of the endpoint
    device_id: str = Field(max_length=64)
    endpoint: str = Field(sa_column=Column(Text, nullable=False))
    p256dh: str = Field(sa_column=Column(Text, nullable=False))
    auth: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


_HOOKS = WebhookRow.__table__  # type: ignore[attr-defined]
_DELIVERIES = WebhookDeliveryRow.__table__  # type: ignore[attr-defined]
_PUSH = PushSubscriptionRow.__table__  # type: ignore[attr-defined]
_SESSIONS = SessionRow.__table__  # type: ignore[attr-defined]
_PARTS = PartRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Webhook:
    """A webhook as stored."""

    id: str
    url: str
    secret: str
    events: tuple[str, ...]
    include_content: bool
    enabled: bool
    failures: int
    created_at: datetime

    def wire(self) -> dict[str, Any]:
        """The API form: never the secret."""
        return {
            "id": self.id,
            "url": self.url,
            "events": list(self.events),
            "include_content": self.include_content,
            "enabled": self.enabled,
            "failures": self.failures,
            "created_at": rfc3339(self.created_at),
        }


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of an event to a webhook and how it went."""

    id: str
    event: str
    attempts: int
    last_status: int | None
    state: str
    delivered_at: datetime | None
    next_attempt_at: datetime

    def wire(self) -> dict[str, Any]:
        """The delivery as the delivery log answers it."""
        return {
            "delivery_id": self.id,
            "event": self.event,
            "attempts": self.attempts,
            "last_status": self.last_status,
            "delivered_at": rfc3339(self.delivered_at) if self.delivered_at else None,
            "state": self.state,
        }


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A pending delivery of an enabled webhook, with what sending it needs."""

    id: str
    webhook_id: str
    url: str
    secret: str
    body: str
    attempts: int
    next_attempt_at: datetime


@dataclass(frozen=True, slots=True)
class Disabled:
    """A webhook the last failure disabled (its event is emitted by the caller)."""

    webhook_id: str
    url: str
    failures: int
    last_status: int | None


@dataclass(frozen=True, slots=True)
class PushSubscription:
    """A browser's push subscription for a device."""

    id: str
    device_id: str
    endpoint: str
    p256dh: str
    auth: str


def _webhook(row: Any) -> Webhook:
    return Webhook(
        id=row.id,
        url=row.url,
        secret=row.secret,
        events=tuple(e for e in row.events.split(",") if e),
        include_content=bool(row.include_content),
        enabled=bool(row.enabled),
        failures=int(row.failures),
        created_at=row.created_at,
    )


def _now(conn: Connection) -> ColumnElement[datetime] | datetime:
    """Now, by the clock senders agree on: the database's for PostgreSQL (cluster members on
    several hosts), this host's for SQLite (one writer)."""
    return func.now() if conn.dialect.name == "postgresql" else utcnow()


def record_deliveries(conn: Connection, events: list[tuple[int, Event]]) -> int:
    """Queue a delivery of each event (with its committed seq) to every enabled webhook that
    subscribes to it, in the caller's transaction; returns how many were queued."""
    hooks = conn.execute(
        select(_HOOKS.c.id, _HOOKS.c.events, _HOOKS.c.include_content).where(
            _HOOKS.c.enabled.is_(True)
        )
    ).all()
    if not hooks:
        return 0
    now = utcnow()
    stamp = rfc3339(now)
    titles: dict[str, str | None] = {}
    rows: list[dict[str, Any]] = []
    for seq, ev in events:
        subscribed = [h for h in hooks if ev.event in h.events.split(",")]
        if not subscribed:
            continue
        wire = ev.wire()
        session = wire.get("session")
        if session is not None and session not in titles:
            titles[session] = session_title(conn, session)
        content = None
        if (
            session is not None
            and ev.event == "turn_ended"
            and any(h.include_content for h in subscribed)
        ):
            content = turn_text(conn, session)
        for hook in subscribed:
            delivery_id = str(uuid.uuid4())
            rows.append(
                {
                    "id": delivery_id,
                    "webhook_id": hook.id,
                    "event_seq": seq,
                    "event": ev.event,
                    "body": webhook_body(
                        delivery_id=delivery_id,
                        webhook_id=hook.id,
                        seq=seq,
                        created_at=stamp,
                        wire=wire,
                        session_title=titles.get(session) if session else None,
                        include_content=bool(hook.include_content),
                        content=content,
                    ),
                    "state": "pending",
                    "attempts": 0,
                    "last_status": None,
                    "next_attempt_at": now,
                    "delivered_at": None,
                    "created_at": now,
                }
            )
    if rows:
        conn.execute(insert(_DELIVERIES), rows)
    return len(rows)


def session_title(conn: Connection, session: str) -> str | None:
    """The session's title, None when unknown."""
    title = conn.execute(select(_SESSIONS.c.title).where(_SESSIONS.c.id == session)).scalar()
    return str(title) if title is not None else None


def turn_text(conn: Connection, session: str) -> str:
    """The agent's text since the session's last prompt (the turn that just ended)."""
    last_prompt = conn.execute(
        select(_PARTS.c.seq)
        .where(_PARTS.c.session_id == session, USER_ROW)
        .order_by(_PARTS.c.seq.desc())
        .limit(1)
    ).scalar()
    query = select(_PARTS.c.part_json).where(
        _PARTS.c.session_id == session, _PARTS.c.role == "agent"
    )
    if last_prompt is not None:
        query = query.where(_PARTS.c.seq > last_prompt)
    texts = []
    for (raw,) in conn.execute(query.order_by(_PARTS.c.seq)).all():
        part = json.loads(raw)
        if part.get("kind") == "text":
            texts.append(str(part.get("text", "")))
    return "".join(texts)


class WebhookRepository:
    """Webhooks, their deliveries (the outbox) and push subscriptions."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    # -- webhooks ------------------------------------------------------------------------------

    def create(
        self,
        *,
        url: str,
        secret: str,
        events: list[str],
        include_content: bool,
        created_by: str | None,
    ) -> Webhook:
        """Insert a webhook; it is enabled."""
        now = utcnow()
        hook_id = str(uuid.uuid4())
        self._conn.execute(
            insert(_HOOKS).values(
                id=hook_id,
                url=url,
                secret=secret,
                events=",".join(events),
                include_content=include_content,
                enabled=True,
                failures=0,
                created_by=created_by,
                created_at=now,
                updated_at=now,
            )
        )
        found = self.get(hook_id)
        assert found is not None
        return found

    def get(self, hook_id: str) -> Webhook | None:
        """A webhook by id, None when unknown."""
        row = self._conn.execute(select(_HOOKS).where(_HOOKS.c.id == hook_id)).first()
        return _webhook(row) if row is not None else None

    def all(self) -> list[Webhook]:
        """Every webhook, oldest first."""
        rows = self._conn.execute(select(_HOOKS).order_by(_HOOKS.c.created_at, _HOOKS.c.id))
        return [_webhook(row) for row in rows.all()]

    def update(self, hook_id: str, changes: dict[str, Any]) -> Webhook | None:
        """Apply `changes` (url, secret, events, include_content, enabled). Re-enabling
        clears the failure count and makes the pending deliveries due at once."""
        values = dict(changes)
        if "events" in values:
            values["events"] = ",".join(values["events"])
        if values.get("enabled") is True:
            values["failures"] = 0
            self._conn.execute(  # a claimed one is being sent: its sender records it
                update(_DELIVERIES)
                .where(
                    _DELIVERIES.c.webhook_id == hook_id,
                    _DELIVERIES.c.state == "pending",
                    _DELIVERIES.c.claimed_by.is_(None),
                )
                .values(next_attempt_at=utcnow())
            )
        values["updated_at"] = utcnow()
        result = self._conn.execute(update(_HOOKS).where(_HOOKS.c.id == hook_id).values(**values))
        if not result.rowcount:
            return None
        return self.get(hook_id)

    def delete(self, hook_id: str) -> bool:
        """Delete a webhook and its deliveries; False when unknown."""
        self._conn.execute(delete(_DELIVERIES).where(_DELIVERIES.c.webhook_id == hook_id))
        result = self._conn.execute(delete(_HOOKS).where(_HOOKS.c.id == hook_id))
        return bool(result.rowcount)

    # -- deliveries ----------------------------------------------------------------------------

    def deliveries(self, hook_id: str, limit: int) -> list[Delivery]:
        """A webhook's latest deliveries, newest event first."""
        rows = self._conn.execute(
            select(_DELIVERIES)
            .where(_DELIVERIES.c.webhook_id == hook_id)
            .order_by(_DELIVERIES.c.event_seq.desc(), _DELIVERIES.c.id)
            .limit(limit)
        ).all()
        return [
            Delivery(
                id=r.id,
                event=r.event,
                attempts=int(r.attempts),
                last_status=r.last_status,
                state=r.state,
                delivered_at=aware(r.delivered_at) if r.delivered_at else None,
                next_attempt_at=aware(r.next_attempt_at),
            )
            for r in rows
        ]

    def now(self) -> datetime:
        """The senders' clock (`_now`), read."""
        now = _now(self._conn)
        if isinstance(now, datetime):
            return now
        return aware(self._conn.execute(select(now)).scalar_one())

    def pending(self, limit: int) -> list[DueDelivery]:
        """Pending deliveries of enabled webhooks, soonest first (due or not; a claimed one
        is due when its claim runs out)."""
        rows = self._conn.execute(
            select(
                _DELIVERIES.c.id,
                _DELIVERIES.c.webhook_id,
                _HOOKS.c.url,
                _HOOKS.c.secret,
                _DELIVERIES.c.body,
                _DELIVERIES.c.attempts,
                _DELIVERIES.c.next_attempt_at,
            )
            .select_from(
                _DELIVERIES.join(
                    _HOOKS,
                    and_(_HOOKS.c.id == _DELIVERIES.c.webhook_id, _HOOKS.c.enabled.is_(True)),
                )
            )
            .where(_DELIVERIES.c.state == "pending")
            .order_by(_DELIVERIES.c.next_attempt_at, _DELIVERIES.c.event_seq)
            .limit(limit)
        ).all()
        return [
            DueDelivery(
                id=r.id,
                webhook_id=r.webhook_id,
                url=r.url,
                secret=r.secret,
                body=r.body,
                attempts=int(r.attempts),
                next_attempt_at=aware(r.next_attempt_at),
            )
            for r in rows
        ]

    def claim(self, delivery_ids: list[str], sender: str, lease_seconds: float) -> set[str]:
        """Claim those of `delivery_ids` that are still pending and due for `sender`, for
        `lease_seconds`; returns the ids claimed (each by exactly one sender)."""
        if not delivery_ids:
            return set()
        now = _now(self._conn)
        claimed = self._conn.execute(
            update(_DELIVERIES)
            .where(
                _DELIVERIES.c.id.in_(delivery_ids),
                _DELIVERIES.c.state == "pending",
                _DELIVERIES.c.next_attempt_at <= now,
            )
            .values(claimed_by=sender, next_attempt_at=now + timedelta(seconds=lease_seconds))
            .returning(_DELIVERIES.c.id)
        )
        return {str(row[0]) for row in claimed.all()}

    def release_claims(self, instance: str | None) -> int:
        """Make due at once the deliveries claimed by senders of `instance` (a member id; None:
        every sender, for a plain server that owns the database alone): their processes
        are gone, as a sender starting under that instance shows. Returns how many."""
        query = update(_DELIVERIES).where(
            _DELIVERIES.c.state == "pending", _DELIVERIES.c.claimed_by.is_not(None)
        )
        if instance is not None:
            query = query.where(_DELIVERIES.c.claimed_by.startswith(f"{instance} "))
        now = _now(self._conn)
        done = self._conn.execute(query.values(claimed_by=None, next_attempt_at=now))
        return int(done.rowcount or 0)

    def delivered(self, delivery_id: str, webhook_id: str, status: int) -> None:
        """Record a 2xx answer (whoever holds the claim now: it was delivered); the webhook's
        failures reset."""
        self._conn.execute(
            update(_DELIVERIES)
            .where(_DELIVERIES.c.id == delivery_id)
            .values(
                state="delivered",
                attempts=_DELIVERIES.c.attempts + 1,
                last_status=status,
                delivered_at=utcnow(),
                claimed_by=None,
            )
        )
        self._conn.execute(update(_HOOKS).where(_HOOKS.c.id == webhook_id).values(failures=0))

    def failed(
        self,
        delivery_id: str,
        webhook_id: str,
        status: int | None,
        retry_in: float,
        sender: str | None = None,
    ) -> Disabled | None:
        """Record a failed attempt of `sender` (retried `retry_in` seconds from now); nothing
        when its claim was lost (the claim's holder records its own attempt). Disables the
        webhook at DISABLE_AFTER consecutive failures (returned, for the caller to announce
        in this transaction)."""
        now = _now(self._conn)
        recorded = self._conn.execute(
            update(_DELIVERIES)
            .where(
                _DELIVERIES.c.id == delivery_id,
                _DELIVERIES.c.state == "pending",
                _DELIVERIES.c.claimed_by.is_(None)
                if sender is None
                else _DELIVERIES.c.claimed_by == sender,
            )
            .values(
                attempts=_DELIVERIES.c.attempts + 1,
                last_status=status,
                next_attempt_at=now + timedelta(seconds=retry_in),
                claimed_by=None,
            )
        )
        if not recorded.rowcount:
            return None
        self._conn.execute(
            update(_HOOKS)
            .where(_HOOKS.c.id == webhook_id, _HOOKS.c.enabled.is_(True))
            .values(failures=_HOOKS.c.failures + 1)
        )
        hook = self.get(webhook_id)
        if hook is None or not hook.enabled or hook.failures < DISABLE_AFTER:
            return None
        self._conn.execute(
            update(_HOOKS)
            .where(_HOOKS.c.id == webhook_id)
            .values(enabled=False, updated_at=utcnow())
        )
        return Disabled(webhook_id, hook.url, hook.failures, status)

    def prune_delivered(self, older_than: datetime) -> int:
        """Forget delivered deliveries created before `older_than` (the event log's
        retention); pending ones stay until delivered or their webhook is deleted."""
        result = self._conn.execute(
            delete(_DELIVERIES).where(
                _DELIVERIES.c.state == "delivered", _DELIVERIES.c.created_at < older_than
            )
        )
        return int(result.rowcount or 0)

    # -- push subscriptions --------------------------------------------------------------------

    def subscribe_push(self, sub: PushSubscription) -> None:
        """Insert or replace the subscription of this endpoint; a device keeps its newest
        `PUSH_PER_DEVICE` (a browser renews its endpoint now and then; a device registering
        hundreds would only slow every push down)."""
        self._conn.execute(delete(_PUSH).where(_PUSH.c.id == sub.id))
        self._conn.execute(
            insert(_PUSH).values(
                id=sub.id,
                device_id=sub.device_id,
                endpoint=sub.endpoint,
                p256dh=sub.p256dh,
                auth=sub.auth,
                created_at=utcnow(),
            )
        )
        kept = (
            select(_PUSH.c.id)
            .where(_PUSH.c.device_id == sub.device_id)
            .order_by(_PUSH.c.created_at.desc(), _PUSH.c.id)
            .limit(PUSH_PER_DEVICE)
        )
        ids = [row.id for row in self._conn.execute(kept)]
        self._conn.execute(
            delete(_PUSH).where(_PUSH.c.device_id == sub.device_id, _PUSH.c.id.not_in(ids))
        )

    def forget_device_pushes(self, device_id: str) -> None:
        """Drop a revoked device's subscriptions: it is told nothing more."""
        self._conn.execute(delete(_PUSH).where(_PUSH.c.device_id == device_id))

    def unsubscribe_push(self, sub_id: str, device_id: str | None = None) -> bool:
        """Delete a push subscription (of `device_id` only, when given); False when none."""
        query = delete(_PUSH).where(_PUSH.c.id == sub_id)
        if device_id is not None:
            query = query.where(_PUSH.c.device_id == device_id)
        return bool(self._conn.execute(query).rowcount)

    def push_subscriptions(self) -> list[PushSubscription]:
        """Every push subscription of a device that exists, oldest first (a device revoked
        before its subscriptions went with it left some behind)."""
        devices = DeviceRow.__table__  # type: ignore[attr-defined]
        query = select(_PUSH).where(_PUSH.c.device_id.in_(select(devices.c.id)))
        rows = self._conn.execute(query.order_by(_PUSH.c.created_at)).all()
        return [PushSubscription(r.id, r.device_id, r.endpoint, r.p256dh, r.auth) for r in rows]
