"""Turn, permission parking, settings and capacity logic of the real engine, driven through
core's agent seam by scripted in-process agents (no subprocess; the e2e tests are the
contract for the real ACP client)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from c2.core.agents.updates import AgentError
from c2.core.errors import (
    CapacityError,
    OperationFailedError,
    PermissionNotPendingError,
    SessionNotFoundError,
    TurnAlreadyRunningError,
    UnknownModeError,
    UnknownModelError,
)
from c2.core.outcomes import PromptAccepted
from c2.core.protocol.ops import (
    AnswerPermissionOp,
    CancelOp,
    SetConfigOptionOp,
    SetExecutionPolicyOp,
    SetModelOp,
    SetModeOp,
)
from c2.core.protocol.state import ModeChoice, ModelChoice, ModelsState, ModesState
from c2.core.protocol.values import PermissionMode, SandboxPolicy, StopReason
from tests.unit.fake_agent import FakeAgent, FakeAgents, running

MODELS = ModelsState(
    available=[ModelChoice(id="small", name="Small"), ModelChoice(id="large", name="Large")],
    current="small",
)
MODES = ModesState(
    available=[ModeChoice(id="code", name="Code"), ModeChoice(id="plan", name="Plan")],
    current="code",
)


async def test_a_turn_commits_prompt_text_and_end_in_order(tmp_path: Path) -> None:
    """A prompt is accepted with its transcript seq; running, the automatic title,
    turn_started, the agent's text, then idle and turn_ended, each activity revision one more
    than the last."""
    async with running(tmp_path, FakeAgents()) as h:
        sid = await h.new_session()
        start = len(h.events)
        accepted = await h.prompt(sid, "hello", request_id="p1")
        assert isinstance(accepted, PromptAccepted) and accepted.request_id == "p1"
        await h.until("turn_ended", after=start)
        kinds = [e["event"] for e in h.events[start:]]
        assert kinds == [
            "session_activity_changed",
            "session_title_changed",
            "turn_started",
            "agent_text",
            "session_activity_changed",
            "turn_ended",
        ]
        started = h.of("turn_started", sid)[-1]
        assert started["request_id"] == "p1"
        assert started["transcript_seq"] == accepted.transcript_seq
        assert h.of("agent_text", sid)[-1]["text"] == "hello"
        revisions = [e["activity"]["revision"] for e in h.of("session_activity_changed", sid)]
        assert revisions == list(range(revisions[0], revisions[0] + len(revisions)))
        assert h.of("session_activity_changed", sid)[-1]["activity"]["state"]["kind"] == "idle"
        assert h.agents.last.calls[-1][0] == "prompt"


async def test_a_second_prompt_while_running_is_refused(tmp_path: Path) -> None:
    """One turn per session: a prompt during a turn is turn_already_running, non-terminal."""
    release = asyncio.Event()

    async def slow(agent: FakeAgent, text: str) -> StopReason:
        await release.wait()
        return StopReason.END_TURN

    async with running(tmp_path, FakeAgents(script=slow)) as h:
        sid = await h.new_session()
        await h.prompt(sid, "first")
        with pytest.raises(TurnAlreadyRunningError):
            await h.prompt(sid, "second", request_id="p2")
        refused = await h.until("error")
        assert refused["terminal"] is False and refused["request_id"] == "p2"
        release.set()
        await h.until("turn_ended")


async def test_cancel_answers_parked_permission_then_tells_the_agent(tmp_path: Path) -> None:
    """Cancel drains what is parked (answered cancelled, by c2) before session/cancel; the
    turn ends with the agent's `cancelled`."""
    answers: list[str | None] = []

    async def ask_then_stop(agent: FakeAgent, text: str) -> StopReason:
        answers.append(await agent.ask("execute"))
        await agent.cancelled.wait()
        return StopReason.CANCELLED

    async with running(tmp_path, FakeAgents(script=ask_then_stop)) as h:
        sid = await h.new_session()
        await h.prompt(sid, "run it")
        await h.until("permission_request")
        await h.engine.submit(CancelOp(session=sid))
        ended = await h.until("turn_ended")
        assert ended["stop_reason"] == "cancelled"
        assert answers == [None]
        resolved = h.of("permission_resolved", sid)[-1]
        assert resolved["option_id"] is None and resolved["answered_by"] is None
        assert [c[0] for c in h.agents.last.calls][-2:] == ["prompt", "cancel"]


async def test_an_answer_for_nothing_parked_is_refused(tmp_path: Path) -> None:
    """Answering a permission that is not pending raises, and the turn is untouched."""
    async with running(tmp_path, FakeAgents()) as h:
        sid = await h.new_session()
        with pytest.raises(PermissionNotPendingError):
            await h.engine.submit(AnswerPermissionOp(session=sid, request_id="nope"))


async def test_an_agent_failure_fails_the_turn(tmp_path: Path) -> None:
    """An AgentError during the prompt ends the turn failed/provider_error with one terminal
    error carrying the agent's words and the prompt's request_id (never turn_ended)."""

    async def broken(agent: FakeAgent, text: str) -> StopReason:
        if text == "go":
            await agent.say("partial")
            raise AgentError("prompt failed: boom", stderr_tail="trace")
        return StopReason.END_TURN

    async with running(tmp_path, FakeAgents(script=broken)) as h:
        sid = await h.new_session()
        turn = await h.turn(sid, "go")
        errors = [e for e in turn if e["event"] == "error"]
        assert len(errors) == 1 and errors[0]["terminal"] is True
        assert errors[0]["message"] == "prompt failed: boom"
        assert errors[0]["stderr_tail"] == "trace"
        assert not any(e["event"] == "turn_ended" for e in turn)
        state = h.of("session_activity_changed", sid)[-1]["activity"]["state"]
        assert state["kind"] == "failed" and state["reason"] == "provider_error"
        # The next prompt runs normally on the same session.
        assert [e["event"] for e in await h.turn(sid, "again")][-1] == "turn_ended"


async def test_set_model_validates_and_applies_live(tmp_path: Path) -> None:
    """A model the agent did not offer is refused; an offered one is sent to the live agent
    (session/set_model), persisted and announced as `models`."""
    async with running(tmp_path, FakeAgents(models=MODELS)) as h:
        sid = await h.new_session()
        with pytest.raises(UnknownModelError):
            await h.engine.submit(SetModelOp(session=sid, model="huge"))
        result = await h.engine.submit(SetModelOp(session=sid, model="large"))
        assert result.current == "large"  # type: ignore[union-attr]
        assert h.agents.last.calls[-1][0] == "set_model"
        assert h.agents.last.calls[-1][2] == "large"
        assert h.of("models", sid)[-1]["current"] == "large"
        assert (await h.engine.get_session(sid)).model == "large"


async def test_set_mode_applies_live_and_set_config_needs_an_agent(tmp_path: Path) -> None:
    """A mode switch reaches the live agent and is announced; a config option can't be set
    once the session's agent is gone (it applies only live)."""
    async with running(tmp_path, FakeAgents(modes=MODES)) as h:
        sid = await h.new_session()
        await h.engine.submit(SetModeOp(session=sid, mode_id="plan"))
        assert h.agents.last.calls[-1] == ("set_mode", "acp-1-1", "plan")
        assert h.of("modes", sid)[-1]["current"] == "plan"
        live = h.engine.live.get(sid)
        assert live is not None
        await h.engine.live.close(live)
        with pytest.raises(OperationFailedError):
            await h.engine.submit(SetConfigOptionOp(session=sid, config_id="x", value="y"))


async def test_model_and_mode_switch_offline_and_report_refusals(tmp_path: Path) -> None:
    """Model and mode switches share one step: an unknown choice is refused naming the offered
    ones (non-terminal `error`); without a running agent the choice is only recorded (the
    agent gets it at revival) and announced; an agent refusing it is operation_failed."""
    async with running(tmp_path, FakeAgents(models=MODELS, modes=MODES)) as h:
        sid = await h.new_session()
        with pytest.raises(UnknownModeError, match=r"'fast' is not one of .* \(code, plan\)"):
            await h.engine.submit(SetModeOp(session=sid, mode_id="fast", request_id="m1"))
        refused = h.of("error", sid)[-1]
        assert refused["code"] == "unknown_mode" and not refused["terminal"]
        h.agents.last.refuse_switch = True
        with pytest.raises(OperationFailedError, match="didn't switch to large: no such model"):
            await h.engine.submit(SetModelOp(session=sid, model="large"))
        with pytest.raises(OperationFailedError, match="didn't switch to mode plan"):
            await h.engine.submit(SetModeOp(session=sid, mode_id="plan"))
        live = h.engine.live.get(sid)
        assert live is not None
        await h.engine.live.close(live)
        calls = len(h.agents.last.calls)
        await h.engine.submit(SetModelOp(session=sid, model="large"))
        await h.engine.submit(SetModeOp(session=sid, mode_id="plan"))
        assert len(h.agents.last.calls) == calls  # nothing asked of a closed agent
        assert h.of("models", sid)[-1]["current"] == "large"
        assert h.of("modes", sid)[-1]["current"] == "plan"
        snapshot = await h.engine.get_session(sid)
        assert snapshot.model == "large" and snapshot.modes is not None
        assert snapshot.modes.current == "plan"


async def test_capacity_evicts_idle_agents_and_refuses_when_busy(tmp_path: Path) -> None:
    """With one agent slot a new session closes the idle agent of another; while that one
    runs a turn, a third session is refused with capacity."""
    release = asyncio.Event()

    async def slow(agent: FakeAgent, text: str) -> StopReason:
        await release.wait()
        return StopReason.END_TURN

    async with running(tmp_path, FakeAgents(script=slow), max_live_agents=1) as h:
        first = await h.new_session()
        second = await h.new_session()
        assert h.agents.started[0].closed and not h.agents.started[1].closed
        await h.prompt(second, "busy")
        with pytest.raises(CapacityError):
            await h.new_session()
        with pytest.raises(CapacityError):
            await h.prompt(first, "wake up")
        release.set()
        await h.until("turn_ended")


async def test_stricter_policy_restarts_an_agent_holding_grants(tmp_path: Path) -> None:
    """After the user chose an "always" option, a stricter policy makes the next turn run on
    a new agent that restores the ACP session (load), so the agent's own grant dies."""
    always = [("always", "Always", "allow_always"), ("no", "No", "reject_once")]

    async def ask_always(agent: FakeAgent, text: str) -> StopReason:
        if text == "ask":
            await agent.ask("execute", always)
        return StopReason.END_TURN

    agents = FakeAgents(script=ask_always, supports_load_session=True)
    async with running(tmp_path, agents) as h:
        sid = await h.new_session()
        await h.engine.submit(
            SetExecutionPolicyOp(
                session=sid, mode=PermissionMode.YOLO, sandbox=SandboxPolicy.DANGER_FULL_ACCESS
            )
        )
        start = len(h.events)
        await h.prompt(sid, "ask")
        parked = await h.until("permission_request", after=start)
        # yolo allows it, but only allow_once is automatic: the user decides.
        await h.engine.submit(
            AnswerPermissionOp(session=sid, request_id=parked["request_id"], option_id="always")
        )
        await h.until("turn_ended", after=start)
        await h.engine.submit(
            SetExecutionPolicyOp(
                session=sid, mode=PermissionMode.ASK, sandbox=SandboxPolicy.WORKSPACE_WRITE
            )
        )
        assert len(agents.started) == 1
        await h.turn(sid, "next")
        assert len(agents.started) == 2 and agents.started[0].closed
        assert agents.last.calls[0][0] == "load_session"


async def test_settings_of_a_missing_session_name_what_failed(tmp_path: Path) -> None:
    """A settings op on an unknown session is refused with what it could not do, the same
    words in the problem and in the broadcast error event."""
    async with running(tmp_path, FakeAgents()) as h:
        op = SetExecutionPolicyOp(
            session="nope", mode=PermissionMode.ASK, sandbox=SandboxPolicy.READ_ONLY, request_id="r"
        )
        with pytest.raises(SessionNotFoundError) as refused:
            await h.engine.submit(op)
        message = "couldn't update execution policy: no such session"
        assert refused.value.message == str(refused.value) == message
        assert refused.value.request_id == "r"
        event = await h.until("error")
        assert event["message"] == message and event["terminal"] is False
        with pytest.raises(SessionNotFoundError, match="couldn't change model"):
            await h.engine.submit(SetModelOp(session="nope", model="large"))
