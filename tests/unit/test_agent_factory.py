"""The agent factory's first start: the ACP client is imported on a worker thread, so the event
loop keeps serving every stream and request meanwhile (core/agents/factory.py)."""

from __future__ import annotations

from tests.loop_turns import in_fresh_interpreter

# In a fresh interpreter: in this one the client module may be imported already.
FIRST_IMPORT = """
    import asyncio
    import sys

    from c2.core.agents.factory import CLIENT_MODULE, client_module
    from tests.loop_turns import turns_during

    assert CLIENT_MODULE not in sys.modules and "acp" not in sys.modules, "imported already"


    async def main() -> None:
        module, turns = await turns_during(client_module())
        again = await client_module()
        print(turns, module.__name__, again is module)


    asyncio.run(main())
    """


def test_the_first_agent_start_imports_its_client_while_the_loop_runs():
    """While the first `client_module()` imports the ACP client (~0.2-0.5 s), other tasks on
    the loop keep running; the module comes back, and later calls return the same one. (Done on
    the loop, the import let no other task run until it was over: 0 turns.)"""
    during, name, same = in_fresh_interpreter(FIRST_IMPORT).split()
    assert int(during) > 0, "the loop ran nothing while the client was imported"
    assert (name, same) == ("c2.core.agents.client", "True")
