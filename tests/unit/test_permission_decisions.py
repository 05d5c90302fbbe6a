"""The 27-cell permission decision (docs/protocol.md §2.1) at the cheapest level: the pure
table, and each cell through the real session handler with a scripted in-process agent
(allowed and denied asks are answered without a trace, asked ones park until answered)."""

from __future__ import annotations

from pathlib import Path

import pytest

from c2.core.permissions import Decision, automatic_answer, decide
from c2.core.protocol.ops import AnswerPermissionOp, SetExecutionPolicyOp
from c2.core.protocol.values import ExecutionPolicy, PermissionMode, SandboxPolicy, StopReason
from tests.unit.fake_agent import FakeAgent, FakeAgents, running

KINDS = {"read": "read", "mutating": "edit", "unknown": "other"}
# Mode × sandbox → the decision per kind class (read, mutating, unknown): A allow, D deny, ? ask.
TABLE = {
    ("ask", "read_only"): "?DD",
    ("ask", "workspace_write"): "??D",
    ("ask", "danger_full_access"): "???",
    ("accept_edits", "read_only"): "?DD",
    ("accept_edits", "workspace_write"): "?AD",
    ("accept_edits", "danger_full_access"): "?A?",
    ("yolo", "read_only"): "ADD",
    ("yolo", "workspace_write"): "AAD",
    ("yolo", "danger_full_access"): "AAA",
}
LETTER = {Decision.ALLOW: "A", Decision.DENY: "D", Decision.ASK: "?"}
CELLS = [
    (mode, sandbox, kind, TABLE[(mode, sandbox)][i])
    for (mode, sandbox) in TABLE
    for i, kind in enumerate(KINDS.values())
]


def test_the_table_has_27_cells() -> None:
    """Every mode × sandbox × kind class is listed once."""
    assert len(CELLS) == 27 and len(set(CELLS)) == 27


@pytest.mark.parametrize(("mode", "sandbox", "kind", "expected"), CELLS)
def test_decide_every_cell(mode: str, sandbox: str, kind: str, expected: str) -> None:
    """decide() answers each cell as the table says."""
    policy = ExecutionPolicy(mode=PermissionMode(mode), sandbox=SandboxPolicy(sandbox))
    assert LETTER[decide(policy, kind)] == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("search", "?A"),
        ("fetch", "?A"),
        ("think", "?A"),
        ("delete", "AD"),
        ("move", "AD"),
        ("execute", "?D"),
        ("switch_mode", "?D"),
        (None, "?D"),
    ],
)
def test_kind_classes(kind: str | None, expected: str) -> None:
    """The other kinds follow their class (under accept_edits with full access, then yolo
    read-only): execute is mutating but no edit, and a missing kind is unknown."""
    edits = ExecutionPolicy(
        mode=PermissionMode.ACCEPT_EDITS, sandbox=SandboxPolicy.DANGER_FULL_ACCESS
    )
    reads = ExecutionPolicy(mode=PermissionMode.YOLO, sandbox=SandboxPolicy.READ_ONLY)
    assert LETTER[decide(edits, kind)] + LETTER[decide(reads, kind)] == expected


def test_automatic_answers_are_one_shot() -> None:
    """An automatic allow picks allow_once, never allow_always; a deny prefers reject_once,
    else reject_always; with nothing fitting there is no automatic answer."""
    always = [("a", "Always", "allow_always"), ("r", "Reject all", "reject_always")]
    assert automatic_answer(Decision.ALLOW, always) is None
    assert automatic_answer(Decision.DENY, always) == "r"
    both = [("o", "Once", "allow_once"), ("ro", "No", "reject_once"), *always]
    assert automatic_answer(Decision.ALLOW, both) == "o"
    assert automatic_answer(Decision.DENY, both) == "ro"


async def test_every_cell_through_the_session_handler(tmp_path: Path) -> None:
    """Each cell as a real turn with an in-process agent: an allowed ask is answered `allow`
    and a denied one `reject` without a permission_request; an asked one parks, and the
    client's answer reaches the agent."""
    answers: list[str | None] = []

    async def ask_once(agent: FakeAgent, text: str) -> StopReason:
        answers.append(await agent.ask(text))
        return StopReason.END_TURN

    async with running(tmp_path, FakeAgents(script=ask_once)) as h:
        sid = await h.new_session()
        for mode, sandbox, kind, expected in CELLS:
            policy = SetExecutionPolicyOp(
                session=sid, mode=PermissionMode(mode), sandbox=SandboxPolicy(sandbox)
            )
            await h.engine.submit(policy)
            start = len(h.events)
            await h.prompt(sid, kind)
            if expected == "?":
                parked = await h.until("permission_request", after=start)
                answer = AnswerPermissionOp(
                    session=sid, request_id=parked["request_id"], option_id="allow"
                )
                await h.engine.submit(answer)
            await h.until("turn_ended", after=start)
            turn = h.events[start:]
            cell = (mode, sandbox, kind)
            assert any(e["event"] == "permission_request" for e in turn) == (expected == "?"), cell
            assert answers[-1] == ("reject" if expected == "D" else "allow"), cell
        assert len(answers) == 27
