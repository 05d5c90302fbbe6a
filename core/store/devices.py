"""Device repository: paired devices, one-time pairing tokens and single-use stream tickets.

Callers hand in sha256 digests, never secrets; lookups compare digests in constant time.
Redeeming a token or ticket is a conditional write, atomic under the single writer.
"""

from __future__ import annotations

import hmac
from datetime import datetime

from sqlalchemy import Connection, delete, insert, or_, select, update

from c2.core.devices import Device as Device  # re-exported: defined in core, mapped here
from c2.core.scopes import Scope, parse_scopes, scopes_text
from c2.core.store.auth_tables import DeviceRow, PairingTokenRow, StreamTicketRow
from c2.core.store.tables import aware

_DEVICES = DeviceRow.__table__  # type: ignore[attr-defined]
_TOKENS = PairingTokenRow.__table__  # type: ignore[attr-defined]
_TICKETS = StreamTicketRow.__table__  # type: ignore[attr-defined]


def _device(row: object) -> Device:
    last_seen = row.last_seen  # type: ignore[attr-defined]
    return Device(
        id=row.id,  # type: ignore[attr-defined]
        name=row.name,  # type: ignore[attr-defined]
        created_at=aware(row.created_at),  # type: ignore[attr-defined]
        last_seen=aware(last_seen) if last_seen is not None else None,
        scopes=parse_scopes(row.scopes),  # type: ignore[attr-defined]
    )


class DeviceRepository:
    """Devices, pairing tokens and stream tickets."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    # -- devices -------------------------------------------------------------------------------

    def create(
        self,
        device_id: str,
        name: str,
        bearer_hash: str,
        now: datetime,
        scopes: frozenset[Scope],
    ) -> Device:
        """Insert a device with its bearer's hash."""
        self._conn.execute(
            insert(_DEVICES).values(
                id=device_id,
                name=name,
                bearer_hash=bearer_hash,
                created_at=now,
                last_seen=None,
                scopes=scopes_text(scopes),
            )
        )
        return Device(id=device_id, name=name, created_at=now, last_seen=None, scopes=scopes)

    def by_bearer(self, bearer_hash: str) -> Device | None:
        """The device whose bearer digest is `bearer_hash`."""
        row = self._conn.execute(
            select(_DEVICES).where(_DEVICES.c.bearer_hash == bearer_hash)
        ).first()
        if row is None or not hmac.compare_digest(row.bearer_hash, bearer_hash):
            return None
        return _device(row)

    def get(self, device_id: str) -> Device | None:
        """A device by id, None when unknown."""
        row = self._conn.execute(select(_DEVICES).where(_DEVICES.c.id == device_id)).first()
        return _device(row) if row is not None else None

    def all(self) -> list[Device]:
        """Every device, oldest first."""
        rows = self._conn.execute(
            select(_DEVICES).order_by(_DEVICES.c.created_at, _DEVICES.c.id)
        ).all()
        return [_device(r) for r in rows]

    def delete(self, device_id: str) -> bool:
        """Remove the device and its unredeemed tickets; False when it did not exist."""
        self._conn.execute(delete(_TICKETS).where(_TICKETS.c.device_id == device_id))
        result = self._conn.execute(delete(_DEVICES).where(_DEVICES.c.id == device_id))
        return bool(result.rowcount)

    def touch(self, seen: dict[str, datetime]) -> None:
        """Record last-seen times; never moves a device's last_seen backwards."""
        for device_id, moment in seen.items():
            self._conn.execute(
                update(_DEVICES)
                .where(
                    _DEVICES.c.id == device_id,
                    or_(_DEVICES.c.last_seen.is_(None), _DEVICES.c.last_seen < moment),
                )
                .values(last_seen=moment)
            )

    # -- pairing tokens ------------------------------------------------------------------------

    def add_pairing_token(
        self, token_hash: str, now: datetime, expires_at: datetime, scopes: frozenset[Scope]
    ) -> None:
        """Insert a pairing token's hash with its lifetime and the scopes it grants."""
        self._conn.execute(
            insert(_TOKENS).values(
                token_hash=token_hash,
                created_at=now,
                expires_at=expires_at,
                used_at=None,
                scopes=scopes_text(scopes),
            )
        )

    def redeem_pairing_token(self, token_hash: str, now: datetime) -> frozenset[Scope] | None:
        """Mark the token used if it is unused and unexpired; its scopes when this call
        redeemed it, else None."""
        row = self._conn.execute(
            select(_TOKENS.c.token_hash, _TOKENS.c.scopes).where(_TOKENS.c.token_hash == token_hash)
        ).first()
        if row is None or not hmac.compare_digest(row.token_hash, token_hash):
            return None
        result = self._conn.execute(
            update(_TOKENS)
            .where(
                _TOKENS.c.token_hash == token_hash,
                _TOKENS.c.used_at.is_(None),
                _TOKENS.c.expires_at > now,
            )
            .values(used_at=now)
        )
        return parse_scopes(row.scopes) if result.rowcount else None

    # -- stream tickets ------------------------------------------------------------------------

    def add_ticket(self, ticket_hash: str, device_id: str, expires_at: datetime) -> None:
        """Insert a stream ticket's hash for `device_id`."""
        self._conn.execute(
            insert(_TICKETS).values(
                ticket_hash=ticket_hash, device_id=device_id, expires_at=expires_at
            )
        )

    def redeem_ticket(
        self, ticket_hash: str, now: datetime, *, spend: bool = True
    ) -> Device | None:
        """Consume the ticket (unless not `spend`: a HEAD of the stream, which opens none);
        its device when it was valid, unexpired and the device exists."""
        row = self._conn.execute(
            select(_TICKETS).where(_TICKETS.c.ticket_hash == ticket_hash)
        ).first()
        if row is None or not hmac.compare_digest(row.ticket_hash, ticket_hash):
            return None
        if spend:
            self._conn.execute(delete(_TICKETS).where(_TICKETS.c.ticket_hash == ticket_hash))
        if row.expires_at is None or aware(row.expires_at) <= now:
            return None
        return self.get(row.device_id)

    # -- housekeeping --------------------------------------------------------------------------

    def prune(self, now: datetime) -> int:
        """Drop expired or used pairing tokens and expired tickets; returns rows removed."""
        tokens = self._conn.execute(
            delete(_TOKENS).where(or_(_TOKENS.c.expires_at <= now, _TOKENS.c.used_at.is_not(None)))
        )
        tickets = self._conn.execute(delete(_TICKETS).where(_TICKETS.c.expires_at <= now))
        return int(tokens.rowcount or 0) + int(tickets.rowcount or 0)
