"""The one `Services` object a running app owns: the core runtime (store, bus, engine, auth,
event feed; core/runtime.py) plus the op dispatcher and the server's readiness.

Started and stopped by the app lifespan, never at import time.
Shutdown order (docs/architecture.md): stop accepting ops (/readyz 503) → engine.shutdown() (ends
turns, closes agents) → end streams → close the store → release the home.
Periodic housekeeping runs under `supervise()`, owned by the lifespan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from c2.api.dispatch import OpDispatcher
from c2.api.relay import Owner, Relay
from c2.api.settings import Settings, outward_host
from c2.core.bus import EventBus
from c2.core.cluster.membership import ClusterConfig, home_instance_id
from c2.core.cluster.takeover import adopt as adopt_session
from c2.core.cluster.takeover import take_over_expired
from c2.core.engine import Engine
from c2.core.errors import OwnerUnavailableError
from c2.core.home import HomeLock, StartupError
from c2.core.home import preflight as check_home
from c2.core.runtime import Runtime
from c2.core.session import SessionRecord

log = logging.getLogger(__name__)
# (store, bus, settings) → the engine; tests swap in engines that fail on purpose.
EngineFactory = Callable[[Any, EventBus, Settings], Engine]
READY_PROBE_SECONDS = 2.0
__all__ = ["EngineFactory", "Services", "StartupError", "default_engine", "preflight"]


def default_engine(store: Any, _bus: EventBus, settings: Settings) -> Engine:
    """The real engine; it reaches the bus through the store's publish hook."""
    return Engine(store, settings.home, max_live_agents=settings.max_live_agents)


def preflight(settings: Settings) -> HomeLock:
    """The start-up checks of `c2 serve` (core/home.py); returns the home claim."""
    return check_home(
        settings.home,
        settings.database_url,
        cluster=settings.cluster,
        cluster_secret=settings.cluster_secret or None,
        lease_seconds=settings.cluster_lease_seconds,
    )


def cluster_config(settings: Settings) -> ClusterConfig | None:
    """How this server joins its cluster (None: not clustered). The advertised URL defaults
    to the listen address; the id is the home's."""
    if not settings.cluster:
        return None
    # A wildcard bind advertises the address peers can reach, never loopback.
    url = settings.advertise_url or f"http://{outward_host(settings.host)}:{settings.port}"
    return ClusterConfig(
        instance_id=home_instance_id(settings.home),
        url=url,
        lease_seconds=settings.cluster_lease_seconds,
        secret=settings.cluster_secret or None,
    )


class Services:
    def __init__(self, settings: Settings, engine_factory: EngineFactory = default_engine) -> None:
        self.settings = settings
        self.core = Runtime(
            home=settings.home,
            database_url=settings.database_url,
            engine=lambda store, bus: engine_factory(store, bus, settings),
            store_retry_seconds=settings.store_retry_seconds,
            commit_interval=settings.commit_interval_ms / 1000,
            pairing_ttl=timedelta(seconds=settings.pairing_ttl_seconds),
            ticket_ttl=timedelta(seconds=settings.ticket_ttl_seconds),
            pair_attempts_per_minute=settings.pair_attempts_per_minute,
            webhook_backoff_scale=settings.webhook_backoff_scale,
            vapid_subject=settings.vapid_subject,
            push_private_endpoints=settings.push_private_endpoints,
            cluster=cluster_config(settings),
        )
        self.membership = self.core.membership
        self.store = self.core.store
        self.bus = self.core.bus
        self.engine = self.core.engine
        self.auth = self.core.auth
        self.feed = self.core.feed
        self.dispatcher = OpDispatcher(self.engine, self.core.idempotent)
        self.relay = Relay()  # requests relayed to their session's owner (api/forward.py)
        self.search = self.core.search
        self.webhooks = self.core.webhooks
        self.push = self.core.push
        self.ready = False
        self.draining = False
        self._drain_lock = asyncio.Lock()
        self._drained = False

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the core (home and database claimed, migrated, engine recovered)."""
        await self.core.start()
        self.ready = True

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
                async with asyncio.timeout(max(grace, 1.0) * 2):
                    await self.engine.shutdown()
            except Exception:
                log.exception("engine shutdown failed")
            self.bus.close_all()

    async def close(self) -> None:
        """Drain, close the relay's connections, persist batched state, close the store."""
        await self.drain()
        try:
            await self.relay.aclose()
        except Exception:
            log.exception("could not close the relay's connections")
        await self.core.close()

    async def owner_of(self, session_id: str, *, adopt: bool = True) -> Owner | None:
        """The live member other than this one that owns `session_id`, where a request acting
        on it must go; None to serve it here (ours, unowned or unknown). A session whose
        owner is gone is adopted here first (core/cluster/takeover.py), or refused with
        `owner_unavailable` when it has a worktree."""
        record = await self._owned_elsewhere(session_id)
        if record is None or record.owner is None:
            return None
        assert self.membership is not None
        for member in await self.membership.members():
            if member.id == record.owner:
                return Owner(member.id, member.url)
        if record.worktree_path is not None:
            gone = OwnerUnavailableError(
                f"the instance {record.owner} that owns this worktree session is gone; the "
                "worktree lives on its disk, so only that instance can run it again",
                session=session_id,
            )
            gone.details["owner"] = record.owner
            raise gone
        if await adopt_session(self.store, session_id, record.owner) or not adopt:
            return None
        return await self.owner_of(session_id, adopt=False)  # another member adopted it

    async def owner_elsewhere(self, session_id: str) -> str | None:
        """The id of the member other than this one that owns `session_id` now (live or
        not), judged by the database; None when this member may serve it (ours, unowned,
        unknown, or not clustered). A relayed request is served only while this is None."""
        record = await self._owned_elsewhere(session_id)
        return None if record is None else record.owner

    async def _owned_elsewhere(self, session_id: str) -> SessionRecord | None:
        membership = self.membership
        if membership is None:
            return None
        record = await self.engine.record_of(session_id)
        if record is None or record.owner is None or record.owner == membership.id:
            return None
        return record

    async def take_over_expired(self) -> None:
        """Take over the sessions of members whose lease expired (core/cluster/)."""
        await take_over_expired(self.store, self.engine.queue)

    async def is_ready(self) -> bool:
        """Migrations ran, the store answers and can commit, and the server is not shutting
        down."""
        if not self.ready or self.draining:
            return False
        return await self.core.ready(READY_PROBE_SECONDS)

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
            group.create_task(self.push.run(), name="c2-push")
            if self.membership is None:
                group.create_task(self.core.webhook_dispatcher.run(), name="c2-webhooks")
            else:
                interval = self.membership.heartbeat_interval
                group.create_task(self.membership.run(), name="c2-cluster-heartbeat")
                group.create_task(
                    _every(interval, self.take_over_expired, delay=interval),
                    name="c2-cluster-takeover",
                )
                group.create_task(self._lead(interval), name="c2-cluster-lead")

    async def _lead(self, interval: float) -> None:
        """Run the webhook dispatcher while this member is the cluster's leader (the oldest
        live member): one member sends the shared outbox's deliveries."""
        dispatcher: asyncio.Task[None] | None = None
        try:
            while True:
                try:
                    leading = await self.is_leader()
                except Exception as exc:
                    log.warning("could not read the cluster's members: %s", exc)
                    leading = dispatcher is not None  # keep what we were doing
                if leading and dispatcher is None:
                    log.info("leading the cluster: sending webhook deliveries")
                    dispatcher = asyncio.create_task(
                        self.core.webhook_dispatcher.run(), name="c2-webhooks"
                    )
                elif not leading and dispatcher is not None:
                    dispatcher.cancel()
                    dispatcher = None
                await asyncio.sleep(interval)
        finally:
            if dispatcher is not None:
                dispatcher.cancel()

    async def is_leader(self) -> bool:
        """Not clustered, or the oldest live member: it runs retention and webhook sends."""
        if self.membership is None:
            return True
        members = await self.membership.members()
        return bool(members) and members[0].id == self.membership.id

    async def sweep(self) -> None:
        """Prune events and delivered webhook deliveries past retention, idempotency records
        past 24 h, dead tokens/tickets (in a cluster: the leader only)."""
        if await self.is_leader():
            await self.core.sweep(timedelta(days=self.settings.event_retention_days))


async def _every(interval: float, job: Callable[[], Awaitable[object]], *, delay: float) -> None:
    await asyncio.sleep(delay)
    while True:
        try:
            await job()
        except Exception:
            log.exception("periodic job %s failed", getattr(job, "__name__", job))
        await asyncio.sleep(interval)
