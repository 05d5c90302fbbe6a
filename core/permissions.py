"""Execution-policy decisions for ACP permission requests (docs/protocol.md §2.1–2.2).

The sandbox axis is a ceiling on *which tool kinds may be approved*: permission mediation,
not OS isolation. The agent process itself runs with the server user's rights.
"""

from __future__ import annotations

from enum import StrEnum

from c2.core.protocol.values import ExecutionPolicy, PermissionMode, SandboxPolicy

READ_KINDS = frozenset({"read", "search", "fetch", "think"})
MUTATING_KINDS = frozenset({"edit", "delete", "move", "execute", "switch_mode"})
EDIT_KINDS = frozenset({"edit", "delete", "move"})


class Decision(StrEnum):
    """What the policy makes of a permission request."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


# Agent session modes in which the agent acts without asking, by the mode ids agents use, with
# the tool kinds it then does unasked (None: every kind). c2 applies its policy only to what an
# agent asks, so such a mode is allowed only where the policy would allow the same unasked.
UNASKED_IN_MODE: dict[str, frozenset[str] | None] = {
    "acceptEdits": EDIT_KINDS,  # Claude Code: file edits
    "bypassPermissions": None,  # Claude Code: everything
    "yolo": None,  # Qwen Code and others: everything
    "full-access": None,  # Codex: everything, outside its sandbox too
}


def mode_exceeds(mode_id: str, policy: ExecutionPolicy) -> bool:
    """Whether agent mode `mode_id` would let the agent do unasked what `policy` does not
    allow unasked (an unknown mode is taken to ask as the agent normally does)."""
    if mode_id not in UNASKED_IN_MODE:
        return False
    kinds = UNASKED_IN_MODE[mode_id]
    every = [*READ_KINDS, *MUTATING_KINDS, None]  # None: a request naming no kind
    return any(decide(policy, kind) is not Decision.ALLOW for kind in kinds or every)


def kind_class(kind: str | None) -> str:
    """`read`, `mutating` or `unknown` (a missing kind is unknown)."""
    if kind in READ_KINDS:
        return "read"
    if kind in MUTATING_KINDS:
        return "mutating"
    return "unknown"


def decide(policy: ExecutionPolicy, kind: str | None) -> Decision:
    """The ceiling vetoes first, then the mode decides (docs/protocol.md §2.1)."""
    cls = kind_class(kind)
    if policy.sandbox is SandboxPolicy.READ_ONLY and cls != "read":
        return Decision.DENY
    if policy.sandbox is SandboxPolicy.WORKSPACE_WRITE and cls == "unknown":
        return Decision.DENY
    if policy.mode is PermissionMode.YOLO:
        return Decision.ALLOW
    if policy.mode is PermissionMode.ACCEPT_EDITS and kind in EDIT_KINDS:
        return Decision.ALLOW
    return Decision.ASK


# Automatic answers are one-shot: an `allow_always` would leave a rule inside the agent that
# outlives the policy that chose it (issue 10). Rejecting always is no grant, so it may stand in.
_AUTOMATIC_KINDS: dict[Decision, tuple[str, ...]] = {
    Decision.ALLOW: ("allow_once",),
    Decision.DENY: ("reject_once", "reject_always"),
}
_MODE_RANK = {PermissionMode.ASK: 0, PermissionMode.ACCEPT_EDITS: 1, PermissionMode.YOLO: 2}
_SANDBOX_RANK = {
    SandboxPolicy.READ_ONLY: 0,
    SandboxPolicy.WORKSPACE_WRITE: 1,
    SandboxPolicy.DANGER_FULL_ACCESS: 2,
}


def automatic_answer(decision: Decision, options: list[tuple[str, str, str]]) -> str | None:
    """The option an automatic `decision` picks, by ACP kind: `allow_once`; `reject_once`,
    else `reject_always`. None when the agent offers none of them (an allow then asks the
    user instead; a deny answers cancelled)."""
    for wanted in _AUTOMATIC_KINDS.get(decision, ()):
        for option_id, _name, kind in options:
            if kind == wanted:
                return option_id
    return None


def grants_standing_permission(option_id: str | None, options: list[tuple[str, str, str]]) -> bool:
    """True when the chosen option leaves a rule inside the agent (`allow_always`)."""
    return any(oid == option_id and kind == "allow_always" for oid, _name, kind in options)


def is_stricter(before: ExecutionPolicy, after: ExecutionPolicy) -> bool:
    """True when `after` allows less than `before` on either axis."""
    return (
        _MODE_RANK[after.mode] < _MODE_RANK[before.mode]
        or _SANDBOX_RANK[after.sandbox] < _SANDBOX_RANK[before.sandbox]
    )
