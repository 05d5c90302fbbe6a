"""Request dependencies: the app's Services and the authenticated device (docs/api.md §2).

Every /v1 route except `POST /v1/pair` depends on `current_device`; the SSE route also takes
a single-use `?ticket=` because EventSource cannot send headers. Credentials are verified by
api.guard.RequestGuard before the route runs; `current_device` picks up its verdict.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from c2.api.errors import RequestInvalidError
from c2.api.guard import DEVICE_KEY
from c2.api.services import Services
from c2.core.devices import Device
from c2.core.errors import UnauthorizedError

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="Device bearer from `POST /v1/pair` or `c2 pair`.",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]


# Dependencies are `async def` even when they never await: FastAPI runs a plain `def` one in
# its thread pool, two thread hops per dependency per request. Under agent load each hop waits
# for the GIL behind the loop and the store's writer, and a request sat there for seconds
# (docs/decisions.md, "thirteenth slice"); tests/api/test_dependencies.py keeps them so.


async def get_services(request: Request) -> Services:
    """The app's Services."""
    return cast(Services, request.app.state.services)


ServicesDep = Annotated[Services, Depends(get_services)]


async def current_device(
    request: Request, services: ServicesDep, credentials: Credentials
) -> Device:
    """The device whose bearer (or, for the stream, ticket) authorizes this request, as
    verified by the RequestGuard before the body was read; 401 problem otherwise."""
    verified = request.scope.get("state", {}).get(DEVICE_KEY)
    if isinstance(verified, Device):
        return verified
    if credentials is None or not credentials.credentials:
        raise UnauthorizedError("an `Authorization: Bearer <bearer>` header is required")
    return await services.auth.authenticate(credentials.credentials)


DeviceDep = Annotated[Device, Depends(current_device)]


async def single_valued_query(request: Request) -> None:
    """No route takes a list in its query: a repeated key is a 422, never last-one-wins."""
    keys = [key for key, _ in request.query_params.multi_items()]
    if len(keys) != len(set(keys)):
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        raise RequestInvalidError(f"query parameter(s) given more than once: {', '.join(repeated)}")


def client_key(request: Request) -> str:
    """The peer address attempts are counted against."""
    return request.client.host if request.client else "unknown"
