"""Sessions of a member that is gone (issue 18): the survivors' takeover and adoption.

Takeover: a member whose lease expired (by the database's clock) is removed from the registry
by exactly one survivor (the DELETE that matched), which in that same transaction marks the
dead member's running/awaiting sessions failed/interrupted and broadcasts it, exactly as a
restarting server recovers its own; their follow-up queues pause like after a restart.

Adoption: a request acting on a session whose owner is gone is served by the member it
reached, which first makes itself the owner by compare-and-set in the database (exactly one
member wins; a loser relays to the winner). A worktree session is never adopted: its checkout
lives on the gone member's disk; such a request is refused with `owner_unavailable`.
"""

from __future__ import annotations

import logging

from c2.core.commits import interrupt_in_flight
from c2.core.queue import FollowUpQueue
from c2.core.store.cluster import ClusterRepository
from c2.core.store.database import Store, UnitOfWork
from c2.core.store.faults import describe

log = logging.getLogger(__name__)


def _interrupted(uow: UnitOfWork, owner: str, session: str | None = None) -> int:
    return interrupt_in_flight(uow, [owner], unowned=False, session=session)


async def take_over_expired(store: Store, queue: FollowUpQueue) -> list[str]:
    """Take over every member whose lease expired; returns the ones this member took. A
    database that cannot be reached (or this member's own lapsed lease) ends this round with
    a warning: the next round, a third of a lease later, tries again."""
    try:
        dead = await store.read(lambda r: ClusterRepository(r.conn).expired())
    except Exception as exc:
        log.warning("could not look for cluster members past their lease: %s", describe(exc))
        return []
    taken: list[str] = []
    for member in dead:

        def write(uow: UnitOfWork, member: str = member) -> int | None:
            if not ClusterRepository(uow.conn).remove_expired(member):
                return None  # renewed meanwhile, or another survivor took it
            return _interrupted(uow, member)

        try:
            interrupted = await store.write(write)
        except Exception as exc:
            log.warning("could not take over cluster member %s: %s", member, describe(exc))
            return taken
        if interrupted is None:
            continue
        taken.append(member)
        await queue.interrupted([member], unowned=False)
        log.warning(
            "cluster member %s missed its lease: marked %d of its turn(s) interrupted",
            member,
            interrupted,
        )
    return taken


async def adopt(store: Store, session: str, previous: str) -> bool:
    """Make this member the owner of `session`, whose owner `previous` is not live; False
    when `previous` is live again or another member adopted it first."""
    me = store.instance_id
    assert me is not None

    def write(uow: UnitOfWork) -> bool:
        if ClusterRepository(uow.conn).is_live(previous):
            return False
        if not uow.sessions.adopt(session, me, previous):
            return False
        _interrupted(uow, me, session)  # a turn the gone owner was running is over
        return True

    adopted = await store.write(write)
    if adopted:
        log.info("adopted session %s of gone cluster member %s", session, previous)
    return adopted
