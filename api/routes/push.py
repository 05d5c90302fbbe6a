"""Web Push (issue 15, part 3): the VAPID public key and per-device push subscriptions.

All three routes need the `read` scope: a phone paired `read,approve` subscribes itself, and
a notification says no more than that device could read anyway.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from c2.api.authn import DeviceDep, ServicesDep, current_device
from c2.api.openapi import Responses
from c2.api.scopes import needs
from c2.core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["push"], dependencies=[Depends(current_device)])
SubscriptionPath = Annotated[
    str, Path(min_length=1, max_length=64, description="Push subscription id")
]


class VapidKey(BaseModel):
    public_key: str = Field(description="applicationServerKey for pushManager.subscribe, base64url")


class PushKeys(BaseModel):
    model_config = ConfigDict(extra="ignore")
    p256dh: str = Field(min_length=1, max_length=200)
    auth: str = Field(min_length=1, max_length=100)


class PushSubscriptionIn(BaseModel):
    """`PushSubscription.toJSON()` as the browser gives it."""

    model_config = ConfigDict(extra="ignore")
    endpoint: str = Field(min_length=1, max_length=2048)
    expirationTime: float | None = None  # noqa: N815 - the browser's own field name
    keys: PushKeys


class PushSubscriptionOut(BaseModel):
    kind: Literal["push_subscription"]
    id: str = Field(description="for DELETE /v1/push-subscriptions/{id}")
    endpoint: str
    device_id: str


def _model(model: type[Any], status: int = 200) -> Responses:
    return {status: {"model": model, "description": "OK" if status == 200 else "Created"}}


@router.get(
    "/push/vapid-public-key",
    responses=_model(VapidKey),
    openapi_extra=needs(Scope.READ),
)
async def get_vapid_public_key(services: ServicesDep) -> Any:
    """The server's VAPID public key (the web client subscribes with it)."""
    return JSONResponse({"public_key": await services.push.public_key()})


@router.post(
    "/push-subscriptions",
    status_code=201,
    responses=_model(PushSubscriptionOut, 201),
    openapi_extra=needs(Scope.READ),
)
async def create_push_subscription(
    body: PushSubscriptionIn, device: DeviceDep, services: ServicesDep
) -> Any:
    """Subscribe this device's browser (idempotent: the same endpoint replaces its keys); the
    201's `Location` is the subscription's own URL (the one its DELETE takes)."""
    created = await services.push.subscribe(device.id, body.model_dump())
    location = f"/v1/push-subscriptions/{quote(created['id'], safe='')}"
    return JSONResponse(
        {"kind": "push_subscription", **created}, status_code=201, headers={"Location": location}
    )


class PushSubscriptionList(BaseModel):
    kind: Literal["push_subscriptions"]
    subscriptions: list[PushSubscriptionOut]


@router.get(
    "/push-subscriptions",
    responses=_model(PushSubscriptionList),
    openapi_extra=needs(Scope.READ),
)
async def list_push_subscriptions(device: DeviceDep, services: ServicesDep) -> Any:
    """This device's push subscriptions."""
    subs = await services.push.subscriptions(device.id)
    items = [{"kind": "push_subscription", **sub} for sub in subs]
    return JSONResponse({"kind": "push_subscriptions", "subscriptions": items})


@router.delete(
    "/push-subscriptions/{subscription_id}",
    status_code=204,
    response_class=Response,
    openapi_extra=needs(Scope.READ),
)
async def delete_push_subscription(
    subscription_id: SubscriptionPath, device: DeviceDep, services: ServicesDep
) -> Response:
    """Unsubscribe (a device removes its own; an `admin` device any)."""
    owner = None if Scope.ADMIN in device.scopes else device.id
    await services.push.unsubscribe(subscription_id, owner)
    return Response(status_code=204)
