"""The one `Services` object a running app owns: store, bus, engine, auth, op dispatcher.

Started and stopped by the app lifespan, never at import time. Start-up claims the home and the
database (one owner each, core/store/ownership.py) before anything is migrated or recovered.
Shutdown order (ARCHITECTURE.md): stop accepting ops (/readyz 503) → engine.shutdown() (ends
turns, closes agents) → end streams → close the store → release the home.
Periodic housekeeping runs under `supervise()`, owned by the lifespan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from api.dispatch import OpDispatcher
from api.settings import Settings, prepare_home
from core.auth import DeviceAuth
from core.bus import EventBus
from core.engine import Engine
from core.notify.push import PushService
from core.notify.webhooks import WebhookDispatcher, WebhookService
from core.store.database import Store
from core.store.events import CommittedEvent
from core.store.faults import describe
from core.store.ownership import HomeLock, OwnershipError, claim_home

log = logging.getLogger(__name__)
EngineFactory = Callable[[Store, EventBus, Settings], Engine]


def default_engine(store: Store, _bus: EventBus, settings: Settings) -> Engine:
    """The real engine; it reaches the bus through the store's publish hook."""
    return Engine(store, settings.home, max_live_agents=settings.max_live_agents)


READY_PROBE_SECONDS = 2.0


class StartupError(Exception):
    """The server cannot start; the message is the one line a user sees."""


def open_home(settings: Settings) -> HomeLock:
    """Create or tighten the home and claim it (one server per home)."""
    try:
        prepare_home(settings.home, create_database=settings.database_in_home)
        return claim_home(settings.home)
    except OwnershipError as exc:
        raise StartupError(str(exc)) from None
    except OSError as exc:
        raise StartupError(f"cannot use home {settings.home}: {exc.strerror or exc}") from None


def preflight(settings: Settings) -> HomeLock:
    """Everything `c2 serve` must be able to do before it listens, checked with one-line
    errors: the home is writable and not served by another c2, the database opens, is not
    owned by another c2 and migrates. Returns the home claim, held for the process's life
    (the server's own start re-enters it)."""
    home = open_home(settings)
    store = Store(settings.database_url, exclusive=True)
    try:
        store.start()
        store.migrate()
    except OwnershipError as exc:
        raise StartupError(str(exc)) from None
    except (SQLAlchemyError, OSError) as exc:
        raise StartupError(f"cannot open the database: {describe(exc)}") from None
    finally:
        store.close()
    return home


class Services:
    def __init__(self, settings: Settings, engine_factory: EngineFactory = default_engine) -> None:
        self.settings = settings
        self.bus = EventBus()
        self.store = Store(
            settings.database_url, exclusive=True, retry_seconds=settings.store_retry_seconds
        )
        self.engine = engine_factory(self.store, self.bus, settings)
        self.auth = DeviceAuth(
            self.store,
            self.bus,
            pairing_ttl=timedelta(seconds=settings.pairing_ttl_seconds),
            ticket_ttl=timedelta(seconds=settings.ticket_ttl_seconds),
            pair_attempts_per_minute=settings.pair_attempts_per_minute,
        )
        self.dispatcher = OpDispatcher(self.engine, self.store)
        self.webhooks = WebhookService(self.store)
        self.webhook_dispatcher = WebhookDispatcher(
            self.store, backoff_scale=settings.webhook_backoff_scale
        )
        self.push = PushService(self.store, settings.home, settings.vapid_subject)
        self.ready = False
        self.draining = False
        self._drain_lock = asyncio.Lock()
        self._drained = False
        self._store_started = False
        self._home: HomeLock | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Claim the home, open the writer (claiming the database), migrate, then start the
        engine (recovery first). Another owner fails the start before anything is written."""
        self._home = await asyncio.to_thread(open_home, self.settings)
        await asyncio.to_thread(self.store.start, self._published)
        self._store_started = True
        await asyncio.to_thread(self.store.migrate)
        await asyncio.to_thread(self.push.start)  # the VAPID key pair, created on first start
        await self.engine.start()
        self.ready = True

    def _published(self, events: list[CommittedEvent]) -> None:
        """The store's publish hook (on the loop, after each commit): live streams, then the
        notifiers, which only look at the batch and wake up."""
        self.bus.publish(events)
        self.webhook_dispatcher.notice(events)
        self.push.notice(events)

    async def drain(self) -> None:
        """Stop accepting ops, end turns and agents, then end every stream. Idempotent."""
        async with self._drain_lock:
            if self._drained:
                return
            self._drained = True
            self.draining = True
            grace = self.settings.shutdown_grace_seconds
            await self.dispatcher.drain(timeout=grace)
            try:
                await asyncio.wait_for(self.engine.shutdown(), timeout=max(grace, 1.0) * 2)
            except Exception:
                log.exception("engine shutdown failed")
            self.bus.close_all("server shutting down")

    async def close(self) -> None:
        """Drain, persist batched state, close the store."""
        await self.drain()
        if self._store_started:
            try:
                await self.auth.flush_last_seen()
            except Exception:
                log.exception("could not flush device last-seen times")
            await asyncio.to_thread(self.store.close)
            self._store_started = False
        if self._home is not None:
            self._home.release()
            self._home = None

    async def is_ready(self) -> bool:
        """Migrations ran, the store answers and can commit, and the server is not shutting
        down."""
        if not self.ready or self.draining or self.store.unavailable() is not None:
            return False
        try:
            # The writer too: an idle writer whose connection (and owner lock) was lost would
            # only find out at its next write.
            await self.store.ping_writer(READY_PROBE_SECONDS)
            await asyncio.wait_for(
                self.store.read(lambda r: r.conn.execute(text("SELECT 1")).scalar()),
                READY_PROBE_SECONDS,
            )
        except Exception:
            return False
        return True

    # -- housekeeping --------------------------------------------------------------------------

    async def supervise(self) -> None:
        """Run the periodic jobs until cancelled (the lifespan owns this task)."""
        settings = self.settings
        async with asyncio.TaskGroup() as group:
            group.create_task(
                _every(settings.sweep_interval_seconds, self.sweep, delay=0.0), name="c2-sweep"
            )
            group.create_task(
                _every(
                    settings.last_seen_interval_seconds,
                    self.auth.flush_last_seen,
                    delay=settings.last_seen_interval_seconds,
                ),
                name="c2-last-seen",
            )
            group.create_task(self.webhook_dispatcher.run(), name="c2-webhooks")
            group.create_task(self.push.run(), name="c2-push")

    async def sweep(self) -> None:
        """Prune events and delivered webhook deliveries past retention, idempotency records
        past 24 h, dead tokens/tickets."""
        retention = timedelta(days=self.settings.event_retention_days)
        events = await self.store.write(lambda uow: uow.events.prune(retention))
        records = await self.store.write(lambda uow: uow.idempotency.prune())
        secrets = await self.auth.prune()
        deliveries = await self.webhooks.prune(retention)
        if events or records or secrets or deliveries:
            log.info(
                "pruned %d events, %d idempotency records, %d auth rows, %d webhook deliveries",
                events,
                records,
                secrets,
                deliveries,
            )


async def _every(interval: float, job: Callable[[], Awaitable[object]], *, delay: float) -> None:
    await asyncio.sleep(delay)
    while True:
        try:
            await job()
        except Exception:
            log.exception("periodic job %s failed", getattr(job, "__name__", job))
        await asyncio.sleep(interval)
