"""Imports the ACP SDK without the field docstrings it asks pydantic for: in an agent process
that c2 itself provides (the demo agent, the tests' scripted agent), and in the server
(core/agents/factory.py).

The SDK's models set `use_attribute_docstrings`. Before Python 3.13 pydantic finds each class's
source by walking the stack through `inspect.getmodule`, which costs about 0.25 s of an agent's
0.8 s start, paid at every session creation, and half of the server's 0.43 s import of its ACP
client. Neither renders a JSON schema of the SDK's models (the agents validate and serialize, the
server speaks JSON-RPC through the SDK's connection), so the docstrings are never used. The
lookup is switched off only while the SDK's models are built. In the server that is on a worker
thread while the loop runs on; no model c2 builds meanwhile asks for attribute docstrings.

Import this module before `acp` (`# isort: split` keeps it first).
"""

from __future__ import annotations

import sys

from pydantic._internal import _fields


def _no_docstrings(cls: type, use_inspect: bool = False) -> dict[str, str]:
    return {}


_HOOK = "extract_docstrings_from_cls"  # private to pydantic: guarded below, pinned in constraints

if "acp" not in sys.modules and sys.version_info < (3, 13) and hasattr(_fields, _HOOK):
    _lookup = getattr(_fields, _HOOK)
    setattr(_fields, _HOOK, _no_docstrings)
    try:
        import acp  # noqa: F401  (builds every schema model now)
    finally:
        setattr(_fields, _HOOK, _lookup)
