"""Device auth without HTTP (docs/api.md §2): pairing tokens, bearers, stream tickets, revocation.

Secrets carry 256 bits of entropy and are stored only as sha256 digests. A verified bearer is
cached for a few seconds so a request costs no database read; last-seen times are kept in
memory and flushed in batches (at most one write per device per flush interval).

Over 300 lines: pairing, bearers, tickets and revocation share the one bearer cache and the
pairing-attempt limit, whose invalidation rules are only checkable read together.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from c2.core.bus import EventBus
from c2.core.devices import Device
from c2.core.errors import (
    DeviceNotFoundError,
    InvalidPairingTokenError,
    InvalidTicketError,
    RateLimitedError,
    UnauthorizedError,
)
from c2.core.scopes import ALL_SCOPES, Scope
from c2.core.session import utcnow
from c2.core.store.cluster import notify_members
from c2.core.store.database import Store, UnitOfWork
from c2.core.store.devices import DeviceRepository
from c2.core.store.pairing import PairingFailures
from c2.core.store.webhooks import WebhookRepository

DEFAULT_DEVICE_NAME = "Unnamed device"
# A positive bearer lookup is reused this long; revocation in this process clears it at once.
BEARER_CACHE_SECONDS = 10.0
MAX_KNOWN_BEARERS = 4096  # bearers remembered as verified (they pass the failure limiter)
PAIR_WINDOW_SECONDS = 60.0  # failed pairing attempts count this long
REVOKED = "revoke"  # the cluster control message naming a revoked device (core/cluster/)


def new_secret() -> str:
    """A fresh URL-safe secret with 256 bits of entropy."""
    return secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    """The stored form of a secret: its sha256 hex digest."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class PairedDevice:
    """A device just created: its id and its bearer (shown once)."""

    device_id: str
    bearer: str


@dataclass(frozen=True, slots=True)
class StreamTicket:
    """A single-use stream ticket and how many seconds it lives."""

    ticket: str
    expires_in: int


def create_device(
    uow: UnitOfWork, name: str | None, scopes: frozenset[Scope] = ALL_SCOPES
) -> PairedDevice:
    """Mint a device with `scopes` and its bearer inside `uow` (the CLI's `c2 pair` and
    `POST /v1/pair`)."""
    bearer = new_secret()
    device_id = str(uuid.uuid4())
    DeviceRepository(uow.conn).create(
        device_id, (name or "").strip() or DEFAULT_DEVICE_NAME, digest(bearer), utcnow(), scopes
    )
    return PairedDevice(device_id=device_id, bearer=bearer)


def add_pairing_token(
    uow: UnitOfWork, ttl: timedelta, scopes: frozenset[Scope] = ALL_SCOPES
) -> str:
    """Mint a one-time pairing token inside `uow` (server start-up and `c2 pair-url`) for a
    device that will hold `scopes`."""
    token = new_secret()
    now = utcnow()
    DeviceRepository(uow.conn).add_pairing_token(digest(token), now, now + ttl, scopes)
    return token


class AttemptLimiter:
    """Sliding-window failure counter per client key; memory bounded by `max_keys`.

    Only failures count (`fail`); `check` asks whether a key is over its budget without
    counting. A full table evicts the key that failed least recently, never everyone's."""

    def __init__(
        self,
        attempts: int,
        window: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 4096,
    ) -> None:
        self._attempts, self._window, self._clock, self._max_keys = (
            attempts,
            window,
            clock,
            max_keys,
        )
        # Ordered by last failure: the first key is the one to evict.
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def check(self, key: str) -> int | None:
        """None when `key` may try again now, else the seconds until it may."""
        window = self._seen.get(key)
        if window is None:
            return None
        now = self._clock()
        while window and window[0] <= now - self._window:
            window.popleft()
        if not window:
            del self._seen[key]
            return None
        if len(window) >= self._attempts:
            return max(1, math.ceil(window[0] + self._window - now))
        return None

    def fail(self, key: str) -> None:
        """Count one failed attempt of `key`."""
        window = self._seen.get(key)
        if window is None:
            while len(self._seen) >= self._max_keys:
                self._seen.popitem(last=False)
            window = self._seen[key] = deque()
        else:
            self._seen.move_to_end(key)
        window.append(self._clock())
        while len(window) > self._attempts:
            window.popleft()  # only the newest `attempts` failures can matter

    def hit(self, key: str) -> int | None:
        """Count one attempt unless over budget: None when allowed, else the retry seconds."""
        retry_after = self.check(key)
        if retry_after is None:
            self.fail(key)
        return retry_after


class DeviceAuth:
    """Pairs devices, verifies bearers and tickets, revokes devices (closing their streams)."""

    def __init__(
        self,
        store: Store,
        bus: EventBus,
        *,
        pairing_ttl: timedelta = timedelta(minutes=15),
        ticket_ttl: timedelta = timedelta(minutes=5),
        pair_attempts_per_minute: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self._bus = store, bus
        self._pairing_ttl, self._ticket_ttl = pairing_ttl, ticket_ttl
        self._clock = clock
        self._pair_attempts = pair_attempts_per_minute
        self._limiter = AttemptLimiter(pair_attempts_per_minute, PAIR_WINDOW_SECONDS, clock=clock)
        self._cache: dict[str, tuple[Device, float]] = {}
        # Store reads of bearers not cached, by digest: requests that miss the cache at once
        # (every client reconnecting after a restart) share one read per bearer.
        self._lookups: dict[str, asyncio.Task[Device | None]] = {}
        self.bearer_reads = 0  # store reads of bearers (bench/events.py)
        # Digests of bearers verified before -> their device; least recently used first.
        self._known: OrderedDict[str, str] = OrderedDict()
        self._seen: dict[str, datetime] = {}

    # -- pairing -------------------------------------------------------------------------------

    async def mint_pairing_token(self, scopes: frozenset[Scope] = ALL_SCOPES) -> str:
        """A one-time pairing token, valid for the pairing TTL; the device it pairs gets
        `scopes`."""
        return await self._store.write(
            lambda uow: add_pairing_token(uow, self._pairing_ttl, scopes)
        )

    async def pair(self, token: str, device_name: str | None, client: str) -> PairedDevice:
        """Redeem a pairing token for a new device bearer; failed attempts are rate limited
        per client, cluster-wide for a cluster member (core/store/pairing.py)."""
        # This process's own count refuses a flood without a database round trip; a member's
        # failures are also counted in the database (never fewer than here).
        retry_after = self._limiter.check(client)
        if retry_after is not None:
            raise RateLimitedError("too many pairing attempts", retry_after=retry_after)
        token_hash = digest(token)
        shared = self._store.cluster
        attempts = self._pair_attempts

        def redeem(uow: UnitOfWork) -> PairedDevice | int | None:
            failures = (
                PairingFailures(uow.conn, client, attempts, PAIR_WINDOW_SECONDS) if shared else None
            )
            if failures is not None and (wait := failures.retry_after()) is not None:
                return wait
            scopes = DeviceRepository(uow.conn).redeem_pairing_token(token_hash, utcnow())
            if scopes is None:
                if failures is not None:
                    failures.fail()
                return None
            return create_device(uow, device_name, scopes)

        paired = await self._store.write(redeem)
        if isinstance(paired, int):
            raise RateLimitedError("too many pairing attempts", retry_after=paired)
        if paired is None:
            self._limiter.fail(client)
            raise InvalidPairingTokenError("the pairing token is invalid, expired or used")
        return paired

    # -- bearers -------------------------------------------------------------------------------

    def recognizes(self, bearer: str) -> bool:
        """Whether `bearer` was verified before (by this process, since its last revocation).

        A flood of bad credentials is refused without a database read; a bearer that already
        proved itself skips that refusal (it is still verified), so clients in use keep
        working while the flood lasts. Guessing a recognized bearer means guessing a bearer."""
        return digest(bearer) in self._known

    async def is_paired(self, device_id: str) -> bool:
        """Whether the device still exists in the store (not revoked), read now, not cached."""
        found = await self._store.read(lambda r: DeviceRepository(r.conn).get(device_id))
        return found is not None

    async def authenticate(self, bearer: str) -> Device:
        """The device owning `bearer`; raises UnauthorizedError."""
        bearer_hash = digest(bearer)
        now = self._clock()
        cached = self._cache.get(bearer_hash)
        if cached is not None and cached[1] > now:
            device = cached[0]
        else:
            lookup = self._lookups.get(bearer_hash)
            if lookup is None:
                self.bearer_reads += 1
                lookup = self._lookups[bearer_hash] = asyncio.create_task(
                    self._store.read(lambda r: DeviceRepository(r.conn).by_bearer(bearer_hash))
                )
                lookup.add_done_callback(partial(self._looked_up, bearer_hash))
            # Shielded: one waiter going away (its client disconnected) leaves the read to
            # the others.
            found = await asyncio.shield(lookup)
            if found is None:
                self._cache.pop(bearer_hash, None)
                raise UnauthorizedError("missing, invalid or revoked bearer")
            device = found
            self._cache[bearer_hash] = (device, now + BEARER_CACHE_SECONDS)
            self._known[bearer_hash] = device.id
            self._known.move_to_end(bearer_hash)
            while len(self._known) > MAX_KNOWN_BEARERS:
                self._known.popitem(last=False)
        self._seen[device.id] = utcnow()
        return device

    def _looked_up(self, bearer_hash: str, lookup: asyncio.Task[Device | None]) -> None:
        self._lookups.pop(bearer_hash, None)
        if not lookup.cancelled():
            lookup.exception()  # retrieved here: every waiter may have gone away

    # -- stream tickets ------------------------------------------------------------------------

    async def mint_ticket(self, device: Device) -> StreamTicket:
        """A single-use ticket that opens one event stream as `device`."""
        ticket = new_secret()
        expires_at = utcnow() + self._ticket_ttl
        await self._store.write(
            lambda uow: DeviceRepository(uow.conn).add_ticket(digest(ticket), device.id, expires_at)
        )
        return StreamTicket(ticket=ticket, expires_in=int(self._ticket_ttl.total_seconds()))

    async def redeem_ticket(self, ticket: str, *, spend: bool = True) -> Device:
        """Consume `ticket` (unless not `spend`); its device, or InvalidTicketError."""
        ticket_hash = digest(ticket)
        device = await self._store.write(
            lambda uow: DeviceRepository(uow.conn).redeem_ticket(ticket_hash, utcnow(), spend=spend)
        )
        if device is None:
            raise InvalidTicketError("the stream ticket is invalid, expired or used")
        self._seen[device.id] = utcnow()
        return device

    # -- devices -------------------------------------------------------------------------------

    async def list_devices(self) -> list[Device]:
        """Paired devices, oldest first, with last-seen times not yet flushed merged in."""
        devices = await self._store.read(lambda r: DeviceRepository(r.conn).all())
        merged = []
        for device in devices:
            pending = self._seen.get(device.id)
            if pending is not None and (device.last_seen is None or device.last_seen < pending):
                device = Device(device.id, device.name, device.created_at, pending, device.scopes)
            merged.append(device)
        return merged

    async def revoke(self, device_id: str) -> None:
        """Delete the device: its bearer and unredeemed tickets stop working, its streams end."""
        clustered = self._store.cluster

        def delete(uow: UnitOfWork) -> bool:
            existed = DeviceRepository(uow.conn).delete(device_id)
            WebhookRepository(uow.conn).forget_device_pushes(device_id)
            if existed and clustered:  # every member forgets it too, once this commits
                notify_members(uow.conn, f"{REVOKED} {device_id}")
            return existed

        existed = await self._store.write(delete)
        self.forget_device(device_id)
        if not existed:
            raise DeviceNotFoundError(f"no device {device_id}")

    def forget_device(self, device_id: str) -> None:
        """Drop what this process remembers of a revoked device and end its streams (here
        after a revocation, and on every cluster member when one revokes it)."""
        for key in [k for k, (dev, _) in self._cache.items() if dev.id == device_id]:
            del self._cache[key]
        for key in [k for k, owner in self._known.items() if owner == device_id]:
            del self._known[key]
        # A read under way may have begun before the revocation: later requests read anew.
        self._lookups.clear()
        self._seen.pop(device_id, None)
        self._bus.close_device(device_id)

    # -- housekeeping --------------------------------------------------------------------------

    async def flush_last_seen(self) -> int:
        """Persist batched last-seen times; returns how many devices were written."""
        seen, self._seen = self._seen, {}
        if seen:
            await self._store.write(lambda uow: DeviceRepository(uow.conn).touch(seen))
        return len(seen)

    async def prune(self) -> int:
        """Drop expired or used pairing tokens and expired tickets."""
        return await self._store.write(lambda uow: DeviceRepository(uow.conn).prune(utcnow()))
