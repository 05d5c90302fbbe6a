"""Imports the ACP SDK for an agent process that c2 itself provides (the demo agent, the tests'
scripted agent), without the field docstrings the SDK asks pydantic for.

The SDK's models set `use_attribute_docstrings`. Before Python 3.13 pydantic finds each class's
source by walking the stack through `inspect.getmodule`, which costs about 0.25 s of an agent's
0.8 s start, paid at every session creation. These agents only validate and serialize; nothing
in them ever renders a JSON schema, so the docstrings are never used. The lookup is switched off
only while the SDK's models are built; the server imports the SDK as it is
(core/agents/factory.py).

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
