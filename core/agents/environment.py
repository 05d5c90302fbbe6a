"""The environment an agent process starts with: the server's, minus c2's own configuration.

Agents run third-party code with the server user's privileges; they need PATH, HOME, their
API keys and so on, but never c2's settings and secrets (`C2_DATABASE_URL` can hold a database
password). Every `C2_*` variable is withheld, including any a launch spec sets.
"""

from __future__ import annotations

from collections.abc import Mapping

PRIVATE_PREFIX = "C2_"


def agent_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without c2's own variables."""
    return {
        name: value for name, value in env.items() if not name.upper().startswith(PRIVATE_PREFIX)
    }
