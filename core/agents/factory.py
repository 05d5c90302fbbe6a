"""The real `AgentFactory` (core/agents/port.py): an ACP subprocess, started on demand.

The client module (core/agents/client.py) is imported on the first agent start, not when c2
starts: it pulls in the ACP SDK, whose schema module alone costs 0.6-1 s of CPU to import, and
a server that only serves reads, or waits for its first prompt, should be ready without it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from c2.core.agents.pipes import PipeTicker
from c2.core.agents.port import Agent, AgentFactory, LaunchSpec, ProcessRegistry
from c2.core.agents.updates import AgentHandler


async def start_agent(
    spec: LaunchSpec,
    handler: AgentHandler,
    registry: ProcessRegistry | None,
    *,
    pipes: PipeTicker | None = None,
) -> Agent:
    """Spawn and initialize the agent `spec` describes; raises AgentError when it can't.
    With `pipes`, a trickling agent's stdout is read on that tick (core/agents/pipes.py)."""
    from c2.core.agents.client import AgentProcess

    return await AgentProcess.start(spec, handler, registry=registry, pipes=pipes)


def paced_agent_factory(commit_interval: float, commit: Callable[[], None]) -> AgentFactory:
    """`start_agent` with trickling agents' stdout read on a tick under load (every two commit
    intervals: under load the reads and the commits they make come half as often), `commit`
    called after each tick that read (core/agents/pipes.py); every read on readiness when the
    store commits at once (`0`)."""
    if commit_interval <= 0:
        return start_agent
    return partial(start_agent, pipes=PipeTicker(2 * commit_interval, commit))
