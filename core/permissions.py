"""Execution-policy decisions for ACP permission requests (original-behaviour §2.1–2.2).

The sandbox axis is a ceiling on *which tool kinds may be approved*: permission mediation,
not OS isolation. The agent process itself runs with the server user's rights.
"""

from __future__ import annotations

from enum import StrEnum

from core.protocol import ExecutionPolicy, PermissionMode, SandboxPolicy

READ_KINDS = frozenset({"read", "search", "fetch", "think"})
MUTATING_KINDS = frozenset({"edit", "delete", "move", "execute", "switch_mode"})
EDIT_KINDS = frozenset({"edit", "delete", "move"})


class Decision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


def kind_class(kind: str | None) -> str:
    """`read`, `mutating` or `unknown` (a missing kind is unknown)."""
    if kind in READ_KINDS:
        return "read"
    if kind in MUTATING_KINDS:
        return "mutating"
    return "unknown"


def decide(policy: ExecutionPolicy, kind: str | None) -> Decision:
    """The ceiling vetoes first, then the mode decides (original-behaviour §2.1)."""
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


def automatic_answer(decision: Decision, options: list[tuple[str, str, str]]) -> str | None:
    """The agent's first option of the decided kind; None (cancelled) when it offers none."""
    prefix = "allow" if decision is Decision.ALLOW else "reject"
    for option_id, _name, kind in options:
        if kind.startswith(prefix):
            return option_id
    return None
