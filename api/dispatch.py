"""The one op dispatcher behind `POST /v1/ops` and every resource endpoint (docs/api.md §1, §3).

It submits the op to the engine through idempotent retry (core/idempotent.py: the first
reply per device and request_id is kept for 24 h, in the op's own transaction; a different
body is 409). The route names
the success status its decorator declares; a fresh success comes back as the engine's typed
outcome, which the route returns for FastAPI to render through its `response_model`. What
is answered exactly as it was kept — a problem, or a replay of an earlier reply — is raised
as `KeptReply` and written out byte for byte by its handler.
An accepted op runs to completion even when its client disconnects.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import JSONResponse
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
from c2.core.engine import Engine, Outcome
from c2.core.errors import DomainError, RequestIdReusedError
from c2.core.idempotent import IdempotentOps, Reply
from c2.core.protocol.ops import AnswerPermissionOp, NewSessionOp, Op, QueuePromptOp
from c2.core.protocol.state import AnsweredBy

log = logging.getLogger(__name__)
REPLAYED_HEADER = "Idempotent-Replayed"


class OpJSONResponse(JSONResponse):
    """An op's JSON answer, rendered as a kept reply is (ASCII escapes: any client string,
    even a lone surrogate, stays encodable), so a replay repeats the first answer's bytes."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


class KeptReply(Exception):  # noqa: N818 - a reply, not an error (replays are answers too)
    """An op's reply answered exactly as it is kept: a problem, or a replay."""

    def __init__(self, reply: Reply, headers: dict[str, str]) -> None:
        super().__init__(f"kept reply {reply.status}")
        self.reply, self.headers = reply, headers


async def kept_reply_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KeptReply)
    status = exc.reply.status
    return Response(
        exc.reply.body.encode("utf-8"),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE if status >= 400 else "application/json",
        headers=exc.headers,
    )


def _created_at(op: Op, created: str) -> str:
    """Where the resource a 201 created lives: a queued item, or a new (or forked) session."""
    if isinstance(op, QueuePromptOp):
        return f"/v1/sessions/{quote(op.session, safe='')}/queue/{quote(created, safe='')}"
    return f"/v1/sessions/{quote(created, safe='')}"


class OpDispatcher:
    """Runs each op once per (device, request_id), shielded from client disconnects."""

    def __init__(self, engine: Engine, idempotent: IdempotentOps) -> None:
        self._engine, self._idempotent = engine, idempotent
        self._inflight: set[asyncio.Task[Outcome | KeptReply]] = set()
        self.accepting = True

    async def dispatch(
        self, op: Op, status: int, *, device_id: str, request_id: str | None, device_name: str
    ) -> tuple[Outcome, dict[str, str]]:
        """Perform `op` once per (device, request_id); its outcome (answered with `status`)
        and the headers to send with it. A problem or a replay raises KeptReply. A permission
        answer is recorded as the device's (`device_name` names it)."""
        if not self.accepting:
            raise ShuttingDownError("the server is shutting down", retry_after=1)
        # answer_permission's request_id names the permission, not a client retry (docs/api.md §1).
        key = None if isinstance(op, AnswerPermissionOp) else request_id
        actor = AnsweredBy(device_id=device_id, name=device_name)
        task = asyncio.create_task(self._run(op, status, device_id, key, actor), name=f"op:{op.op}")
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        # Shielded: a client that disconnects does not cancel an op already handed over.
        result = await asyncio.shield(task)
        if isinstance(result, KeptReply):
            if result.reply.status == 201:  # a replayed creation says where, as the first did
                created = json.loads(result.reply.body)["id"]
                result.headers["Location"] = _created_at(op, created)
            raise result
        headers = {"Request-Id": header_text(key)} if key else {}
        if status == 201:  # every 201 declares the created resource (a session, an item)
            headers["Location"] = _created_at(op, result.model_dump(include={"id"})["id"])
        return result, headers

    async def drain(self, timeout: float) -> None:
        """Stop accepting ops and wait (bounded) for those in flight."""
        self.accepting = False
        if self._inflight:
            await asyncio.wait(tuple(self._inflight), timeout=timeout)

    async def _run(
        self, op: Op, status: int, device_id: str, key: str | None, actor: AnsweredBy
    ) -> Outcome | KeptReply:
        if key is None:
            return await self._perform(op, None, actor)
        first: list[Outcome | KeptReply] = []

        def render(result: object) -> Reply:
            # The reply kept for the op: also rendered by the write completing the op, in its
            # own transaction (core/idempotent.py), from the outcome or the DomainError.
            if isinstance(result, DomainError):
                result = self._problem(result, op, key)
            if isinstance(result, KeptReply):
                return result.reply
            assert isinstance(result, BaseModel)
            return Reply(status, json_bytes(result.model_dump(mode="json")).decode("ascii"))

        async def perform() -> Reply:
            result = await self._perform(op, key, actor)
            first.append(result)
            return render(result)

        try:
            kept, replayed = await self._idempotent.once(op, device_id, key, perform, render)
        except RequestIdReusedError as err:
            return self._problem(err, op, key)
        if not replayed:
            return first[0]
        return KeptReply(kept, {"Request-Id": header_text(key), REPLAYED_HEADER: "true"})

    async def _perform(
        self, op: Op, request_id: str | None, actor: AnsweredBy
    ) -> Outcome | KeptReply:
        try:
            return await self._engine.submit(op, actor)
        except DomainError as err:
            return self._problem(err, op, request_id)

    @staticmethod
    def _problem(err: DomainError, op: Op, request_id: str | None) -> KeptReply:
        session = None if isinstance(op, NewSessionOp) else op.session
        body = problem_body(err, request_id=request_id, session=session)
        headers = problem_headers(err)
        if request_id:
            headers["Request-Id"] = header_text(request_id)
        return KeptReply(Reply(status_of(err), json_bytes(body).decode("ascii")), headers)
