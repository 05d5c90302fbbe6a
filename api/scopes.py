"""Which scope each route needs, declared where the route is defined, enforced by the guard.

A route declares its scope with `openapi_extra=needs(Scope.X)` (or `SELF_OR_ADMIN`,
`PER_OP`), so the requirement is part of the route and of the OpenAPI document
(`x-c2-scope`), from which the tests generate a 403 check for every route. The RequestGuard
calls `required_scope` after authenticating and before the route sees a body byte:
a device outside the scope is a 403 `insufficient_scope` before any validation or lookup.
A /v1 route that declares nothing is refused to every device (fail closed).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import APIRouter
from starlette.routing import Match, Route
from starlette.types import Scope as AsgiScope

from c2.core.devices import Device
from c2.core.errors import InsufficientScopeError
from c2.core.scopes import Scope, ordered

SCOPE_KEY = "x-c2-scope"
# `DELETE /v1/devices/{device_id}`: any device may revoke itself; others need `admin`.
SELF_OR_ADMIN = "self_or_admin"
# `POST /v1/ops`: the scope of the op the body names (each op's scope is its resource
# route's, listed on the route as `x-c2-op-scopes`).
PER_OP = "per_op"
OP_SCOPES_KEY = "x-c2-op-scopes"
OP_DEFAULT = Scope.OPERATE  # a body whose op cannot be named
PER_OP_SCOPES = frozenset({Scope.APPROVE, Scope.OPERATE})


def needs(scope: Scope | str, op_scopes: Mapping[str, Scope] | None = None) -> dict[str, Any]:
    """The `openapi_extra` of a route that needs `scope` (or SELF_OR_ADMIN / PER_OP; the
    latter with `op_scopes`, the scope of each op by its tag, which it also documents)."""
    if scope == PER_OP:
        assert op_scopes is not None, "a PER_OP route lists the scope of each op"
        return {SCOPE_KEY: PER_OP, OP_SCOPES_KEY: {op: str(s) for op, s in op_scopes.items()}}
    return {SCOPE_KEY: str(scope)}


def _extra(route: Any) -> dict[str, Any]:
    return getattr(route, "openapi_extra", None) or {}


def declared(route: Any) -> str | None:
    """The scope a route declares, None when it declares none."""
    value = _extra(route).get(SCOPE_KEY)
    return str(value) if value is not None else None


class ScopeTable:
    """The routes of the app's routers, for the guard to find the one a request will reach.

    Built by create_app from the very routers it includes."""

    def __init__(self, routers: Iterable[APIRouter]) -> None:
        self.routes: list[Route] = [
            route for router in routers for route in router.routes if isinstance(route, Route)
        ]

    def match(self, scope: AsgiScope) -> tuple[Route | None, dict[str, Any]]:
        """The route this request fully matches (path and method) and its path parameters."""
        for route in self.routes:
            matched, child = route.matches(scope)
            if matched is Match.FULL:
                return route, dict(child.get("path_params", {}))
        return None, {}


def op_scope(body: bytes, op_scopes: Mapping[str, str]) -> str:
    """The scope of the op a `POST /v1/ops` body names (the tag only; nothing validated)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # nested too deep: the route's parse says 422
        return OP_DEFAULT
    tag = parsed.get("op") if isinstance(parsed, dict) else None
    return op_scopes.get(tag, OP_DEFAULT) if isinstance(tag, str) else OP_DEFAULT


def _refuse(device: Device, need: str) -> InsufficientScopeError:
    held = ", ".join(ordered(device.scopes)) or "none"
    return InsufficientScopeError(f"this route needs the `{need}` scope (the device has: {held})")


def check_route(device: Device, scope: AsgiScope) -> Mapping[str, str] | None:
    """Raise InsufficientScopeError unless `device` may call the matched route. When the
    scope depends on the body (PER_OP and the device holds some op scope), the scope of each
    op: call `check_op` with them."""
    table: ScopeTable = scope["app"].state.scope_table
    route, params = table.match(scope)
    if route is None:
        # A 404 or 405 follows, which reveals nothing and runs nothing. (A route served but
        # missing from the table would pass here: the OpenAPI-generated tests catch it.)
        return None
    need = declared(route)
    if need == PER_OP:
        if not device.scopes & PER_OP_SCOPES:
            raise _refuse(device, OP_DEFAULT)
        op_scopes: Mapping[str, str] = _extra(route)[OP_SCOPES_KEY]
        return op_scopes
    if need == SELF_OR_ADMIN:
        if Scope.ADMIN in device.scopes or params.get("device_id") == device.id:
            return None
        raise _refuse(device, Scope.ADMIN)
    if need is None:
        raise InsufficientScopeError("this route declares no scope: it is refused to every device")
    if need not in device.scopes:
        raise _refuse(device, need)
    return None


def check_op(device: Device, body: bytes, op_scopes: Mapping[str, str]) -> None:
    """Raise InsufficientScopeError unless `device` holds the scope of the op in `body`."""
    need = op_scope(body, op_scopes)
    if need not in device.scopes:
        raise _refuse(device, need)
