"""The one op dispatcher behind `POST /v1/ops` and every resource endpoint (API.md §1, §3).

It submits the op to the engine through idempotent retry (core/idempotent.py: first outcome
per device and request_id for 24 h, 409 on a different body, kept in the op's own
transaction) and maps the outcome type to a status code.
An accepted op runs to completion even when its client disconnects.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel
from starlette.responses import Response

from c2.api.errors import (
    PROBLEM_MEDIA_TYPE,
    ShuttingDownError,
    header_text,
    json_bytes,
    problem_body,
    problem_headers,
    status_of,
)
from c2.core.engine import Engine
from c2.core.errors import DomainError, RequestIdReusedError
from c2.core.idempotent import IdempotentOps, Reply
from c2.core.outcomes import CancelResult, PromptAccepted
from c2.core.protocol import (
    AnsweredBy,
    AnswerPermissionOp,
    NewSessionOp,
    Op,
    QueuePromptOp,
    SessionSnapshot,
)
from c2.core.queue import Queued

log = logging.getLogger(__name__)
REPLAYED_HEADER = "Idempotent-Replayed"


@dataclass(frozen=True, slots=True)
class OpReply:
    status: int
    body: bytes
    headers: dict[str, str]


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
    def __init__(self, engine: Engine, idempotent: IdempotentOps) -> None:
        self._engine, self._idempotent = engine, idempotent
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
        if reply.status == 201:  # every 201 declares the created resource (a session, an item)
            created = json.loads(reply.body)["id"]
            if isinstance(op, QueuePromptOp):
                where = f"/v1/sessions/{quote(op.session, safe='')}/queue/{quote(created, safe='')}"
            else:  # new_session and fork: the new session
                where = f"/v1/sessions/{quote(created, safe='')}"
            headers["Location"] = where
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
        first: list[OpReply] = []

        async def perform() -> Reply:
            reply = await self._perform(op, request_id, actor)
            first.append(reply)
            return Reply(reply.status, reply.body.decode("utf-8"))

        def render(outcome: object) -> Reply:
            # The reply a write completing the op keeps with its effect (core/idempotent.py).
            if isinstance(outcome, DomainError):
                reply = self._problem(outcome, op, request_id)
            else:
                reply = self._reply(outcome, request_id)
            return Reply(reply.status, reply.body.decode("utf-8"))

        try:
            kept, replayed = await self._idempotent.once(op, device_id, request_id, perform, render)
        except RequestIdReusedError as err:
            return self._problem(err, op, request_id)
        if not replayed:
            return first[0]
        headers = {"Request-Id": header_text(request_id), REPLAYED_HEADER: "true"}
        return OpReply(kept.status, kept.body.encode("utf-8"), headers)

    async def _perform(self, op: Op, request_id: str | None, actor: AnsweredBy) -> OpReply:
        try:
            outcome = await self._engine.submit(op, actor)
        except DomainError as err:
            return self._problem(err, op, request_id)
        return self._reply(outcome, request_id)

    @staticmethod
    def _reply(outcome: object, request_id: str | None) -> OpReply:
        headers = {"Request-Id": header_text(request_id)} if request_id else {}
        return OpReply(outcome_status(outcome), json_bytes(outcome_json(outcome)), headers)

    @staticmethod
    def _problem(err: DomainError, op: Op, request_id: str | None) -> OpReply:
        session = None if isinstance(op, NewSessionOp) else op.session
        body = problem_body(err, request_id=request_id, session=session)
        headers = problem_headers(err)
        if request_id:
            headers["Request-Id"] = header_text(request_id)
        return OpReply(status_of(err), json_bytes(body), headers)
