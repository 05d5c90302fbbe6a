"""The core one server runs: store, bus, engine, device auth, the event feed and idempotent
retry, with their start, readiness, housekeeping and close. api/services.py adds the HTTP side
(op dispatch, draining) and owns nothing of the store itself.

Start-up claims the home and the database (one owner each, core/store/ownership.py) before
anything is migrated or recovered. A cluster member (`cluster` given, issue 18) shares the
database with its peers instead, and joins the cluster before the engine recovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from c2.core.auth import REVOKED, DeviceAuth
from c2.core.bus import EventBus
from c2.core.cluster.fanout import LogFollower, PeerListener
from c2.core.cluster.membership import ClusterConfig, Membership
from c2.core.engine import Engine
from c2.core.event_feed import REPLAY_BATCH, EventFeed
from c2.core.home import HomeLock, open_home, sqlite_url
from c2.core.idempotent import IdempotentOps
from c2.core.notify.payloads import notifiable
from c2.core.notify.push import PushService
from c2.core.notify.webhooks import WebhookDispatcher, WebhookService
from c2.core.search.service import SearchService
from c2.core.store.database import COMMIT_INTERVAL, Store
from c2.core.store.events import CommittedEvent

log = logging.getLogger(__name__)
# Builds the engine over the runtime's store (and bus, for engines that want it).
EngineBuilder = Callable[[Store, EventBus], Engine]


class Runtime:
    """Store, bus, engine and auth of one server, started and closed in order."""

    def __init__(
        self,
        *,
        home: Path,
        database_url: str,
        engine: EngineBuilder,
        store_retry_seconds: float = 30.0,
        commit_interval: float = COMMIT_INTERVAL,
        pairing_ttl: timedelta = timedelta(minutes=15),
        ticket_ttl: timedelta = timedelta(minutes=5),
        pair_attempts_per_minute: int = 10,
        webhook_backoff_scale: float = 1.0,
        vapid_subject: str = "",
        push_private_endpoints: bool = False,
        cluster: ClusterConfig | None = None,
    ) -> None:
        self.home = home
        self.database_url = database_url
        self.bus = EventBus()
        self.store = Store(
            database_url,
            exclusive=True,
            cluster=cluster is not None,
            instance_id=cluster.instance_id if cluster is not None else None,
            retry_seconds=store_retry_seconds,
            commit_interval=commit_interval,
            lease_seconds=cluster.lease_seconds if cluster is not None else None,
        )
        # A cluster's events reach the bus through the follower, in order (core/cluster/).
        self.follower: LogFollower | None = None
        self.listener: PeerListener | None = None
        if cluster is not None:
            self.follower = LogFollower(self.store, self._followed)
            self.listener = PeerListener(
                database_url,
                instance_id=cluster.instance_id,
                on_position=self.follower.notified,
                on_control=self._control,
                on_connected=self.follower.reread,
            )
        self._cluster_tasks: list[asyncio.Task[None]] = []
        self.engine = engine(self.store, self.bus)
        self.membership = (
            Membership(self.store, cluster, on_lapse=self.engine.drop_superseded)
            if cluster is not None
            else None
        )
        self.auth = DeviceAuth(
            self.store,
            self.bus,
            pairing_ttl=pairing_ttl,
            ticket_ttl=ticket_ttl,
            pair_attempts_per_minute=pair_attempts_per_minute,
        )
        self.feed = EventFeed(self.store, self.bus.recent)
        self.idempotent = IdempotentOps(self.store)
        self.search = SearchService(self.store)
        self.webhook_dispatcher = WebhookDispatcher(self.store, backoff_scale=webhook_backoff_scale)
        self.webhooks = WebhookService(self.store, due=self.webhook_dispatcher.wake)
        self.push = PushService(
            self.store, home, vapid_subject, private_endpoints=push_private_endpoints
        )
        self._store_started = False
        self._home: HomeLock | None = None

    async def start(self) -> None:
        """Claim the home, open the writer (claiming the database; committed events reach the
        bus), migrate, seed the ring of recent events, then start the engine (recovery first).
        Another owner fails the start before anything is written."""
        in_home = self.database_url == sqlite_url(self.home)
        self._home = await asyncio.to_thread(open_home, self.home, create_database=in_home)
        await asyncio.to_thread(self.store.start, self._published)
        self._store_started = True
        await asyncio.to_thread(self.store.migrate)
        if self.membership is not None:
            await self._follow_cluster()
            await self.membership.join()
        else:
            # Clients resuming after a restart replay from the ring, not each from the log:
            # one replay batch reaches those that missed up to that many events. (A cluster
            # member's bus and ring are fed by its follower alone, in log order from the head
            # it reads at start: core/cluster/fanout.py.)
            newest = await self.store.read(lambda r: r.events.newest(REPLAY_BATCH))
            self.bus.recent.seed(newest)
        await self.engine.start()

    async def _follow_cluster(self) -> None:
        """LISTEN first, then read the log's head: every commit after it is notified."""
        assert self.listener is not None and self.follower is not None
        self._cluster_tasks.append(asyncio.create_task(self.listener.run(), name="c2-listen"))
        async with asyncio.timeout(self.store.retry_seconds):
            await self.listener.ready.wait()
        head = await self.store.read(lambda r: r.events.last_seq())
        self.follower.begin(head)
        self._cluster_tasks.append(asyncio.create_task(self.follower.run(), name="c2-follow"))

    def _control(self, message: str) -> None:
        """A cluster member's control message (core/cluster/fanout.py)."""
        verb, _, argument = message.partition(" ")
        if verb == REVOKED and argument:
            self.auth.forget_device(argument)

    def _published(self, events: list[CommittedEvent]) -> None:
        """The store's publish hook (on the loop, after each commit): live streams, then the
        notifiers, which only look at the batch and wake up."""
        notable = notifiable(events)
        if self.follower is not None:
            self.follower.local(events)
        else:
            self.bus.publish(events)
            self.webhook_dispatcher.notice(notable)
        self.push.notice(notable)  # pushes go out from the member that committed the event

    def _followed(self, events: list[CommittedEvent]) -> None:
        """What a cluster member's follower delivers, every member's events in log order: live
        streams, and the webhook dispatcher (the leader sends everyone's deliveries)."""
        self.bus.publish(events)
        self.webhook_dispatcher.notice(notifiable(events))

    def unavailable(self) -> bool:
        """The store knows it cannot take writes now."""
        return self.store.unavailable() is not None

    async def ready(self, timeout: float) -> bool:
        """The store answers a read and the writer can commit, each within `timeout`."""
        if self.unavailable():
            return False
        try:
            # The writer too: an idle writer whose connection (and owner lock) was lost would
            # only find out at its next write.
            await self.store.ping_writer(timeout)
            async with asyncio.timeout(timeout):
                await self.store.read(lambda r: r.ping())
        except Exception:
            return False
        return True

    async def sweep(self, event_retention: timedelta) -> None:
        """Prune events and delivered webhook deliveries past retention, idempotency records
        past 24 h, dead tokens/tickets."""
        events = await self.store.write(lambda uow: uow.events.prune(event_retention))
        records = await self.store.write(lambda uow: uow.idempotency.prune())
        secrets = await self.auth.prune()
        deliveries = await self.webhooks.prune(event_retention)
        if events or records or secrets or deliveries:
            log.info(
                "pruned %d events, %d idempotency records, %d auth rows, %d webhook deliveries",
                events,
                records,
                secrets,
                deliveries,
            )

    async def close(self) -> None:
        """Persist batched state, close the store, release the home (after the engine's
        shutdown and the streams' end)."""
        for task in self._cluster_tasks:
            task.cancel()
        for task in self._cluster_tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._cluster_tasks.clear()
        if self._store_started:
            try:
                await self.auth.flush_last_seen()
            except Exception:
                log.exception("could not flush device last-seen times")
            if self.membership is not None:
                await self.membership.leave()
            await asyncio.to_thread(self.store.close)
            self._store_started = False
        if self._home is not None:
            self._home.release()
            self._home = None
