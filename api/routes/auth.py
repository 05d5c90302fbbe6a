"""Pairing, stream tickets and device management (docs/api.md §2)."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request, Response

from c2.api.authn import DeviceDep, ServicesDep, client_key
from c2.api.schemas import DeviceOut, PairRequest, PairResponse, TicketResponse
from c2.api.scopes import SELF_OR_ADMIN, needs
from c2.core.scopes import Scope, ordered
from c2.core.session import rfc3339

router = APIRouter(prefix="/v1", tags=["auth"])


@router.post(
    "/pair",
    response_model=PairResponse,
    openapi_extra={"security": []},
)
async def pair(body: PairRequest, request: Request, services: ServicesDep) -> PairResponse:
    """Redeem a one-time pairing token for a device bearer."""
    paired = await services.auth.pair(body.token, body.device_name, client_key(request))
    return PairResponse(device_id=paired.device_id, bearer=paired.bearer)


@router.post(
    "/stream-tickets",
    response_model=TicketResponse,
    openapi_extra=needs(Scope.READ),
)
async def stream_ticket(device: DeviceDep, services: ServicesDep) -> TicketResponse:
    """A single-use ticket for `GET /v1/events?ticket=` (EventSource cannot send headers)."""
    ticket = await services.auth.mint_ticket(device)
    return TicketResponse(ticket=ticket.ticket, expires_in=ticket.expires_in)


@router.get(
    "/devices",
    response_model=list[DeviceOut],
    openapi_extra=needs(Scope.ADMIN),
)
async def list_devices(_device: DeviceDep, services: ServicesDep) -> list[DeviceOut]:
    """Paired devices with their scopes, oldest first."""
    return [
        DeviceOut(
            id=d.id,
            name=d.name,
            created_at=rfc3339(d.created_at),
            last_seen=rfc3339(d.last_seen) if d.last_seen else None,
            scopes=ordered(d.scopes),
        )
        for d in await services.auth.list_devices()
    ]


@router.delete(
    "/devices/{device_id}",
    status_code=204,
    response_class=Response,
    openapi_extra=needs(SELF_OR_ADMIN),
)
async def revoke_device(
    _device: DeviceDep,
    services: ServicesDep,
    device_id: str = Path(min_length=1, max_length=64),
) -> Response:
    """Revoke a device: its bearer, unredeemed tickets and open streams end. Without the
    `admin` scope a device may revoke only itself."""
    await services.auth.revoke(device_id)
    return Response(status_code=204)
