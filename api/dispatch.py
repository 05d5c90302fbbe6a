"""The one op dispatcher behind `POST /v1/ops` and every resource endpoint (API.md §1, §3).

It applies idempotent retry (first outcome per device and request_id for 24 h, 409 on a
different body), submits the op to the engine, and maps the outcome type to a status code.
An accepted op runs to completion even when its client disconnects.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel
from starlette.responses import Response

from api.errors import (
    PROBLEM_MEDIA_TYPE,
    ShuttingDownError,
    header_text,
    json_bytes,
    problem_body,
    problem_headers,
)
from core.engine import Engine
from core.errors import DomainError, RequestIdReusedError
from core.outcomes import CancelResult, PromptAccepted
from core.protocol import AnsweredBy, AnswerPermissionOp, NewSessionOp, Op, SessionSnapshot
from core.queue import Queued
from core.store.database import Store

log = logging.getLogger(__name__)
REPLAYED_HEADER = "Idempotent-Replayed"


@dataclass(frozen=True, slots=True)
class OpReply:
    status: int
    body: bytes
    headers: dict[str, str]


class KeyedLocks:
    """One asyncio.Lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
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

    def __len__(self) -> int:
        return len(self._locks)


def op_fingerprint(op: Op, request_id: str) -> str:
    """sha256 of the canonical op body: parsed fields (unknown ones dropped), sorted keys."""
    canonical = json.dumps(
        {"op": op.model_dump(mode="json"), "request_id": request_id},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def outcome_status(outcome: object) -> int:
    if isinstance(outcome, SessionSnapshot | Queued):
        return 201
    if isinstance(outcome, PromptAccepted | CancelResult):
        return 202
    return 200


def outcome_json(outcome: object) -> Any:
    if isinstance(outcome, SessionSnapshot):
        return outcome.wire()
    if isinstance(outcome, BaseModel):
        return outcome.model_dump(mode="json")
    return outcome


class OpDispatcher:
    def __init__(self, engine: Engine, store: Store) -> None:
        self._engine, self._store = engine, store
        self._locks = KeyedLocks()
        self._inflight: set[asyncio.Task[OpReply]] = set()
        self.accepting = True

    async def dispatch(
        self, op: Op, *, device_id: str, request_id: str | None, device_name: str | None = None
    ) -> Response:
        """Perform `op` once per (device, request_id); answer its outcome or problem. A
        permission answer is recorded as the device's (`device_name` names it)."""
        if not self.accepting:
            raise ShuttingDownError("the server is shutting down", retry_after=1)
        # answer_permission's request_id names the permission, not a client retry (API.md §1).
        key = None if isinstance(op, AnswerPermissionOp) else request_id
        actor = AnsweredBy(device_id=device_id, name=device_name or device_id)
        task = asyncio.create_task(self._run(op, device_id, key, actor), name=f"op:{op.op}")
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        # Shielded: a client that disconnects does not cancel an op already handed over.
        reply = await asyncio.shield(task)
        headers = dict(reply.headers)
        if reply.status == 201 and isinstance(op, NewSessionOp):
            session_id = json.loads(reply.body)["id"]
            headers["Location"] = f"/v1/sessions/{quote(session_id, safe='')}"
        return Response(
            reply.body,
            status_code=reply.status,
            media_type=PROBLEM_MEDIA_TYPE if reply.status >= 400 else "application/json",
            headers=headers,
        )

    async def drain(self, timeout: float) -> None:
        """Stop accepting ops and wait (bounded) for those in flight."""
        self.accepting = False
        if self._inflight:
            await asyncio.wait(tuple(self._inflight), timeout=timeout)

    async def _run(
        self, op: Op, device_id: str, request_id: str | None, actor: AnsweredBy
    ) -> OpReply:
        if request_id is None:
            return await self._perform(op, None, actor)
        fingerprint = op_fingerprint(op, request_id)
        async with self._locks.hold((device_id, request_id)):
            record = await self._store.read(lambda r: r.idempotency.get(device_id, request_id))
            if record is not None:
                if not hmac.compare_digest(record.op_hash, fingerprint):
                    return self._problem(
                        RequestIdReusedError(
                            f"request_id {request_id!r} was already used with a different body"
                        ),
                        op,
                        request_id,
                    )
                headers = {"Request-Id": header_text(request_id), REPLAYED_HEADER: "true"}
                return OpReply(record.status, record.body_json.encode("utf-8"), headers)
            reply = await self._perform(op, request_id, actor)
            if reply.status < 500:  # a server-side failure may succeed when retried
                body = reply.body.decode("utf-8")
                try:
                    await self._store.write(
                        lambda uow: uow.idempotency.put(
                            device_id, request_id, fingerprint, reply.status, body
                        )
                    )
                except Exception:
                    log.exception("could not record the outcome of request %s", request_id)
            return reply

    async def _perform(self, op: Op, request_id: str | None, actor: AnsweredBy) -> OpReply:
        try:
            outcome = await self._engine.submit(op, actor)
        except DomainError as err:
            return self._problem(err, op, request_id)
        headers = {"Request-Id": header_text(request_id)} if request_id else {}
        return OpReply(outcome_status(outcome), json_bytes(outcome_json(outcome)), headers)

    @staticmethod
    def _problem(err: DomainError, op: Op, request_id: str | None) -> OpReply:
        session = None if isinstance(op, NewSessionOp) else op.session
        body = problem_body(err, request_id=request_id, session=session)
        headers = problem_headers(err)
        if request_id:
            headers["Request-Id"] = header_text(request_id)
        return OpReply(err.status, json_bytes(body), headers)
