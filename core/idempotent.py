"""Idempotent retry of ops (docs/api.md §1): the first reply per (device, request_id) is kept for
24 h and answered again to a retry with the same body; a different body under a used
request_id is refused (`request_id_reused`).

Retries of one key are serialised (a keyed lock), so a retry racing its original waits for it
and replays its reply. What a reply is (its status and body bytes) is the caller's business:
it hands `once` the op to perform and how to render an outcome.

The reply is kept in the op's own transaction: while the op runs, its record is the context's
current `OpRecord`, and the write that completes the op keeps the reply with its effect
(`UnitOfWork.answer`; core/store/idempotency.py). A server that dies after that commit has
kept the reply too, so a retry replays it instead of running the op again. An outcome that
no write of the op carried (an op with nothing to commit, such as a cancel with no parked
permission, or one that failed before writing) is recorded after the op, as before: running
such an op again changes nothing durable.

In a cluster (issue 18) a duplicate may reach another member: the key is claimed in the
database before the op runs (a PENDING record naming this process), so a duplicate anywhere
finds the claim and waits for the outcome, then replays it. A claim whose claimant is gone
(its member's lease expired, or it was this member before a restart) is taken over and the
op runs again; the gone claimant's effect can no longer commit (its write completes only its
own claim, else it rolls back: ClaimLostError).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import TypeVar

from c2.core.errors import DomainError, RequestIdReusedError, StoreUnavailableError
from c2.core.protocol.ops import Op
from c2.core.store.cluster import ClusterRepository
from c2.core.store.database import ReadUnit, Store, UnitOfWork
from c2.core.store.faults import describe
from c2.core.store.idempotency import CURRENT_OP, PENDING, OpRecord, Reply

__all__ = ["IdempotentOps", "KeyedLocks", "Reply", "op_fingerprint"]

log = logging.getLogger(__name__)
T = TypeVar("T")
CLAIM_POLL_SECONDS = 0.05
# A duplicate waits this long for the first request's outcome, then gets a 503 to retry.
CLAIM_WAIT_SECONDS = 120.0


class KeyedLocks:
    """One asyncio.Lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        """Hold `key`'s lock for the block (waiting for whoever holds it)."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def op_fingerprint(op: Op, request_id: str) -> str:
    """sha256 of the canonical op body: parsed fields (unknown ones dropped), sorted keys."""
    canonical = json.dumps(
        {"op": op.model_dump(mode="json"), "request_id": request_id},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class IdempotentOps:
    """Runs an op at most once per (device, request_id) within the retention window."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._locks = KeyedLocks()
        # This process as a claimant: its member id and a token of its own (a restart under
        # the same id is another claimant).
        self._claimant = f"{store.instance_id or '-'} {uuid.uuid4().hex}"

    async def once(
        self,
        op: Op,
        device_id: str,
        request_id: str,
        perform: Callable[[], Awaitable[Reply]],
        render: Callable[[object], Reply],
    ) -> tuple[Reply, bool]:
        """The reply to `op` and whether it is a replay of the first one. `perform` runs only
        for a new key; `render` turns an outcome (or the DomainError answering it) into its
        reply, in the transaction of the write that completes the op. A reply is kept unless
        it is a server-side failure (>= 500), which a retry may turn into a success. Raises
        RequestIdReusedError for a different body."""
        fingerprint = op_fingerprint(op, request_id)
        async with self._locks.hold((device_id, request_id)):
            if self._store.cluster:
                return await self._once_claimed(device_id, request_id, fingerprint, perform, render)
            record = await self._read(lambda r: r.idempotency.get(device_id, request_id))
            if record is not None and record.status == PENDING:
                record = None  # a claim left by a cluster member: the database is ours now
            if record is not None:
                if not hmac.compare_digest(record.op_hash, fingerprint):
                    raise RequestIdReusedError(
                        f"request_id {request_id!r} was already used with a different body"
                    )
                return Reply(record.status, record.body_json), True
            scope = OpRecord(device_id, request_id, fingerprint, render)
            reply = await self._perform(scope, perform)
            if reply.status < 500 and scope.kept != reply:
                await self._record(
                    scope,
                    lambda uow: uow.idempotency.put(
                        device_id, request_id, fingerprint, reply.status, reply.body
                    ),
                )
            return reply, False

    async def _perform(self, scope: OpRecord, perform: Callable[[], Awaitable[Reply]]) -> Reply:
        """Run `perform` with `scope` as the current op record of this task."""
        scope.task = asyncio.current_task()
        token = CURRENT_OP.set(scope)
        try:
            return await perform()
        finally:
            scope.open = False
            CURRENT_OP.reset(token)

    async def _record(self, scope: OpRecord, write: Callable[[UnitOfWork], object]) -> None:
        """Record an outcome no write of the op carried (or, defensively, one that differs
        from what a write kept)."""
        if scope.kept is not None:
            log.warning("request %s answered other than its write kept", scope.request_id)
        try:
            await self._store.write(write, patient=scope.claimant is not None)
        except Exception:
            log.exception("could not record the outcome of request %s", scope.request_id)

    async def _once_claimed(
        self,
        device_id: str,
        request_id: str,
        fingerprint: str,
        perform: Callable[[], Awaitable[Reply]],
        render: Callable[[object], Reply],
    ) -> tuple[Reply, bool]:
        """`once` across cluster members: claim the key in the database, or wait for the
        claimant's outcome."""
        me = self._claimant
        deadline = time.monotonic() + CLAIM_WAIT_SECONDS
        while True:
            record = await self._write(
                lambda uow: uow.idempotency.claim(device_id, request_id, fingerprint, me)
            )
            if record is None:
                break  # ours: run it
            if not hmac.compare_digest(record.op_hash, fingerprint):
                raise RequestIdReusedError(
                    f"request_id {request_id!r} was already used with a different body"
                )
            if record.status != PENDING:
                return Reply(record.status, record.body_json), True
            stale = record.claimant or ""
            if await self._gone(stale):
                took = await self._write(partial(_take_over, device_id, request_id, stale, me))
                if took:
                    break
                continue
            if time.monotonic() > deadline:
                raise StoreUnavailableError(
                    f"request {request_id!r} is still running on another instance; retry later",
                    retry_after=1,
                )
            await asyncio.sleep(CLAIM_POLL_SECONDS)
        scope = OpRecord(device_id, request_id, fingerprint, render, claimant=me)
        try:
            reply = await self._perform(scope, perform)
        except BaseException:
            await self._release(device_id, request_id)
            raise
        if reply.status >= 500:
            await self._release(device_id, request_id)
            return reply, False
        if scope.kept != reply:
            await self._record(
                scope,
                lambda uow: uow.idempotency.complete(
                    device_id, request_id, me, reply.status, reply.body
                ),
            )
        return reply, False

    async def _gone(self, claimant: str) -> bool:
        """Whether the process that claimed a key can no longer complete it."""
        instance, _, _token = claimant.partition(" ")
        if claimant == self._claimant:
            return False
        if instance == self._store.instance_id:
            return True  # this member before a restart
        return not await self._read(lambda r: ClusterRepository(r.conn).is_live(instance))

    async def _read(self, fn: Callable[[ReadUnit], T]) -> T:
        with _store_fault():
            return await self._store.read(fn)

    async def _write(self, fn: Callable[[UnitOfWork], T]) -> T:
        with _store_fault():
            return await self._store.write(fn)

    async def _release(self, device_id: str, request_id: str) -> None:
        try:
            await self._store.write(
                lambda uow: uow.idempotency.release(device_id, request_id, self._claimant)
            )
        except Exception:
            log.exception("could not release the claim of request %s", request_id)


@contextmanager
def _store_fault() -> Iterator[None]:
    """A database that cannot be read or written while the request's record is looked up or
    claimed (an outage, this member's lapsed lease): a 503 to retry, never a 500. The op has
    not run."""
    try:
        yield
    except DomainError:
        raise
    except Exception as exc:
        raise StoreUnavailableError(
            f"the request's idempotency record cannot be read or claimed now ({describe(exc)})",
            retry_after=1,
        ) from exc


def _take_over(device_id: str, request_id: str, stale: str, me: str, uow: UnitOfWork) -> bool:
    return uow.idempotency.take_over(device_id, request_id, stale, me)
