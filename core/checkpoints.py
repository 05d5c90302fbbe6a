"""Per-turn checkpoints of a session's working tree, their diffs, and rewind (issue 14).

At the start and end of every turn the working tree is recorded as a git tree object
(core/worktrees/checkpoints.py) under `refs/c2/checkpoints/<session>/`:
`baseline` (turn 0), `turns/<n>/start`, `turns/<n>/end`, `head` (the state c2 last left the
tree in: a turn's end or a rewind's target) and `rewinds/<k>` (the tree each rewind replaced,
so a rewind can itself be undone). Git work runs in a worker thread, one operation per session
at a time. A checkpoint that cannot be taken is logged and the turn goes on without one.

Over 300 lines: the turn hooks, the diffs and rewind share the per-session serialisation
and the ref layout above; the git plumbing is core/worktrees/checkpoints.py.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from c2.core.activity import is_busy
from c2.core.errors import (
    CheckpointGitError,
    DomainError,
    ForceRequiredError,
    NoCheckpointsError,
    NoSuchCheckpointError,
    NoSuchTurnError,
    OutsideChangesError,
    SessionNotFoundError,
    TurnAlreadyRunningError,
    WorktreeError,
)
from c2.core.protocol.events import Event, SessionRewound, TurnEnded
from c2.core.protocol.ops import RewindOp
from c2.core.protocol.state import CheckpointPart, RewindPart
from c2.core.session import SessionRecord
from c2.core.store.database import Store, UnitOfWork
from c2.core.worktrees.checkpoints import (
    REF_ROOT,
    Workspace,
    capture,
    changed_paths,
    checkout_root,
    commit_tree_of,
    delete_refs,
    diff_trees,
    list_refs,
    restore,
    set_ref,
    unrecorded_in_the_way,
    unrestored_paths,
)

if TYPE_CHECKING:
    from c2.core.live import LiveSession
    from c2.core.live_agents import LiveAgents

log = logging.getLogger(__name__)
T = TypeVar("T")
_REF_SAFE = re.compile(r"^[A-Za-z0-9-]{1,128}$")
Step = Callable[[UnitOfWork], None]


class FileChange(BaseModel):  # noqa: D101 - wire model: a docstring becomes its OpenAPI description
    path: str
    old_path: str | None
    status: str
    binary: bool
    diff: str
    truncated: bool


class DiffResult(BaseModel):
    """A turn's net change (`turn` set) or the session's since its baseline (`turn` null)."""

    session: str
    turn: int | None
    running: bool
    truncated: bool
    files: list[FileChange]


class RewindResult(BaseModel):  # noqa: D101 - wire model: a docstring becomes its OpenAPI description
    session: str
    to_turn: int | None
    checkpoint: str
    pre_rewind_checkpoint: str


@dataclass(frozen=True)
class TurnCheckpoint:
    """The end-of-turn checkpoint and what it adds to the turn's closing commit."""

    session: str
    turn: int | None
    tree: str | None

    def stamp(self, closing: Event) -> Event:
        """`turn_ended` with its turn number and checkpoint; other closings unchanged."""
        if isinstance(closing, TurnEnded):
            return closing.model_copy(update={"turn": self.turn, "checkpoint": self.tree})
        return closing

    @property
    def steps(self) -> tuple[Step, ...]:
        """The transcript row that keeps the checkpoint with its turn."""
        if self.tree is None or self.turn is None:
            return ()
        part = CheckpointPart(turn=self.turn, checkpoint=self.tree)
        sid = self.session

        def record(uow: UnitOfWork) -> None:
            uow.parts.append(sid, "agent", part)

        return (record,)


class _Refs:
    """Ref names of one session's checkpoints."""

    def __init__(self, session: str) -> None:
        self.prefix = f"{REF_ROOT}/{session}/"
        self.baseline = self.prefix + "baseline"
        self.head = self.prefix + "head"

    def start(self, turn: int) -> str:
        return f"{self.prefix}turns/{turn}/start"

    def end(self, turn: int) -> str:
        return f"{self.prefix}turns/{turn}/end"

    def rewind(self, index: int) -> str:
        return f"{self.prefix}rewinds/{index}"

    def after_turn(self, refs: dict[str, str], turn: int) -> str | None:
        """The tree after `turn`: its end, else (the end was never recorded: c2 stopped) the
        next turn's start; turn 0 is the baseline."""
        if turn == 0:
            return refs.get(self.baseline)
        return refs.get(self.end(turn)) or refs.get(self.start(turn + 1))

    def turn_of(self, refs: dict[str, str], tree: str) -> int | None:
        """The latest turn whose end is `tree` (0: the baseline), None if none."""
        found = [
            int(m.group(1))
            for name, sha in refs.items()
            if sha == tree
            and (m := re.fullmatch(re.escape(self.prefix) + r"turns/(\d+)/end", name))
        ]
        if found:
            return max(found)
        return 0 if refs.get(self.baseline) == tree else None


class CheckpointService:
    """Checkpoints of every session; session indexes live under `indexes`."""

    def __init__(self, live: LiveAgents, store: Store, indexes: Path) -> None:
        self._live = live
        self._store = store
        self._indexes = indexes
        self._locks: dict[str, asyncio.Lock] = {}
        self._spaces: dict[str, Workspace | None] = {}
        self._running: dict[str, int] = {}  # session -> number of its running turn

    # -- turn hooks (core/turns.py) -------------------------------------------------------

    async def turn_started(self, live: LiveSession, turn: int | None) -> None:
        """Record the tree as the turn starts (and the session's baseline before its first)."""
        record = live.record
        if turn is None or await self._workspace(record) is None:
            return  # not a git checkout: nothing to record, nothing to say
        self._running[live.id] = turn
        try:
            await self._git(record, lambda ws, refs: self._start_sync(record, ws, refs, turn))
        except Exception as exc:  # a checkpoint must never cost the turn
            log.warning("no start checkpoint for turn %s of %s: %s", turn, live.id, exc)

    def _start_sync(self, record: SessionRecord, ws: Workspace, refs: _Refs, turn: int) -> None:
        tree = capture(ws)
        if not list_refs(ws.root, refs.baseline):
            base = record.worktree_baseline
            # A worktree session starts from its baseline commit; another folder from the
            # state c2 first saw it in.
            set_ref(ws.root, refs.baseline, commit_tree_of(ws.root, base.sha) if base else tree)
            set_ref(ws.root, refs.head, tree)
        set_ref(ws.root, refs.start(turn), tree)

    async def turn_ended(self, live: LiveSession, turn: int | None) -> TurnCheckpoint:
        """Record the tree as the turn ends (however it ends)."""
        self._running.pop(live.id, None)
        if turn is None or await self._workspace(live.record) is None:
            return TurnCheckpoint(live.id, turn, None)

        def end(ws: Workspace, refs: _Refs) -> str:
            tree = capture(ws)
            set_ref(ws.root, refs.end(turn), tree)
            set_ref(ws.root, refs.head, tree)
            return tree

        try:
            tree = await self._git(live.record, end)
        except Exception as exc:  # the turn's end must be committed whatever happens here
            log.warning("no end checkpoint for turn %s of %s: %s", turn, live.id, exc)
            tree = None
        return TurnCheckpoint(live.id, turn, tree)

    # -- reads --------------------------------------------------------------------------------

    async def turn_diff(self, session_id: str, turn: int) -> DiffResult:
        """What turn `turn` changed in the session's folder (its start to its end checkpoint)."""
        record = await self._record(session_id)
        running = self._running.get(session_id) == turn

        def read(ws: Workspace, refs: _Refs) -> DiffResult:
            known = list_refs(ws.root, refs.prefix)
            start = known.get(refs.start(turn))
            if start is None:
                raise NoSuchTurnError(f"turn {turn} has no checkpoint", session=session_id)
            end = known.get(refs.end(turn))
            if end is None and not running:
                end = known.get(refs.start(turn + 1))
            new = end if end is not None else capture(ws)
            return _result(
                session_id, turn, running and end is None, diff_trees(ws.root, start, new)
            )

        return await self._git(record, read)

    async def session_diff(self, session_id: str) -> DiffResult:
        """What the session's turns changed in its folder, from its first checkpoint to now."""
        record = await self._record(session_id)
        running = session_id in self._running

        def read(ws: Workspace, refs: _Refs) -> DiffResult:
            now = capture(ws)
            base = list_refs(ws.root, refs.baseline).get(refs.baseline)
            if base is None:
                baseline = record.worktree_baseline
                base = commit_tree_of(ws.root, baseline.sha) if baseline else now
            return _result(session_id, None, running, diff_trees(ws.root, base, now))

        return await self._git(record, read)

    # -- rewind -------------------------------------------------------------------------------

    async def rewind(self, op: RewindOp) -> RewindResult:
        """Restore the session's folder to a turn's end or a checkpoint (exactly one given);
        what the folder held before is kept as a checkpoint of its own."""
        rid, sid = op.request_id, op.session
        try:
            live = await self._live.load(sid, rid)
            async with live.lock:  # no turn can start while the tree is being restored
                if live.turn is not None or is_busy(live.record.activity):
                    raise TurnAlreadyRunningError(
                        "a turn is running; cancel it or wait before rewinding", session=sid
                    )
                plain = live.record.worktree_path is None
                result = await self._git(
                    live.record, lambda ws, refs: _rewind_sync(op, ws, refs, plain=plain)
                )
                part = RewindPart(
                    to_turn=result.to_turn,
                    checkpoint=result.checkpoint,
                    pre_rewind_checkpoint=result.pre_rewind_checkpoint,
                )
                event = SessionRewound(
                    session=sid,
                    to_turn=result.to_turn,
                    checkpoint=result.checkpoint,
                    pre_rewind_checkpoint=result.pre_rewind_checkpoint,
                    request_id=rid,
                )

                def persist(uow: UnitOfWork) -> None:
                    seq = uow.parts.append(sid, "agent", part)
                    uow.emit(event.model_copy(update={"transcript_seq": seq}))
                    uow.answer(result)  # kept with the rewind's record (idempotency)

                await self._store.write(persist)
            return result
        except DomainError as exc:
            exc.session, exc.request_id = exc.session or sid, rid
            raise

    # -- forks (core/forks.py) ----------------------------------------------------------------

    async def seed_fork(self, parent: SessionRecord, child: SessionRecord, turn: int) -> None:
        """Give a fork's new checkout the parent's files after `turn`, and the parent's
        checkpoints up to it as its own (same repository, so the same objects)."""
        if await self._workspace(parent) is None or parent.worktree_discarded:
            if turn == 0:
                return  # the baseline commit is the state after turn 0
            raise NoCheckpointsError(
                f"the parent's files after turn {turn} were not recorded (its worktree was "
                "discarded, or its folder is not a git checkout): fork at turn 0 or without "
                "a worktree"
            )
        source = _Refs(parent.id)

        def seed(ws: Workspace, refs: _Refs) -> None:
            known = list_refs(ws.root, source.prefix)
            tree = source.after_turn(known, turn)
            if tree is None:
                return
            capture(ws)  # the child's index starts from its fresh checkout
            restore(ws, tree)
            for name, sha in known.items():
                rest = name.removeprefix(source.prefix)
                step = re.fullmatch(r"turns/(\d+)/(start|end)", rest)
                if rest == "baseline" or (step and int(step.group(1)) <= turn):
                    set_ref(ws.root, refs.prefix + rest, sha)
            set_ref(ws.root, refs.head, tree)

        await self._git(child, seed)

    # -- garbage collection -------------------------------------------------------------------

    async def forget(self, record: SessionRecord) -> None:
        """Drop the session's checkpoint refs and index (session deleted, worktree discarded);
        git's own gc then reclaims the objects nothing else references."""
        identity = record.worktree_identity or {}
        common = identity.get("common_dir")
        ws = await self._workspace(record)
        where = Path(str(common)) if common else (ws.root if ws is not None else None)
        index = self._index(record.id)
        self._spaces[record.id] = None  # no more checkpoints for it
        self._running.pop(record.id, None)
        if where is None or not _REF_SAFE.match(record.id):
            return
        try:
            async with self._lock(record.id):
                await asyncio.to_thread(delete_refs, where, _Refs(record.id).prefix)
                await asyncio.to_thread(index.unlink, missing_ok=True)
        except (DomainError, OSError) as exc:
            log.warning("could not remove the checkpoints of %s: %s", record.id, exc)

    # -- helpers ------------------------------------------------------------------------------

    async def _record(self, session_id: str) -> SessionRecord:
        live = self._live.get(session_id)
        if live is not None:
            return live.record
        record: SessionRecord | None = await self._store.read(lambda r: r.sessions.get(session_id))
        if record is None or record.archived:
            raise SessionNotFoundError("no such session", session=session_id)
        return record

    def _index(self, session_id: str) -> Path:
        return self._indexes / f"{session_id}.index"

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    async def _workspace(self, record: SessionRecord) -> Workspace | None:
        if record.id in self._spaces:
            return self._spaces[record.id]
        if record.worktree_discarded or not _REF_SAFE.match(record.id):
            space = None
        else:
            root = record.worktree_path
            found = Path(root) if root else await asyncio.to_thread(checkout_root, record.cwd)
            space = Workspace(found, self._index(record.id)) if found is not None else None
        self._spaces[record.id] = space
        return space

    async def _git(self, record: SessionRecord, work: Callable[[Workspace, _Refs], T]) -> T:
        """Run `work` in a worker thread, one at a time per session."""
        ws = None if record.worktree_discarded else await self._workspace(record)
        if ws is None:
            raise NoCheckpointsError(
                "the session's folder is not a git checkout (or its worktree was discarded): "
                "it has no checkpoints",
                session=record.id,
            )
        async with self._lock(record.id):
            job = asyncio.ensure_future(asyncio.to_thread(work, ws, _Refs(record.id)))
            try:
                return await asyncio.shield(job)
            except asyncio.CancelledError:
                # git cannot be interrupted: hold the session's lock until it is done, so the
                # next operation never meets a half-written session index.
                await asyncio.wait({job})
                raise


def _result(session: str, turn: int | None, running: bool, diff: Any) -> DiffResult:
    return DiffResult(
        session=session,
        turn=turn,
        running=running,
        truncated=diff.truncated,
        files=[FileChange(**f.wire()) for f in diff.files],
    )


def _rewind_sync(op: RewindOp, ws: Workspace, refs: _Refs, *, plain: bool) -> RewindResult:
    """The rewind's git work. Refusals come before any change, the most telling first (the
    outside changes, with their paths, before a plain folder's need for force); a restore
    that cannot complete is undone (`_restore_or_roll_back`)."""
    known = list_refs(ws.root, refs.prefix)
    if op.to_checkpoint is not None:
        target = op.to_checkpoint if op.to_checkpoint in known.values() else None
        if target is None:
            raise NoSuchCheckpointError(f"{op.to_checkpoint} is not a checkpoint of this session")
        to_turn = refs.turn_of(known, target)
    else:
        assert op.to_turn is not None
        to_turn = op.to_turn
        target = refs.after_turn(known, to_turn)
        if target is None:
            raise NoSuchTurnError(f"turn {to_turn} has no recorded end state")
    before = capture(ws)
    last = known.get(refs.head)
    if last is not None and before != last and not op.force:
        error = OutsideChangesError(
            "the working tree changed outside any turn since c2 last recorded it; "
            'rewind with "force": true to replace those changes (they are kept as a checkpoint)'
        )
        error.details["paths"] = changed_paths(ws.root, last, before)
        raise error
    if plain and not op.force:
        raise ForceRequiredError(
            "this session works in the project folder itself, not in its own "
            'worktree: rewinding it needs "force": true'
        )
    if ignored := unrecorded_in_the_way(ws, before, target):
        refusal = WorktreeError(
            "the rewind would delete files git ignores, which no checkpoint keeps: "
            f"{_listed(ignored)}; move them elsewhere and rewind again (nothing was changed)"
        )
        refusal.details["paths"] = ignored
        raise refusal
    rewinds = [n for n in known if n.startswith(refs.prefix + "rewinds/")]
    set_ref(ws.root, refs.rewind(len(rewinds) + 1), before)  # kept before anything changes
    now = _restore_or_roll_back(ws, target, before)
    set_ref(ws.root, refs.head, now)  # the target, and nested repositories as they stand
    return RewindResult(
        session=op.session, to_turn=to_turn, checkpoint=target, pre_rewind_checkpoint=before
    )


def _restore_or_roll_back(ws: Workspace, target: str, before: str) -> str:
    """Restore `target` and return the folder's tree now (the target but for nested
    repositories, which a restore leaves alone). When the folder cannot be made to match
    (a file git may not remove, a read-only folder), it is put back to `before`, so a failed
    rewind changes nothing; the error says so, or, should that fail too, where `before` is."""
    try:
        return _restore_exactly(ws, target)
    except CheckpointGitError as exc:
        problem = exc.message
    try:
        capture(ws)  # the index must hold what the folder holds now, for read-tree to undo it
        _restore_exactly(ws, before)
    except CheckpointGitError as exc:
        raise WorktreeError(
            f"the rewind could not complete ({problem}), and putting the folder back failed "
            f"too ({exc.message}); what it held before is checkpoint {before}: rewind to it "
            "with to_checkpoint"
        ) from None
    raise WorktreeError(f"the rewind could not complete ({problem}); nothing was changed")


def _restore_exactly(ws: Workspace, tree: str) -> str:
    restore(ws, tree)
    now = capture(ws)
    if now != tree and (left := unrestored_paths(ws.root, tree, now)):
        raise CheckpointGitError(f"these paths kept their contents: {_listed(left)}")
    return now


def _listed(paths: list[str], most: int = 20) -> str:
    shown = ", ".join(paths[:most])
    return shown if len(paths) <= most else f"{shown} and {len(paths) - most} more"
