"""How many turns the event loop gave another task while an awaitable ran: 0 when the work was
done on the loop (it held every stream and request meanwhile), more when it let the loop run
(a worker thread)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Awaitable
from typing import TypeVar

from tests.e2e.harness import REPO

T = TypeVar("T")


async def turns_during(awaitable: Awaitable[T]) -> tuple[T, int]:
    """`awaitable`'s result, and how often a task that only yields ran while it was awaited."""
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker's first turn, before the count starts
    before = turns
    try:
        result = await awaitable
        return result, turns - before
    finally:
        task.cancel()


def in_fresh_interpreter(script: str) -> str:
    """Run `script` (Python, from the repository's root) in a new interpreter, where nothing
    it imports lazily is loaded yet; its stdout. Fails with its stderr if it fails."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
