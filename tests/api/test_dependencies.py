"""Every route's endpoint and dependencies run on the event loop, none in FastAPI's thread
pool: a plain `def` there costs two thread hops per request, and under agent load each hop
waited seconds for the GIL (docs/decisions.md, "thirteenth slice")."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from c2.api.app import create_app
from tests.conftest import make_settings


def _calls(dependant: Dependant) -> Iterator[Dependant]:
    """`dependant` and everything it depends on, depth first."""
    yield dependant
    for sub in dependant.dependencies:
        yield from _calls(sub)


def _on_the_loop(call: Any) -> bool:
    """Whether FastAPI awaits `call` on the loop: a coroutine or async generator function, or
    an instance whose `__call__` is one. A class, or anything else, goes to the thread pool."""
    if inspect.isclass(call):
        return False
    if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call):
        return True
    dunder = getattr(call, "__call__", None)  # noqa: B004 (what FastAPI looks at)
    return inspect.iscoroutinefunction(dunder) or inspect.isasyncgenfunction(dunder)


def _routes(app: FastAPI) -> Iterator[Any]:
    """Each API route as served, with the dependencies its router was included with (each
    has `path` and `dependant`)."""
    for route in app.routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "effective_route_contexts"):  # an included router (FastAPI 0.16x)
            yield from route.effective_route_contexts()


def test_no_route_runs_its_endpoint_or_a_dependency_in_the_thread_pool(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path))
    routes = list(_routes(app))
    assert len(routes) > 50  # the whole API, not an empty list passing vacuously
    threaded = sorted(
        {
            f"{route.path}: {getattr(dep.call, '__qualname__', dep.call)}"
            for route in routes
            for dep in _calls(route.dependant)
            if dep.call is not None and not _on_the_loop(dep.call)
        }
    )
    assert threaded == []
