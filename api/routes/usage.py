"""The usage ledger and budgets (issue 15, part 2): `GET /v1/usage`, and the budgets of a
session and of a device (`PUT …/budget`).

Scopes: `GET /v1/usage` is a `read` route; both budget routes need `admin`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from c2.api.authn import ServicesDep, current_device
from c2.api.openapi import Responses
from c2.api.scopes import needs
from c2.core.protocol.values import Timestamp
from c2.core.scopes import Scope
from c2.core.usage import Budget, BudgetAction, GroupBy, parse_since

router = APIRouter(prefix="/v1", tags=["usage"], dependencies=[Depends(current_device)])
SessionPath = Annotated[str, Path(min_length=1, max_length=128, description="Session id")]
DevicePath = Annotated[str, Path(min_length=1, max_length=64, description="Device id")]


class CostOut(BaseModel):
    amount: float
    currency: str


class UsageGroup(BaseModel):
    """Sums of one key; a session's turn listing adds the turn's details."""

    model_config = ConfigDict(extra="allow")
    key: str | dict[str, str] = Field(
        description="session id, provider (new_session.provider wire form), UTC day "
        "YYYY-MM-DD, or (listing a session's turns) the turn id"
    )
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: CostOut | None


class UsageReport(BaseModel):
    kind: Literal["usage"]
    group_by: GroupBy | None
    groups: list[UsageGroup]


class BudgetBody(BaseModel):
    """A budget: crossed when usage is greater than a limit (null or absent: no limit)."""

    model_config = ConfigDict(extra="ignore")
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_tokens: int | None = Field(default=None, ge=0, le=2**62)
    action: BudgetAction


class BudgetUsedOut(BaseModel):
    cost: float
    tokens: int


class SessionBudgetOut(BaseModel):
    session: str
    max_cost: float | None
    max_tokens: int | None
    action: BudgetAction
    used: BudgetUsedOut


class DeviceBudgetOut(BaseModel):
    device: str
    max_cost: float | None
    max_tokens: int | None
    action: BudgetAction


def _model(model: type[Any]) -> Responses:
    return {200: {"model": model, "description": "OK"}}


def _budget(body: BudgetBody) -> Budget:
    return Budget(max_cost=body.max_cost, max_tokens=body.max_tokens, action=body.action)


@router.get(
    "/usage",
    responses=_model(UsageReport),
    openapi_extra=needs(Scope.READ),
)
async def get_usage(
    services: ServicesDep,
    session: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    since: Annotated[
        Timestamp | None,
        Query(max_length=64, description="RFC 3339 with an offset; filters on turn end time"),
    ] = None,
    group_by: GroupBy | None = None,
) -> JSONResponse:
    """Usage sums per session, provider or UTC day; without group_by, one session's turns."""
    report = await services.engine.usage.report(session, parse_since(since), group_by)
    return JSONResponse(report)


@router.put(
    "/sessions/{session_id}/budget",
    responses=_model(SessionBudgetOut),
    openapi_extra=needs(Scope.ADMIN),
)
async def set_session_budget(
    session_id: SessionPath, body: BudgetBody, services: ServicesDep
) -> JSONResponse:
    """Set the session's budget (replacing any); checked at once against its usage so far."""
    # 404 for unknown or deleted sessions
    return JSONResponse(await services.engine.set_session_budget(session_id, _budget(body)))


@router.put(
    "/devices/{device_id}/budget",
    responses=_model(DeviceBudgetOut),
    openapi_extra=needs(Scope.ADMIN),
)
async def set_device_budget(
    device_id: DevicePath, body: BudgetBody, services: ServicesDep
) -> JSONResponse:
    """Set a device's default budget, copied onto each session the device creates later."""
    return JSONResponse(await services.engine.usage.set_device_budget(device_id, _budget(body)))
