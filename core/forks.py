"""Fork a session at a turn into a new one (issue 14 part 2): the parent's turns up to n are
copied into the child's transcript, a worktree child gets its own checkout holding the parent's
files at turn n, and the child's agent continues from there: ACP `session/fork` where the agent
advertises it and the fork is at the parent's last finished turn, else a fresh agent session
whose first prompt is primed with the parent's turns as a @chat-style reference. The parent
is never modified.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from c2.core.acp_sessions import adopt, agent_failure, open_new
from c2.core.agents.updates import AgentError
from c2.core.errors import DomainError, NoSuchTurnError, ProviderUnavailableError
from c2.core.live import LiveSession
from c2.core.mcp_servers import dump_mcp_servers
from c2.core.new_sessions import commit_new_session
from c2.core.protocol.events import Event
from c2.core.protocol.ops import ForkOp
from c2.core.protocol.state import ForkedFrom, SessionSnapshot, TranscriptEntry
from c2.core.protocol.values import WorktreeBase
from c2.core.session import SessionRecord
from c2.core.store.database import ReadUnit, Store, UnitOfWork
from c2.core.transcript import read_context_page, render_transcript_context
from c2.core.worktrees import (
    CreatedWorktree,
    create_worktree_at_async,
    discard_worktree_async,
    resolve_baseline_async,
)

if TYPE_CHECKING:
    from c2.core.checkpoints import CheckpointService
    from c2.core.live_agents import LiveAgents

log = logging.getLogger(__name__)
_ALL = 2**62


@dataclass(frozen=True)
class _Cut:
    """The parent's transcript rows up to turn `at`, and whether `at` is its latest."""

    at: int
    latest: bool
    rows: list[TranscriptEntry]


def _cut(read: ReadUnit, session: str, at_turn: int | None, running: bool) -> _Cut:
    starts = list(reversed(read.parts.user_seqs_before(session, _ALL, _ALL)))
    finished = len(starts) - (1 if running else 0)
    at = finished if at_turn is None else at_turn
    if at > finished:
        raise NoSuchTurnError(
            f"turn {at} has not finished (the session has {finished} finished turn(s))",
            session=session,
        )
    end = starts[at] - 1 if at < len(starts) else (read.parts.max_seq(session) or 0)
    rows = read.parts.range(session, 0, end) if starts or end else []
    return _Cut(at=at, latest=at == finished, rows=rows)


class ForkService:
    """Forks sessions (new worktrees go under `worktrees`) and primes a fork's first prompt."""

    def __init__(
        self, live: LiveAgents, store: Store, checkpoints: CheckpointService, worktrees: Path
    ) -> None:
        self._live = live
        self._store = store
        self._checkpoints = checkpoints
        self._worktrees = worktrees

    async def fork(self, op: ForkOp, device_id: str | None = None) -> SessionSnapshot:
        """Fork `op.session`; the child takes the default budget of the device that asked."""
        try:
            return await self._fork(op, device_id)
        except DomainError as exc:
            exc.session, exc.request_id = exc.session or op.session, op.request_id
            raise

    async def _fork(self, op: ForkOp, device_id: str | None) -> SessionSnapshot:
        parent_live = await self._live.load(op.session, op.request_id)
        parent = parent_live.record
        running = parent_live.turn is not None
        cut = await self._store.read(lambda r: _cut(r, parent.id, op.at_turn, running))
        child_id = str(uuid.uuid4())
        lineage = ForkedFrom(session=parent.id, turn=cut.at)
        use_worktree = (
            op.use_worktree if op.use_worktree is not None else bool(parent.worktree_path)
        )
        # A child without a worktree works in the project folder, never in the parent's checkout.
        source = parent.project_path or parent.cwd
        child = SessionRecord(
            id=child_id,
            provider=parent.provider,
            cwd=source,
            project_path=source,
            title=f"{parent.title} (fork)",
            title_origin="manual",
            policy=parent.policy,
            mcp_servers=parent.mcp_servers,
            forked_from=lineage,
            owner=self._store.instance_id,
        )
        created: CreatedWorktree | None = None
        live: LiveSession | None = None
        try:
            if use_worktree:
                baseline = parent.worktree_baseline or await resolve_baseline_async(
                    source, WorktreeBase.CURRENT
                )
                created = await create_worktree_at_async(
                    source, child_id, baseline, self._worktrees
                )
                child = child.evolve(
                    cwd=created.cwd,
                    project_path=created.project_path,
                    worktree_path=created.worktree_path,
                    worktree_baseline=created.baseline,
                    worktree_identity=created.identity,
                )
                await self._checkpoints.seed_fork(parent, child, cut.at)
            live = self._live.new(child)
            child, state = await self._open_agent(live, parent, cut)
            live.record = child

            def copy_turns(uow: UnitOfWork) -> None:
                for entry in cut.rows:  # indexed for search like any appended row
                    uow.parts.append(child_id, entry.role, entry.part)
                uow.search.turn_ended(child_id)  # the copied turns are over: index the last message

            await commit_new_session(
                self._store,
                child,
                state,
                request_id=op.request_id,
                device_id=device_id,
                what="the forked session",
                also=copy_turns,
            )
        except BaseException:
            if live is not None:
                await self._live.close(live)
            await self._checkpoints.forget(child)
            if created is not None:
                await discard_worktree_async(created)
            raise
        self._live.add(live)
        return child.snapshot()

    async def _open_agent(
        self, live: LiveSession, parent: SessionRecord, cut: _Cut
    ) -> tuple[SessionRecord, list[Event]]:
        """Start the child's agent: ACP session/fork when it can continue the parent's own
        conversation, else a fresh session (primed at the first prompt)."""
        child = live.record
        agent = await self._live.spawn(live)
        info = None
        if cut.latest and agent.supports_fork and parent.acp_session_id:
            servers = dump_mcp_servers(child.mcp_servers)
            try:
                info = await agent.fork_session(parent.acp_session_id, child.cwd, servers)
            except AgentError as exc:
                if exc.auth_required:
                    raise agent_failure(exc, ProviderUnavailableError(exc.message)) from exc
                log.warning("session/fork failed, priming a fresh session instead: %s", exc)
        prime = info is None and cut.at > 0
        if info is None:
            try:
                info = await open_new(agent, child)
            except AgentError as exc:
                refused = ProviderUnavailableError(
                    f"the agent refused to start the forked session: {exc.message}",
                    session=child.id,
                )
                raise agent_failure(exc, refused) from exc
        live.acp_session_id = info.acp_session_id
        return adopt(child.evolve(prime=prime), info)

    # -- the primer (core/turns.py) -------------------------------------------------------

    @staticmethod
    def primed_from(record: SessionRecord) -> ForkedFrom | None:
        """What the next turn's `turn_started` says it was primed from, if anything."""
        return record.forked_from if record.prime else None

    async def prime(self, live: LiveSession, text: str) -> str:
        """The first prompt of a primed fork: the parent's turns (as the child's transcript
        holds them) rendered like an @chat reference, then the prompt itself."""
        record = live.record
        if not record.prime or record.forked_from is None:
            return text
        sid, title = record.id, record.title.removesuffix(" (fork)")

        def render(read: ReadUnit) -> str:
            newest = read.parts.user_seqs_before(sid, _ALL, 1)
            page = read_context_page(read, sid, newest[0] if newest else None)
            earlier = [(e.role, e.part) for e in page.entries]
            return render_transcript_context(title, earlier, page.next_before is not None)

        context = await self._store.read(render)
        done = record.evolve(prime=False)
        await self._store.write(lambda uow: uow.sessions.update(done, ("prime",)))
        live.record = live.record.evolve(prime=False)
        return f"{context}\n\n{text}" if context else text
