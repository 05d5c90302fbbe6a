"""Webhooks (issue 15, part 3): `/v1/webhooks` and a webhook's delivery log.

Every route needs the `admin` scope. The secret is write-only: no answer echoes it. The
signing scheme receivers verify is documented in README.md ("Webhooks").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from c2.api.authn import DeviceDep, ServicesDep, current_device
from c2.api.openapi import Responses
from c2.api.scopes import needs
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
    request_id: str | None = Field(default=None, min_length=1, max_length=128)


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
    created, replayed = await services.webhooks.create(
        url=body.url,
        secret=body.secret,
        events=list(body.events),
        include_content=body.include_content,
        device_id=device.id,
        request_id=body.request_id,
    )
    headers = {"Location": f"/v1/webhooks/{created['id']}"}
    if body.request_id is not None:
        headers["Request-Id"] = body.request_id
        if replayed:
            headers["Idempotent-Replayed"] = "true"
    return JSONResponse(created, status_code=201, headers=headers)


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
