"""Idempotent retry of ops (docs/api.md §1): the first reply per (device, request_id) is kept for
24 h and answered again to a retry with the same body; a different body under a used
request_id is refused (`request_id_reused`).

Retries of one key are serialised (a keyed lock), so a retry racing its original waits for it
and replays its reply. What a reply is (its status and body bytes) is the caller's business.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from c2.core.errors import RequestIdReusedError
from c2.core.protocol.ops import Op
from c2.core.store.database import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reply:
    """An op's reply as it is kept: its status and its JSON body."""

    status: int
    body: str


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

    async def once(
        self,
        op: Op,
        device_id: str,
        request_id: str,
        perform: Callable[[], Awaitable[Reply]],
    ) -> tuple[Reply, bool]:
        """The reply to `op` and whether it is a replay of the first one. `perform` runs only
        for a new key; its reply is kept unless it is a server-side failure (>= 500), which a
        retry may turn into a success. Raises RequestIdReusedError for a different body."""
        fingerprint = op_fingerprint(op, request_id)
        async with self._locks.hold((device_id, request_id)):
            record = await self._store.read(lambda r: r.idempotency.get(device_id, request_id))
            if record is not None:
                if not hmac.compare_digest(record.op_hash, fingerprint):
                    raise RequestIdReusedError(
                        f"request_id {request_id!r} was already used with a different body"
                    )
                return Reply(record.status, record.body_json), True
            reply = await perform()
            if reply.status < 500:
                try:
                    await self._store.write(
                        lambda uow: uow.idempotency.put(
                            device_id, request_id, fingerprint, reply.status, reply.body
                        )
                    )
                except Exception:
                    log.exception("could not record the outcome of request %s", request_id)
            return reply, False
