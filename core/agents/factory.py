"""The real `AgentFactory` (core/agents/port.py): an ACP subprocess, started on demand.

The client module (core/agents/client.py) is imported on the first agent start, not when c2
starts: it pulls in the ACP SDK, whose schema module alone costs 0.6-1 s of CPU to import, and
a server that only serves reads, or waits for its first prompt, should be ready without it.
"""

from __future__ import annotations

from c2.core.agents.port import Agent, LaunchSpec, ProcessRegistry
from c2.core.agents.updates import AgentHandler


async def start_agent(
    spec: LaunchSpec, handler: AgentHandler, registry: ProcessRegistry | None
) -> Agent:
    """Spawn and initialize the agent `spec` describes; raises AgentError when it can't."""
    from c2.core.agents.client import AgentProcess

    return await AgentProcess.start(spec, handler, registry=registry)
