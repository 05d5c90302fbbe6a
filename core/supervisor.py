"""Owns background tasks: every task is named, kept, logged on failure and cancelled on close.

No fire-and-forget `create_task` anywhere in the core: a task whose reference is dropped can
be garbage-collected mid-flight and its exception is lost (docs/architecture.md: Async).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Supervisor:
    """A named set of owned tasks: spawned here, logged if they fail, cancelled on close."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run `coro` as a supervised task named `name`."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s task %s failed", self.name, task.get_name(), exc_info=task.exception())

    async def close(self) -> None:
        """Cancel every task still running and wait for them to unwind."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
