"""Cluster membership as clients see it (issue 18): `GET /v1/instances`, live members only."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from c2.api.authn import ServicesDep, current_device
from c2.api.schemas import InstanceList, InstanceOut
from c2.api.scopes import needs
from c2.core.scopes import Scope
from c2.core.session import rfc3339

router = APIRouter(prefix="/v1", tags=["cluster"], dependencies=[Depends(current_device)])


@router.get("/instances", response_model=InstanceList, openapi_extra=needs(Scope.READ))
async def list_instances(services: ServicesDep) -> InstanceList:
    """The instances whose lease has not expired by the database's clock, oldest first;
    empty when this server is not a cluster member."""
    members = [] if services.membership is None else await services.membership.members()
    return InstanceList(
        instances=[
            InstanceOut(
                id=m.id,
                url=m.url,
                started_at=rfc3339(m.started_at),
                heartbeat_at=rfc3339(m.heartbeat_at),
                lease_expires_at=rfc3339(m.lease_expires_at),
            )
            for m in members
        ]
    )
