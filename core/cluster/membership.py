"""This instance's membership of the cluster: its id (kept in its home), its registration
with an advertised URL, the heartbeat that renews its lease, and the cluster's key.

The lease is judged by the database's clock alone (core/store/cluster.py). A member that
cannot renew its lease (database unreachable, writer stalled) is judged dead by its peers
once the lease runs out, which is what they must assume anyway: it cannot commit either.
From its first join its store is fenced by the lease (core/store/database.py `Store.fence`),
so a member that stalled past it (a stopped process, a partition) commits nothing until it
has dropped what its peers took over meanwhile (`on_lapse`) and joined again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from c2.core.errors import StoreUnavailableError
from c2.core.store.cluster import ClusterRepository, Instance
from c2.core.store.database import Store, UnitOfWork
from c2.core.store.faults import describe

log = logging.getLogger(__name__)
ID_FILE = "instance-id"
DEFAULT_LEASE_SECONDS = 15.0


@dataclass(frozen=True)
class ClusterConfig:
    """How this instance joins: its id, the URL peers reach it at, its lease, and the key
    from the environment (None: the one stored in the database)."""

    instance_id: str
    url: str
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    secret: str | None = None


def home_instance_id(home: Path) -> str:
    """The instance id kept in `home` (created on first use): a restart keeps its id, so it
    finds its own sessions and agent records again."""
    path = home / ID_FILE
    try:
        existing = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        existing = ""
    if existing:
        return existing
    fresh = uuid.uuid4().hex
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(fresh + "\n")
    return fresh


class Membership:
    """Registers this instance, renews its lease (`run`) and leaves on close. `on_lapse` runs
    when the lease was found expired, before joining again (still fenced): it drops the live
    work of sessions peers took over or adopted meanwhile (core/engine.py)."""

    def __init__(
        self,
        store: Store,
        config: ClusterConfig,
        on_lapse: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._store = store
        self._on_lapse = on_lapse
        self.config = config
        self.id = config.instance_id
        self.secret = config.secret or ""
        self._joined = False

    async def join(self) -> None:
        """Register (a restart re-registers under the same id) and read the cluster key."""
        config = self.config

        def write(uow: UnitOfWork) -> str:
            repo = ClusterRepository(uow.conn)
            repo.register(config.instance_id, config.url, config.lease_seconds)
            return repo.secret()

        stored = await self._store.write(write, fenced=False)
        self.secret = config.secret or stored
        self._store.fence(self.id)  # from now on every write needs our lease
        self._joined = True
        log.info("joined the cluster as %s (%s)", self.id, config.url)

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between lease renewals: a third of the lease, so two may fail in a row."""
        return max(0.05, self.config.lease_seconds / 3)

    async def run(self) -> None:
        """Renew the lease every third of it until cancelled."""
        lease = self.config.lease_seconds
        interval = self.heartbeat_interval
        while True:
            await asyncio.sleep(interval)
            try:
                renewed = await self._store.write(
                    lambda uow: ClusterRepository(uow.conn).heartbeat(self.id, lease),
                    retry_seconds=interval,
                    fenced=False,
                )
                if not renewed:
                    # Our lease ran out (a stalled process, a partition): peers may have taken
                    # our in-flight sessions over. The fence refuses our writes meanwhile; drop
                    # what was taken over, then join again.
                    log.error("cluster lease of %s expired before renewal; joining again", self.id)
                    await self._lapsed()
                    await self.join()
            except Exception as exc:
                log.warning("cluster heartbeat failed: %s", exc)

    async def _lapsed(self) -> None:
        if self._on_lapse is None:
            return
        try:
            await self._on_lapse()
        except Exception:
            log.exception("could not drop the sessions taken over while the lease had lapsed")

    async def leave(self) -> None:
        """Drop the registration (a clean stop; the last write of a member); best effort."""
        if not self._joined:
            return
        self._joined = False
        self._store.fence(None)
        try:
            await self._store.write(
                lambda uow: ClusterRepository(uow.conn).leave(self.id),
                retry_seconds=2.0,
                fenced=False,
            )
        except Exception as exc:
            log.warning("could not leave the cluster cleanly: %s", exc)

    async def members(self) -> list[Instance]:
        """Live members by the database's clock; StoreUnavailableError when the database
        cannot be read."""
        try:
            return await self._store.read(lambda r: ClusterRepository(r.conn).live())
        except Exception as exc:
            raise StoreUnavailableError(
                f"the cluster's members cannot be read now ({describe(exc)})", retry_after=1
            ) from exc
