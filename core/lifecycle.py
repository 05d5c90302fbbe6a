"""Session lifecycle: creation (cwd, worktree, agent spawn, receipt), deletion and worktree
discard. Creation either commits a complete session or leaves nothing behind
(docs/protocol.md §8.2).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from c2.core.acp_sessions import adopt, agent_failure, open_new
from c2.core.agents.updates import AgentError
from c2.core.checkpoints import CheckpointService
from c2.core.errors import (
    DomainError,
    InvalidCwdError,
    ProviderUnavailableError,
    SessionUnavailableError,
    TurnAlreadyRunningError,
)
from c2.core.live import LiveSession
from c2.core.live_agents import LiveAgents
from c2.core.mcp_servers import merge_mcp_servers, parse_mcp_servers
from c2.core.new_sessions import commit_new_session
from c2.core.outcomes import (
    WorktreeDiscarded,
)
from c2.core.protocol.events import SessionDeleted, WorktreeDiscardedEvent
from c2.core.protocol.ops import NewSessionOp
from c2.core.protocol.state import SessionSnapshot
from c2.core.protocol.values import DEFAULT_POLICY, WorktreeBase, provider_key
from c2.core.providers import ProviderRegistry
from c2.core.queue import FollowUpQueue
from c2.core.reporter import Reporter
from c2.core.session import SessionRecord
from c2.core.store.database import Store, UnitOfWork
from c2.core.worktrees import (
    create_worktree_async,
    discard_worktree_async,
)

log = logging.getLogger(__name__)
DELETE_GRACE = 0.5  # per step when ending a deleted session's agent (EOF, then SIGTERM)


class SessionLifecycle:
    """Creates, deletes and discards the worktree of sessions; worktrees go under `worktrees`,
    and `stop_turn` ends a session's running turn before it is deleted."""

    def __init__(
        self,
        live: LiveAgents,
        store: Store,
        reporter: Reporter,
        providers: ProviderRegistry,
        *,
        worktrees: Path,
        stop_turn: Callable[[LiveSession], Awaitable[None]],
        checkpoints: CheckpointService,
        queue: FollowUpQueue,
    ) -> None:
        self._live = live
        self._store = store
        self._reporter = reporter
        self._providers = providers
        self._worktrees = worktrees
        self._stop_turn = stop_turn
        self._checkpoints = checkpoints  # issue 14: they go with the session / worktree
        self._queue = queue

    async def new_session(self, op: NewSessionOp, device_id: str | None = None) -> SessionSnapshot:
        """Create a session (`device_id` lends its default budget); its snapshot, or a
        terminal error broadcast and raised."""
        rid = op.request_id
        try:
            return await self._create(op, device_id)
        except DomainError as exc:
            # Creation errors are terminal, not session-scoped, and correlated
            # (docs/protocol.md §3.6).
            exc.session, exc.request_id = None, rid
            raise await self._reporter.reject(exc, terminal=True) from None

    async def _create(self, op: NewSessionOp, device_id: str | None) -> SessionSnapshot:
        key = provider_key(op.provider)
        entry = self._providers.get(key)  # unknown provider fails before the disk
        requested = parse_mcp_servers(op.mcp_servers)  # so does a malformed MCP server
        source = resolve_cwd(op.cwd)
        session_id = str(uuid.uuid4())
        record = SessionRecord(
            id=session_id,
            provider=key,
            cwd=source,
            project_path=source,
            policy=op.initial_policy or DEFAULT_POLICY,
            mcp_servers=merge_mcp_servers(entry.mcp_servers, requested),
            owner=self._store.instance_id,
        )
        created = None
        if op.use_worktree:
            created = await create_worktree_async(
                source,
                session_id,
                op.worktree_base or WorktreeBase.CURRENT,
                op.worktree_base_sha,
                self._worktrees,
            )
            record = record.evolve(
                cwd=created.cwd,
                project_path=created.project_path,
                worktree_path=created.worktree_path,
                worktree_baseline=created.baseline,
                worktree_identity=created.identity,
            )
        live = self._live.new(record)
        try:
            agent = await self._live.spawn(live)
            # The ACP session exists from the start, so the 201 snapshot already offers the
            # agent's models, modes and config options (and a refusal leaves nothing behind).
            try:
                info = await open_new(agent, record)
            except AgentError as exc:
                refused = ProviderUnavailableError(
                    f"{entry.display_name} refused to start a session: {exc.message}",
                    session=session_id,
                )
                self._providers.observe_auth(key, required=exc.auth_required)
                raise agent_failure(exc, refused) from exc
            self._providers.observe_auth(key, required=False)
            record, state = adopt(record, info)
            live.record, live.acp_session_id = record, info.acp_session_id
            await commit_new_session(
                self._store,
                record,
                state,
                request_id=op.request_id,
                device_id=device_id,
                what="new session",
            )
        except BaseException:
            await self._live.close(live)
            if created is not None:
                await discard_worktree_async(created)
            raise
        self._live.add(live)
        return record.snapshot()

    async def delete_session(self, session_id: str) -> None:
        """Cancel a running turn, end the agent's process group, archive the session.

        The agent is ended in the background (session/close, EOF, TERM, KILL within about
        1.5 s), so the answer never waits on an agent that ignores all but SIGKILL.
        """
        live = await self._live.load(session_id)
        async with live.lock:
            # From here nothing starts on it: an op that loaded it earlier finds it deleted
            # once it holds the lock; a turn accepted before is stopped next.
            live.deleted = True
        try:
            await self._stop_turn(live)
            self._live.retire(live, DELETE_GRACE)
            async with live.lock:
                record = live.record.evolve(archived=True)

                def archive(uow: UnitOfWork) -> None:
                    uow.sessions.update(record, ("archived",))
                    uow.emit(SessionDeleted(session=session_id))

                await self._store.write(archive)
        except BaseException:
            live.deleted = False  # not deleted after all (the store refused): usable again
            raise
        self._live.drop(session_id)
        await self._checkpoints.forget(record)  # issue 14: checkpoints go with it
        await self._queue.forget(session_id)

    async def discard_worktree(self, session_id: str) -> WorktreeDiscarded:
        """Remove the session's worktree for good (refused while a turn runs)."""
        live = await self._live.load(session_id)
        async with live.lock:
            if live.turn is not None:
                raise TurnAlreadyRunningError(
                    "a turn is running; cancel it before discarding the worktree",
                    session=session_id,
                )
            identity = live.record.worktree_identity
            if identity is None or live.record.worktree_discarded:
                raise SessionUnavailableError(
                    "this session has no worktree to discard", session=session_id
                )
            await self._live.close(live)  # its cwd is about to disappear
            await self._checkpoints.forget(live.record)  # issue 14
            result = await discard_worktree_async(identity)
            record = live.record.evolve(worktree_discarded=True)
            discarded = WorktreeDiscarded(
                session=session_id,
                worktree_path=record.worktree_path,
                removed_checkout=result.removed_checkout,
                deleted_branch=result.deleted_branch,
            )
            event = WorktreeDiscardedEvent(**discarded.model_dump())

            def persist(uow: UnitOfWork) -> None:
                uow.sessions.update(record, ("worktree_discarded",))
                uow.emit(event)  # other clients hide what needed the worktree

            await self._store.write(persist)
            live.record = record
        return discarded


def resolve_cwd(raw: str) -> str:
    """Empty → ".", relative → absolute, must be an existing directory (docs/protocol.md §8.2)."""
    absolute = Path(raw.strip() or ".")
    try:
        absolute = absolute.expanduser()
        absolute = absolute if absolute.is_absolute() else Path.cwd() / absolute
        exists = "\x00" not in raw and absolute.is_dir()
        is_file = not exists and "\x00" not in raw and absolute.exists()
    except (OSError, RuntimeError):  # a name too long, an unknown ~user: bad input, not a 500
        exists = is_file = False
    if is_file:
        raise InvalidCwdError(f"working directory “{absolute}” is a file, not a directory")
    if not exists:
        raise InvalidCwdError(f"working directory “{absolute}” doesn't exist")
    return str(absolute.resolve())
