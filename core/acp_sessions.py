"""A c2 session's ACP session on its live agent: opened fresh (`session/new`, at creation and as
revival's fallback) or restored (`session/resume` when advertised, else `session/load`), always
with the session's MCP servers; the chosen model and mode re-applied; what the agent reported
(models, modes, config options) folded into the record with the events that announce it; and
agent failures turned into errors a person can act on (step, authMethods, stderr tail).
"""

from __future__ import annotations

from c2.core.agents.port import Agent
from c2.core.agents.updates import AcpSessionInfo, AgentError
from c2.core.errors import AgentAuthRequiredError, DomainError
from c2.core.live import LiveSession
from c2.core.mcp_servers import dump_mcp_servers, require_supported
from c2.core.protocol.events import ConfigOptions, Event, Models, Modes
from c2.core.protocol.state import ConfigOption, ModeChoice, ModelChoice, ModelsState, ModesState
from c2.core.reporter import Reporter
from c2.core.session import SessionRecord
from c2.core.store.database import Store, UnitOfWork

# The record fields `adopt` may change (the columns a caller persists).
ADOPTED_FIELDS = ("acp_session_id", "models", "config_options", "modes", "model")


async def open_new(agent: Agent, record: SessionRecord) -> AcpSessionInfo:
    """`session/new` with the record's MCP servers (refused first when the agent did not
    advertise a transport they use); raises McpUnsupportedError or AgentError."""
    require_supported(record.mcp_servers, http=agent.mcp_http, sse=agent.mcp_sse)
    return await agent.new_session(record.cwd, dump_mcp_servers(record.mcp_servers))


async def restore(agent: Agent, record: SessionRecord) -> AcpSessionInfo | None:
    """Reattach to the record's ACP session: `session/resume` when the agent advertises it,
    else `session/load`; None when it can do neither (or there is nothing to restore)."""
    if not record.acp_session_id:
        return None
    servers = dump_mcp_servers(record.mcp_servers)
    if agent.supports_resume:
        return await agent.resume_session(record.acp_session_id, record.cwd, servers)
    if agent.supports_load_session:
        return await agent.load_session(record.acp_session_id, record.cwd, servers)
    return None


def model_option(options: list[ConfigOption]) -> ConfigOption | None:
    """The agent's model config option (category "model"), if it exposes one."""
    return next((o for o in options if o.category == "model"), None)


def mode_option(options: list[ConfigOption]) -> ConfigOption | None:
    """The agent's session-mode config option (category "mode"), if it exposes one."""
    return next((o for o in options if o.category == "mode"), None)


def effective_modes(modes: ModesState | None, options: list[ConfigOption]) -> ModesState | None:
    """What the session's mode picker offers: the agent's `modes`, else its mode config
    option's choices (OpenCode reports build / plan only as a config option)."""
    if modes is not None:
        return modes
    option = mode_option(options)
    if option is None or not option.choices:
        return None
    choices = [ModeChoice(id=c.id, name=c.name, description=c.description) for c in option.choices]
    return ModesState(available=choices, current=option.current)


def effective_models(models: ModelsState | None, options: list[ConfigOption]) -> ModelsState | None:
    """What the session's model picker offers: the agent's `models`, else its model config
    option's choices (OpenCode reports the model only as a config option)."""
    if models is not None:
        return models
    option = model_option(options)
    if option is None or not option.choices:
        return None
    choices = [ModelChoice(id=c.id, name=c.name, description=c.description) for c in option.choices]
    return ModelsState(available=choices, current=option.current)


def adopt(record: SessionRecord, info: AcpSessionInfo) -> tuple[SessionRecord, list[Event]]:
    """The record with what `info` reported (kept where it reported nothing) and the
    `models` / `modes` / `config_options` events announcing it."""
    options = info.config_options or record.config_options
    models = effective_models(info.models, options) or record.models
    modes = effective_modes(info.modes, options) or record.modes
    updated = record.evolve(
        acp_session_id=info.acp_session_id,
        models=models,
        config_options=options,
        modes=modes,
        model=(models.current if models is not None and models.current else None) or record.model,
    )
    return updated, state_events(updated)


def state_events(record: SessionRecord) -> list[Event]:
    """The session-level state events of `record` (models, modes, config options)."""
    events: list[Event] = []
    if record.models is not None and record.models.available:
        events.append(
            Models(session=record.id, available=record.models.available, current=record.model or "")
        )
    if record.modes is not None:
        events.append(
            Modes(session=record.id, available=record.modes.available, current=record.modes.current)
        )
    if record.config_options:
        events.append(ConfigOptions(session=record.id, options=record.config_options))
    return events


async def apply_model(
    agent: Agent, acp_session: str, record: SessionRecord, model: str
) -> SessionRecord:
    """Make the agent use `model`: through its model config option when it has one (that is
    what OpenCode reads), else `session/set_model`; returns the record reflecting it."""
    option = model_option(record.config_options)
    options = record.config_options
    if option is not None:
        options = await agent.set_config_option(acp_session, option.id, model)
    else:
        await agent.set_model(acp_session, model)
    models = effective_models(
        record.models.model_copy(update={"current": model}) if record.models else None, options
    )
    return record.evolve(model=model, models=models, config_options=options)


async def apply_mode(
    agent: Agent, acp_session: str, record: SessionRecord, mode_id: str
) -> SessionRecord:
    """Switch the agent's mode: through its mode config option when it has one, else
    `session/set_mode`; returns the record with `mode_id` current."""
    option = mode_option(record.config_options)
    options = record.config_options
    if option is not None:
        options = await agent.set_config_option(acp_session, option.id, mode_id)
    else:
        await agent.set_mode(acp_session, mode_id)
    modes = record.modes.model_copy(update={"current": mode_id}) if record.modes else None
    return record.evolve(modes=effective_modes(modes, options), config_options=options)


def agent_failure(exc: AgentError, fallback: DomainError) -> DomainError:
    """The DomainError a person acts on: `agent_auth_required` with the agent's authMethods,
    else `fallback`; both carry the agent's stderr tail when it wrote one."""
    error: DomainError = fallback
    if exc.auth_required:
        methods = " ".join(
            f"{m.name}{f' ({m.description})' if m.description else ''}." for m in exc.auth_methods
        )
        error = AgentAuthRequiredError(
            f"the agent needs you to log in first ({exc.message})"
            + (f"; it offers: {methods}" if methods else ""),
            session=fallback.session,
            request_id=fallback.request_id,
        )
        error.details["auth_methods"] = [m.model_dump(mode="json") for m in exc.auth_methods]
    if exc.stderr_tail:
        error.details["stderr_tail"] = exc.stderr_tail
    return error


async def attach(
    live: LiveSession, agent: Agent, rid: str | None, store: Store, reporter: Reporter
) -> str:
    """The ACP session of the session's (revived) agent: the current one, else resumed or
    loaded (else a fresh one, with a warning), with the session's MCP servers and its chosen
    model and mode re-applied; what the agent reported is persisted and announced."""
    if live.acp_session_id is not None:
        return live.acp_session_id
    record = live.record
    chosen_model = record.current_model()
    chosen_mode = record.modes.current if record.modes is not None else ""
    info = None
    try:
        info = await restore(agent, record)
    except AgentError as exc:
        if exc.auth_required:
            raise
        await reporter.warn(
            live.id,
            rid,
            f"couldn't restore this session's saved context ({exc.message}); "
            "the transcript is kept, but the agent is starting with a fresh memory",
        )
    if info is None:
        info = await open_new(agent, record)
    updated, _ = adopt(record, info)
    # Re-apply what the session had chosen when the agent came back with something else, or
    # did not say (a resume answer may omit models/modes): setting it again is harmless.
    said_model = info.models is not None or model_option(info.config_options) is not None
    said_mode = info.modes is not None or mode_option(info.config_options) is not None
    if (
        chosen_model
        and record.models is not None
        and (not said_model or updated.current_model() != chosen_model)
    ):
        try:
            updated = await apply_model(agent, info.acp_session_id, updated, chosen_model)
        except AgentError as exc:
            await reporter.warn(live.id, rid, f"{chosen_model} wasn't accepted: {exc.message}")
    modes = updated.modes
    offered = {m.id for m in modes.available} if modes is not None else set()
    if (
        modes is not None
        and chosen_mode in offered
        and (not said_mode or modes.current != chosen_mode)
    ):
        try:
            updated = await apply_mode(agent, info.acp_session_id, updated, chosen_mode)
        except AgentError as exc:
            message = f"mode {chosen_mode} wasn't accepted: {exc.message}"
            await reporter.warn(live.id, rid, message)
    events = state_events(updated)

    def persist(uow: UnitOfWork) -> None:
        uow.sessions.update(updated, ADOPTED_FIELDS)
        for ev in events:
            uow.emit(ev)

    await store.write(persist)
    adopted = {name: getattr(updated, name) for name in ADOPTED_FIELDS}
    live.record = live.record.evolve(**adopted)
    live.acp_session_id = info.acp_session_id
    return info.acp_session_id
