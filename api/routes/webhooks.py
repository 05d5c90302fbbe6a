"""Webhooks (issue 15, part 3): `/v1/webhooks` and a webhook's delivery log.

Every route needs the `admin` scope. The secret is write-only: no answer echoes it. The
signing scheme receivers verify is documented in README.md ("Webhooks"). A create carrying
`request_id` is answered as an op is (api/dispatch.py): its 2xx or 4xx reply is kept and
replayed (`Idempotent-Replayed: true`), every answer echoes the id (`Request-Id`, and
`request_id` in a problem).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from c2.api.authn import DeviceDep, ServicesDep, current_device
from c2.api.dispatch import REPLAYED_HEADER
from c2.api.errors import (
    PROBLEM_MEDIA_TYPE,
    header_text,
    json_bytes,
    problem_body,
    problem_response,
    status_of,
)
from c2.api.openapi import Responses
from c2.api.scopes import needs
from c2.core.errors import DomainError
from c2.core.idempotent import Reply
from c2.core.protocol.values import RequestId
from c2.core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["webhooks"], dependencies=[Depends(current_device)])
WebhookPath = Annotated[str, Path(min_length=1, max_length=64, description="Webhook id")]
EventName = Annotated[str, Field(min_length=1, max_length=64)]


class WebhookCreate(BaseModel):
    """A webhook: `events` are event names (`permission_request`, `turn_ended`, `error`, …);
    `secret` signs every delivery. `include_content` opts in to transcript content."""

    url: str = Field(min_length=1, max_length=2048, description="http(s) URL")
    events: list[EventName] = Field(min_length=1, max_length=32)
    secret: str = Field(min_length=1, max_length=512)
    include_content: bool = False
    request_id: RequestId | None = None


class WebhookPatch(BaseModel):
    """Fields to change; `{"enabled": true}` re-enables a disabled webhook."""

    url: str | None = Field(default=None, min_length=1, max_length=2048)
    events: list[EventName] | None = Field(default=None, min_length=1, max_length=32)
    secret: str | None = Field(default=None, min_length=1, max_length=512)
    include_content: bool | None = None
    enabled: bool | None = None


class WebhookOut(BaseModel):
    id: str
    url: str
    events: list[str]
    include_content: bool
    enabled: bool
    failures: int = Field(description="consecutive failed attempts (disabled at 10)")
    created_at: str


class WebhookList(BaseModel):
    kind: Literal["webhooks"]
    webhooks: list[WebhookOut]


class DeliveryOut(BaseModel):
    delivery_id: str = Field(description="the `C2-Webhook-Id` header of every attempt")
    event: str
    attempts: int
    last_status: int | None = Field(description="HTTP status of the last attempt (null: none)")
    delivered_at: str | None
    state: Literal["pending", "delivered"]


class DeliveryList(BaseModel):
    kind: Literal["webhook_deliveries"]
    webhook: str
    deliveries: list[DeliveryOut]


def _model(model: type[Any], status: int = 200) -> Responses:
    return {status: {"model": model, "description": "OK" if status == 200 else "Created"}}


@router.post(
    "/webhooks",
    status_code=201,
    responses=_model(WebhookOut, 201),
    openapi_extra=needs(Scope.ADMIN),
)
async def create_webhook(body: WebhookCreate, device: DeviceDep, services: ServicesDep) -> Any:
    """Register a webhook (201). A retry with the same `request_id` answers the first one."""
    request_id = body.request_id

    def refusal(err: DomainError) -> Reply:
        problem = problem_body(err, request_id=request_id)
        return Reply(status_of(err), json_bytes(problem).decode("ascii"))

    try:
        reply, replayed = await services.webhooks.create(
            url=body.url,
            secret=body.secret,
            events=list(body.events),
            include_content=body.include_content,
            device_id=device.id,
            request_id=request_id,
            refusal=refusal,
        )
    except DomainError as err:  # not kept (a reused request_id, the store): still correlated
        if request_id is None:
            raise
        problem = problem_body(err, request_id=request_id)
        return problem_response(err, body=problem, headers={"Request-Id": header_text(request_id)})
    headers = {"Request-Id": header_text(request_id)} if request_id is not None else {}
    if replayed:
        headers[REPLAYED_HEADER] = "true"
    if reply.status == 201:
        created = json.loads(reply.body)["id"]
        headers["Location"] = f"/v1/webhooks/{quote(created, safe='')}"
        media = "application/json"
    else:
        media = PROBLEM_MEDIA_TYPE
    return Response(reply.body.encode("utf-8"), reply.status, headers, media)


@router.get(
    "/webhooks",
    responses=_model(WebhookList),
    openapi_extra=needs(Scope.ADMIN),
)
async def list_webhooks(services: ServicesDep) -> Any:
    """Every webhook, oldest first."""
    return JSONResponse({"kind": "webhooks", "webhooks": await services.webhooks.all()})


@router.get(
    "/webhooks/{webhook_id}",
    responses=_model(WebhookOut),
    openapi_extra=needs(Scope.ADMIN),
)
async def get_webhook(webhook_id: WebhookPath, services: ServicesDep) -> Any:
    """One webhook."""
    return JSONResponse(await services.webhooks.get(webhook_id))


@router.patch(
    "/webhooks/{webhook_id}",
    responses=_model(WebhookOut),
    openapi_extra=needs(Scope.ADMIN),
)
async def update_webhook(webhook_id: WebhookPath, body: WebhookPatch, services: ServicesDep) -> Any:
    """Change a webhook; `{"enabled": true}` re-enables it and retries what is pending."""
    changes = body.model_dump(exclude_unset=True, exclude_none=True)
    return JSONResponse(await services.webhooks.update(webhook_id, changes))


@router.delete(
    "/webhooks/{webhook_id}",
    status_code=204,
    response_class=Response,
    openapi_extra=needs(Scope.ADMIN),
)
async def delete_webhook(webhook_id: WebhookPath, services: ServicesDep) -> Response:
    """Delete a webhook and its pending deliveries."""
    await services.webhooks.delete(webhook_id)
    return Response(status_code=204)


@router.get(
    "/webhooks/{webhook_id}/deliveries",
    responses=_model(DeliveryList),
    openapi_extra=needs(Scope.ADMIN),
)
async def list_webhook_deliveries(
    webhook_id: WebhookPath,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Any:
    """The webhook's deliveries, newest event first."""
    deliveries = await services.webhooks.deliveries(webhook_id, limit)
    return JSONResponse(
        {"kind": "webhook_deliveries", "webhook": webhook_id, "deliveries": deliveries}
    )
