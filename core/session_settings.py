"""Per-session settings ops: the atomic two-axis execution policy, the model and agent config
options (original-behaviour §2.3, §8.4). Each is persisted, applied live, then broadcast.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from core.agents.client import AgentProcess
from core.agents.updates import AgentError
from core.errors import (
    OperationFailedError,
    SessionNotFoundError,
)
from core.live import LiveSession
from core.outcomes import (
    ConfigResult,
    ModelResult,
    PolicyResult,
)
from core.permissions import is_stricter
from core.protocol import (
    ConfigOptions,
    Event,
    ExecutionPolicy,
    ExecutionPolicyChanged,
    Models,
    PermissionMode,
    SandboxPolicy,
    SetConfigOptionOp,
    SetModelOp,
)
from core.store.database import UnitOfWork

if TYPE_CHECKING:
    from core.engine import Engine

log = logging.getLogger(__name__)


class SessionSettings:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def set_policy(
        self,
        session_id: str,
        mode: PermissionMode | None,
        sandbox: SandboxPolicy | None,
        request_id: str | None,
    ) -> PolicyResult:
        """Atomic two-axis write: persisted, applied live, then broadcast (§2.3)."""
        try:
            live = await self.engine.load(session_id, request_id)
        except SessionNotFoundError as exc:
            exc.message = "couldn't update execution policy: no such session"
            raise await self.engine.reject(exc, terminal=False) from None
        async with live.lock:
            current = live.record.policy
            policy = ExecutionPolicy(mode=mode or current.mode, sandbox=sandbox or current.sandbox)
            record = live.record.evolve(policy=policy)
            try:
                await self.engine.store.write(lambda uow: uow.sessions.update(record, ("policy",)))
            except Exception as exc:
                error = OperationFailedError(
                    f"couldn't persist execution policy: {exc}",
                    session=session_id,
                    request_id=request_id,
                )
                raise await self.engine.reject(error, terminal=False) from exc
            # The permission handler reads live.record.policy: it now holds the new pair.
            live.record = live.record.evolve(policy=policy)
            if live.agent_grants and is_stricter(current, policy):
                live.needs_acp_restart = True  # the agent's own grants must not outlive this
            await self.engine.emit(
                ExecutionPolicyChanged(session=session_id, policy=policy, request_id=request_id)
            )
        return PolicyResult(session=session_id, policy=policy, request_id=request_id)

    async def set_model(self, op: SetModelOp) -> ModelResult:
        try:
            live = await self.engine.load(op.session)
        except SessionNotFoundError as exc:
            exc.message = "couldn't change model: no such session"
            raise await self.engine.reject(exc, terminal=False) from None
        async with live.lock:
            if live.agent_alive and live.acp_session_id is not None:
                assert live.agent is not None
                try:
                    await self._apply_model(live, live.agent, live.acp_session_id, op.model)
                except AgentError as exc:
                    error = OperationFailedError(
                        f"this agent can't switch models mid-session ({exc}); "
                        f"start a new session to use {op.model}",
                        session=op.session,
                    )
                    raise await self.engine.reject(error, terminal=False) from exc
            models = live.record.models
            if models is not None:
                models = models.model_copy(update={"current": op.model})
            record = live.record.evolve(model=op.model, models=models)
            events: list[Event] = []
            if models is not None:
                events.append(
                    Models(session=op.session, available=models.available, current=op.model)
                )

            def persist(uow: UnitOfWork) -> None:
                uow.sessions.update(record, ("model", "models"))
                for ev in events:
                    uow.emit(ev)

            try:
                await self.engine.store.write(persist)
            except Exception as exc:
                error = OperationFailedError(
                    f"couldn't persist model change: {exc}", session=op.session
                )
                raise await self.engine.reject(error, terminal=False) from exc
            live.record = live.record.evolve(model=op.model, models=models)
        return ModelResult(session=op.session, current=op.model)

    async def _apply_model(
        self, live: LiveSession, agent: AgentProcess, acp_session: str, model: str
    ) -> None:
        # Prefer the agent's model config option when it has one (issue: set_model).
        option = next((o for o in live.record.config_options if o.category == "model"), None)
        if option is not None:
            options = await agent.set_config_option(acp_session, option.id, model)
            live.record = live.record.evolve(config_options=options)
        else:
            await agent.set_model(acp_session, model)

    async def set_config_option(self, op: SetConfigOptionOp) -> ConfigResult:
        live = self.engine.live_sessions.get(op.session)
        if live is None or not live.agent_alive or live.acp_session_id is None:
            error = OperationFailedError(
                f"can't set {op.config_id} before the session's first prompt", session=op.session
            )
            raise await self.engine.reject(error, terminal=False)
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
                raise await self.engine.reject(error, terminal=False) from exc
            model_option = next((o for o in options if o.category == "model"), None)
            changes: dict[str, Any] = {"config_options": options}
            if model_option is not None and model_option.current:
                changes["model"] = model_option.current
            record = live.record.evolve(**changes)

            def persist(uow: UnitOfWork) -> None:
                uow.sessions.update(record, ("config_options", "model"))
                uow.emit(ConfigOptions(session=op.session, options=options))

            await self.engine.store.write(persist)
            live.record = live.record.evolve(**changes)
        return ConfigResult(session=op.session, options=options)
