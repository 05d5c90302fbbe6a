"""What `c2 serve --cluster` checks before it joins (its preflight), each refusal one line.

A member that joins wrongly does harm quietly: one with another key answers every relayed
request 401 while looking healthy; one started from a copy of a live member's home takes that
member's id, so both run its sessions and end each other's agents.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from c2.core.cluster.membership import ID_FILE, home_instance_id
from c2.core.store.cluster import ClusterRepository
from c2.core.store.database import Store, UnitOfWork

KEY_CHECK = "secret_check"  # cluster setting: a digest of the key the members use


class JoinRefusedError(Exception):
    """Joining would break the cluster; str() says why and what to change."""


def check_joining(store: Store, home: Path, secret: str | None, lease_seconds: float) -> None:
    """Refuse a key other than the live members' and an instance id a live process holds."""
    _same_key(store, secret)
    _id_not_live_elsewhere(store, home, lease_seconds)


def _same_key(store: Store, secret: str | None) -> None:
    def write(uow: UnitOfWork) -> list[str]:
        repo = ClusterRepository(uow.conn)
        digest = hashlib.sha256((secret or repo.secret()).encode()).hexdigest()
        if repo.setting(KEY_CHECK, digest) == digest:
            return []
        live = [member.id for member in repo.live()]
        if not live:  # no member runs: the key may change (a rotation)
            repo.replace_setting(KEY_CHECK, digest)
        return live

    live = store.write_sync(write)
    if live:
        raise JoinRefusedError(
            f"C2_CLUSTER_SECRET differs from the key the running members use ({len(live)} "
            "live); give every member the same value, or none to share the database's"
        )


def _id_not_live_elsewhere(store: Store, home: Path, lease_seconds: float) -> None:
    """A live lease under this home's id is either this member's own before a crash (it stops
    renewing) or another process's (a copied home: it renews). Waiting a renewal and a half
    tells them apart; a clean stop left no lease, so only a restart after a crash waits."""
    instance = home_instance_id(home)

    def heartbeat() -> object:
        return store.read_sync(lambda r: ClusterRepository(r.conn).heartbeat_of(instance))

    first = heartbeat()
    if first is None:
        return
    time.sleep(lease_seconds / 2)  # renewals come every third of the lease
    later = heartbeat()
    if later is not None and later != first:
        raise JoinRefusedError(
            f"another running c2 member has this home's instance id {instance} (its lease is "
            f"being renewed): a copied home? delete {home / ID_FILE} in the copy to give it "
            "its own"
        )
