"""The real `AgentFactory` (core/agents/port.py): an ACP subprocess, started on demand.

The client module (core/agents/client.py) is imported on the first agent start, not when c2
starts: it pulls in the ACP SDK, whose schema module costs ~0.2 s of CPU to import even without
its field docstrings (core/agents/lean_sdk.py) and ~10 MB, and a server that only serves reads,
or waits for its first prompt, should be ready without it (and under 100 MB idle). That import
runs on a worker thread: on the event loop it held every stream and request for as long
(0.5 s, bench/startup.py), at the first prompt after each start.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable
from functools import partial
from types import ModuleType

from c2.core.agents.pipes import PipeTicker
from c2.core.agents.port import Agent, AgentFactory, LaunchSpec, ProcessRegistry
from c2.core.agents.updates import AgentHandler

CLIENT_MODULE = "c2.core.agents.client"


def _import_client() -> ModuleType:
    # The server speaks ACP's JSON-RPC through the SDK's connection and never renders the
    # SDK's models' schemas, so it needs their field docstrings no more than c2's own agents.
    import c2.core.agents.lean_sdk  # noqa: F401  (before the SDK: see there)

    return importlib.import_module(CLIENT_MODULE)


async def client_module() -> ModuleType:
    """core/agents/client.py, imported off the event loop the first time (module docstring).
    Two first starts at once both wait for the one import (Python's per-module lock)."""
    module = sys.modules.get(CLIENT_MODULE)
    if module is None:
        module = await asyncio.to_thread(_import_client)
    return module


async def start_agent(
    spec: LaunchSpec,
    handler: AgentHandler,
    registry: ProcessRegistry | None,
    *,
    pipes: PipeTicker | None = None,
) -> Agent:
    """Spawn and initialize the agent `spec` describes; raises AgentError when it can't.
    With `pipes`, a trickling agent's stdout is read on that tick (core/agents/pipes.py)."""
    client = await client_module()
    agent: Agent = await client.AgentProcess.start(spec, handler, registry=registry, pipes=pipes)
    return agent


def paced_agent_factory(commit_interval: float, commit: Callable[[], None]) -> AgentFactory:
    """`start_agent` with trickling agents' stdout read on a tick under load (every two commit
    intervals: under load the reads and the commits they make come half as often), `commit`
    called after each tick that read (core/agents/pipes.py); every read on readiness when the
    store commits at once (`0`)."""
    if commit_interval <= 0:
        return start_agent
    return partial(start_agent, pipes=PipeTicker(2 * commit_interval, commit))
