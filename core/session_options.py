"""Per-session settings ops: the atomic two-axis execution policy, the model, the ACP session
mode and agent config options (docs/protocol.md §2.3, §8.4). Each is validated, applied live,
persisted, then broadcast. The policy and the agent's mode are kept consistent both ways: a
mode in which the agent acts unasked beyond the policy is refused, a stricter policy moves the
agent off one, and so does c2 when the agent switches itself into one (core/permissions.py,
`mode_exceeds`).

Over 300 lines: the four settings share their load, their switch through the running agent
and their persisting step, and the policy now drives the mode; split, each part would reach
into the others' steps.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from c2.core.acp_sessions import (
    apply_mode,
    apply_model,
    effective_models,
    mode_option,
    model_option,
    state_events,
)
from c2.core.agents.port import Agent
from c2.core.agents.updates import AgentError
from c2.core.errors import (
    ModeExceedsPolicyError,
    OperationFailedError,
    SessionNotFoundError,
    UnknownModeError,
    UnknownModelError,
)
from c2.core.live import STRICTER_POLICY, LiveSession
from c2.core.live_agents import LiveAgents
from c2.core.outcomes import (
    ConfigResult,
    ModelResult,
    ModeResult,
    PolicyResult,
)
from c2.core.permissions import is_stricter, mode_exceeds
from c2.core.protocol.events import ErrorEvent, ExecutionPolicyChanged
from c2.core.protocol.ops import SetConfigOptionOp, SetModelOp, SetModeOp
from c2.core.protocol.state import ModeChoice, ModelChoice
from c2.core.protocol.values import ExecutionPolicy, PermissionMode, SandboxPolicy
from c2.core.reporter import Reporter
from c2.core.session import SessionRecord
from c2.core.store.database import Store, UnitOfWork
from c2.core.supervisor import Supervisor

log = logging.getLogger(__name__)


class SessionOptions:
    """The settings ops of a session: execution policy, model, mode and config options."""

    def __init__(self, live: LiveAgents, store: Store, reporter: Reporter) -> None:
        self._live = live
        self._store = store
        self._reporter = reporter
        self._tasks = Supervisor("session options")

    async def close(self) -> None:
        """Stop the mode corrections still under way (server shutdown)."""
        await self._tasks.close()

    def mode_switched(self, live: LiveSession) -> None:
        """The agent switched its own mode (core/agent_feed.py). One in which it would act
        unasked beyond the policy (Claude Code leaving plan mode into acceptEdits) is
        switched back, and the change said: the policy decides, not the agent."""
        modes = live.record.modes
        if modes is not None and mode_exceeds(modes.current, live.record.policy):
            self._tasks.spawn(self._veto(live, modes.current), name=f"mode-veto-{live.id}")

    async def _veto(self, live: LiveSession, chosen: str) -> None:
        async with live.lock:
            if live.deleted or live.record.modes is None:
                return
            policy = live.record.policy
            if live.record.modes.current != chosen or not mode_exceeds(chosen, policy):
                return  # switched again meanwhile, or the policy allows it now
            await self._keep_mode_within(live, policy)
        kept = live.record.modes.current if live.record.modes else None
        message = (
            f"the agent switched itself to mode {chosen}, in which it would act without asking "
            f"beyond the session's policy ({policy.mode}); c2 switched it to {kept}"
        )
        await self._reporter.emit(ErrorEvent(session=live.id, message=message, terminal=False))

    async def _load(self, session_id: str, request_id: str | None, doing: str) -> LiveSession:
        """The loaded session; a missing one is refused (and broadcast) as "couldn't `doing`:
        no such session", a new error rather than the registry's reworded."""
        try:
            return await self._live.load(session_id, request_id)
        except SessionNotFoundError:
            error = SessionNotFoundError(
                f"couldn't {doing}: no such session", session=session_id, request_id=request_id
            )
            raise await self._reporter.reject(error, terminal=False) from None

    async def set_policy(
        self,
        session_id: str,
        mode: PermissionMode | None,
        sandbox: SandboxPolicy | None,
        request_id: str | None,
    ) -> PolicyResult:
        """Atomic two-axis write: persisted and broadcast in one transaction, applied live
        (docs/protocol.md §2.3)."""
        live = await self._load(session_id, request_id, "update execution policy")
        async with live.lock:
            current = live.record.policy
            policy = ExecutionPolicy(mode=mode or current.mode, sandbox=sandbox or current.sandbox)
            record = live.record.evolve(policy=policy)
            changed = ExecutionPolicyChanged(
                session=session_id, policy=policy, request_id=request_id
            )
            result = PolicyResult(session=session_id, policy=policy, request_id=request_id)

            def persist(uow: UnitOfWork) -> None:
                uow.sessions.update(record, ("policy",))
                uow.emit(changed)
                uow.answer(result)

            try:
                await self._store.write(persist)
            except Exception as exc:
                error = OperationFailedError(
                    f"couldn't persist execution policy: {exc}",
                    session=session_id,
                    request_id=request_id,
                )
                raise await self._reporter.reject(error, terminal=False) from exc
            # The permission handler reads live.record.policy: it now holds the new pair.
            live.record = live.record.evolve(policy=policy)
            if live.agent_grants and is_stricter(current, policy):
                # The agent's own grants must not outlive this.
                live.needs_acp_restart = STRICTER_POLICY
            await self._keep_mode_within(live, policy)
        return result

    async def _keep_mode_within(self, live: LiveSession, policy: ExecutionPolicy) -> None:
        """After a policy change, move the agent off a mode in which it would act unasked
        beyond the new policy (Claude Code's bypassPermissions, say), to its first mode that
        stays within it; broadcast as `modes`. An agent that refuses is restarted before the
        next turn, which then gets the stored mode."""
        modes = live.record.modes
        if modes is None or not mode_exceeds(modes.current, policy):
            return
        within = next((m.id for m in modes.available if not mode_exceeds(m.id, policy)), None)
        if within is None:
            # No mode to switch to: a fresh agent asks again.
            live.needs_acp_restart = STRICTER_POLICY
            return
        # Stored as the current mode in any case: a revived agent is given it.
        record = live.record.evolve(modes=modes.model_copy(update={"current": within}))
        if live.agent_alive and live.acp_session_id is not None:
            assert live.agent is not None
            try:
                record = await apply_mode(live.agent, live.acp_session_id, live.record, within)
            except AgentError:
                log.warning("agent of %s refused mode %s; restarting it", live.id, within)
                live.needs_acp_restart = STRICTER_POLICY
        await self._persist(live, record, ("modes",), None)

    async def set_model(self, op: SetModelOp) -> ModelResult:
        """Validate against the agent's models, apply it live (its model config option when it
        has one), persist, broadcast `models`; without a live agent it applies at revival."""
        live = await self._load(op.session, None, "change model")
        async with live.lock:
            models = live.record.models
            if models is not None:  # an agent that reports no models takes any name
                await self._check_offered(live, op.model, models.available, UnknownModelError)

            def offline() -> SessionRecord:
                current = models.model_copy(update={"current": op.model}) if models else None
                return live.record.evolve(model=op.model, models=current)

            await self._switch(
                live,
                None,
                op.model,
                lambda agent, acp_session: apply_model(agent, acp_session, live.record, op.model),
                offline,
                ("model", "models"),
                result := ModelResult(session=op.session, current=op.model),
            )
        return result

    async def set_mode(self, op: SetModeOp) -> ModeResult:
        """`session/set_mode` for one of the agent's modes; persisted, broadcast as `modes`;
        without a live agent it applies at revival."""
        live = await self._load(op.session, op.request_id, "change mode")
        async with live.lock:
            modes = live.record.modes
            offered = modes.available if modes is not None else None
            await self._check_offered(live, op.mode_id, offered, UnknownModeError, op.request_id)
            assert modes is not None
            if mode_exceeds(op.mode_id, live.record.policy):
                policy = live.record.policy
                error = ModeExceedsPolicyError(
                    f"in mode {op.mode_id!r} the agent acts without asking where this session's"
                    f" policy ({policy.mode.value}, {policy.sandbox.value}) does not allow it;"
                    " loosen the policy first",
                    session=live.id,
                    request_id=op.request_id,
                )
                raise await self._reporter.reject(error, terminal=False)

            def offline() -> SessionRecord:
                return live.record.evolve(modes=modes.model_copy(update={"current": op.mode_id}))

            await self._switch(
                live,
                op.request_id,
                f"mode {op.mode_id}",
                lambda agent, acp_session: apply_mode(agent, acp_session, live.record, op.mode_id),
                offline,
                ("modes",),
                result := ModeResult(session=op.session, current=op.mode_id),
            )
        return result

    # -- the steps the model and mode switches share ----------------------------------------

    async def _check_offered(
        self,
        live: LiveSession,
        choice: str,
        offered: Sequence[ModelChoice | ModeChoice] | None,
        unknown: type[UnknownModelError | UnknownModeError],
        request_id: str | None = None,
    ) -> None:
        """Refuse (and broadcast) a `choice` that is not among the `offered` ones."""
        if offered is not None and choice in {c.id for c in offered}:
            return
        listed = ", ".join(c.id for c in offered) if offered is not None else "none"
        noun = "models" if unknown is UnknownModelError else "modes"
        error = unknown(
            f"{choice!r} is not one of this session's {noun} ({listed})",
            session=live.id,
            request_id=request_id,
        )
        raise await self._reporter.reject(error, terminal=False)

    async def _switch(
        self,
        live: LiveSession,
        request_id: str | None,
        label: str,
        through_agent: Callable[[Agent, str], Awaitable[SessionRecord]],
        offline: Callable[[], SessionRecord],
        fields: tuple[str, ...],
        result: object,
    ) -> None:
        """Apply a validated choice through the running agent (`through_agent`), or only on
        the record when none runs (`offline`: the agent gets it at revival); then persist
        `fields` with the op's `result` (its idempotent reply)."""
        if live.agent_alive and live.acp_session_id is not None:
            assert live.agent is not None
            try:
                record = await through_agent(live.agent, live.acp_session_id)
            except AgentError as exc:
                error = OperationFailedError(
                    f"the agent didn't switch to {label}: {exc.message}",
                    session=live.id,
                    request_id=request_id,
                )
                raise await self._reporter.reject(error, terminal=False) from exc
        else:
            record = offline()
        await self._persist(live, record, fields, result)

    async def _persist(
        self,
        live: LiveSession,
        record: SessionRecord,
        fields: tuple[str, ...],
        result: object | None,
    ) -> None:
        """Write `fields` of `record` (and its config options when a switch through the agent
        changed them) with the state events they change and the op's `result` (its idempotent
        reply; None: the op was answered by an earlier write); then adopt them."""
        if record.config_options != live.record.config_options:
            fields += ("config_options",)
        events = [
            ev
            for ev in state_events(record)
            if (ev.event == "models" and "models" in fields)
            or (ev.event == "modes" and "modes" in fields)
            or (ev.event == "config_options" and "config_options" in fields)
        ]

        def persist(uow: UnitOfWork) -> None:
            uow.sessions.update(record, fields)
            for ev in events:
                uow.emit(ev)
            if result is not None:
                uow.answer(result)

        try:
            await self._store.write(persist)
        except Exception as exc:
            error = OperationFailedError(f"couldn't persist the change: {exc}", session=live.id)
            raise await self._reporter.reject(error, terminal=False) from exc
        live.record = live.record.evolve(**{name: getattr(record, name) for name in fields})

    async def set_config_option(self, op: SetConfigOptionOp) -> ConfigResult:
        """Set one of the agent's config options (only while its agent runs; a session that does
        not exist is refused as such); the model and mode follow when the option carries
        them."""
        live = await self._load(op.session, None, f"set {op.config_id}")
        if not live.agent_alive or live.acp_session_id is None:
            error = OperationFailedError(
                f"can't set {op.config_id} while the session's agent isn't running; "
                "send a prompt first",
                session=op.session,
            )
            raise await self._reporter.reject(error, terminal=False)
        assert live.agent is not None
        async with live.lock:
            try:
                options = await live.agent.set_config_option(
                    live.acp_session_id, op.config_id, op.value
                )
            except AgentError as exc:
                error = OperationFailedError(
                    f"{op.config_id} can't be changed here: {exc}", session=op.session
                )
                raise await self._reporter.reject(error, terminal=False) from exc
            option = model_option(options)
            record = live.record.evolve(config_options=options)
            fields: tuple[str, ...] = ("config_options",)
            if (modes_option := mode_option(options)) is not None and live.record.modes:
                fields += ("modes",)
                current = {"current": modes_option.current}
                record = record.evolve(modes=live.record.modes.model_copy(update=current))
            if option is not None and option.current:
                fields += ("model", "models")
                models = live.record.models
                record = record.evolve(
                    model=option.current,
                    models=effective_models(
                        models.model_copy(update={"current": option.current}) if models else None,
                        options,
                    ),
                )
            result = ConfigResult(session=op.session, options=options)
            await self._persist(live, record, fields, result)
        return result
