"""What c2's own git commands never take from a project's git config.

c2 runs git for checkpoints, diffs, rewinds and worktrees on requests any device may send
(a read-only one reads diffs). A project is untrusted content (docs/security.md): its
`.git/config` may name programs git then runs, as the user running c2 and outside any agent
sandbox. These settings switch those off for c2's commands only, at command-line strength
(`GIT_CONFIG_*`), so GitPython's calls get them as the plumbing does; agents' own git keeps
the user's hooks.
"""

from __future__ import annotations

NEUTRAL_SETTINGS = {
    "core.fsmonitor": "false",  # a program run on every status-like command (add, diff)
    "core.hooksPath": "/dev/null",  # hooks (post-checkout on `worktree add`, ...)
}


def neutral_git_env() -> dict[str, str]:
    """Environment entries that apply `NEUTRAL_SETTINGS` to a git command."""
    env = {"GIT_CONFIG_COUNT": str(len(NEUTRAL_SETTINGS))}
    for i, (key, value) in enumerate(NEUTRAL_SETTINGS.items()):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env
