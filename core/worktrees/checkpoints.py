"""Working-tree checkpoints as git tree objects, their diffs, and restoring one (issue 14).

Synchronous git plumbing (subprocess, argument lists only); core/checkpoints.py runs it in a
worker thread, one operation per session at a time. A checkpoint is the tree `git write-tree`
makes from a session's *own* index file (GIT_INDEX_FILE, kept in the c2 home), after
`git add -A` there: tracked, modified and untracked files, ignored ones excluded. The user's
index, stash, HEAD and branches are never read for writing nor changed. Checkpoint ids are
kept as refs under `refs/c2/checkpoints/<session>/` so `git gc` keeps their objects.

Over 300 lines: capture, diff and restore are one piece of git plumbing sharing the private
index environment and the `_git` runner; split, each part would reach into the others.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from c2.core.errors import CheckpointGitError
from c2.core.worktrees.gitenv import neutral_git_env

REF_ROOT = "refs/c2/checkpoints"
FILE_DIFF_LIMIT = 256 * 1024  # bytes of one file's unified diff (issue 14 contract)
ANSWER_DIFF_LIMIT = 1024 * 1024  # bytes of all diffs of one answer
GIT_TIMEOUT = 120.0  # seconds; a checkpoint that takes longer is skipped by the caller
_READ_PIECE = 64 * 1024
# The user's git config must not change what we record or how a diff reads.
_GIT_CONFIG = (
    "-c",
    "core.quotepath=off",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "core.safecrlf=false",
)

GITLINK = "160000"  # a nested repository's entry in a tree (its commit)

Status = Literal["added", "modified", "deleted", "renamed"]
_STATUS: dict[str, Status] = {"A": "added", "M": "modified", "T": "modified", "D": "deleted"}


@dataclass(frozen=True)
class Workspace:
    """Where a session's checkpoints are taken: the checkout root and the session's index."""

    root: Path
    index: Path  # the session's own index file (never the checkout's)


@dataclass
class FileDiff:
    """One file a diff changed: its status, its patch (unless binary), maybe truncated."""

    path: str
    old_path: str | None
    status: Status
    binary: bool = False
    diff: str = ""
    truncated: bool = False

    def wire(self) -> dict[str, object]:
        """The file's entry as a diff route answers it."""
        return {
            "path": self.path,
            "old_path": self.old_path,
            "status": self.status,
            "binary": self.binary,
            "diff": self.diff,
            "truncated": self.truncated,
        }


@dataclass
class TreeDiff:
    """What changed between two trees, file by file (truncated past the size limit)."""

    files: list[FileDiff] = field(default_factory=list)
    truncated: bool = False


def checkout_root(cwd: str) -> Path | None:
    """Root of the git working tree holding `cwd`, None when there is none."""
    # GitPython loads here, on the caller's worker thread, not with the server (see
    # core/worktrees/__init__.py).
    from c2.core.worktrees.repository import NotACheckoutError, open_checkout

    try:
        with open_checkout(cwd) as (_, checkout):
            return checkout.root
    except NotACheckoutError:
        return None


def _env(index: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= neutral_git_env()  # no program named by the project's config runs
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"  # never refresh the user's index behind their back
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return env


def _git(root: Path, *args: str, index: Path | None = None, ok: tuple[int, ...] = (0,)) -> str:
    try:
        done = subprocess.run(
            ["git", *_GIT_CONFIG, "-C", str(root), *args],
            env=_env(index),
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckpointGitError(f"git {args[0]} failed in {root}: {exc}") from None
    if done.returncode not in ok:
        stderr = done.stderr.decode("utf-8", "replace").strip()
        raise CheckpointGitError(f"git {args[0]} failed in {root}: {stderr}")
    return done.stdout.decode("utf-8", "surrogateescape")


def _seed_index(ws: Workspace) -> None:
    """A first index for the session: a copy of the checkout's own (its stat cache makes the
    first `add -A` cheap), else empty. Copied, never linked: the user's stays untouched."""
    if ws.index.exists():
        return
    ws.index.parent.mkdir(parents=True, exist_ok=True)
    git_index = Path(_git(ws.root, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    git_index = Path(str(git_index).strip())
    if git_index.is_file():
        scratch = ws.index.with_suffix(".seed")
        shutil.copyfile(git_index, scratch)
        os.replace(scratch, ws.index)


def capture(ws: Workspace) -> str:
    """Record the working tree (ignored files excluded) and return its tree id."""
    _seed_index(ws)
    _git(ws.root, "add", "--all", "--", ".", index=ws.index)
    return _git(ws.root, "write-tree", index=ws.index).strip()


def commit_tree_of(root: Path, commit: str) -> str:
    """The root tree id of `commit`."""
    return _git(root, "rev-parse", "--verify", f"{commit}^{{tree}}").strip()


def set_ref(root: Path, ref: str, tree: str) -> None:
    """Point `ref` at `tree` (a checkpoint)."""
    _git(root, "update-ref", ref, tree)


def read_ref(root: Path, ref: str) -> str | None:
    """The object `ref` points at, None when there is no such ref."""
    out = _git(root, "rev-parse", "--verify", "--quiet", ref, ok=(0, 1))
    return out.strip() or None


def list_refs(root: Path, prefix: str) -> dict[str, str]:
    """Every ref under `prefix` → its object id."""
    out = _git(root, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition(" ")
        refs[name] = sha
    return refs


def delete_refs(root: Path, prefix: str) -> int:
    """Delete every ref under `prefix` (one transaction); returns how many."""
    names = list(list_refs(root, prefix))
    if names:
        script = "".join(f"delete {name}\n" for name in names)
        try:
            done = subprocess.run(
                ["git", "-C", str(root), "update-ref", "--stdin"],
                input=script.encode(),
                env=_env(),
                capture_output=True,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CheckpointGitError(f"git update-ref failed in {root}: {exc}") from None
        if done.returncode != 0:
            stderr = done.stderr.decode("utf-8", "replace").strip()
            raise CheckpointGitError(f"git update-ref failed in {root}: {stderr}")
    return len(names)


def changed_paths(root: Path, old: str, new: str) -> list[str]:
    """Paths that differ between two trees (no rename detection), sorted."""
    out = _git(root, "diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new)
    return sorted(p for p in out.split("\0") if p)


def restore(ws: Workspace, tree: str) -> None:
    """Make the working tree equal to `tree`: files of the session index (the last capture)
    that `tree` lacks are removed, the rest written. Ignored files are never touched, unless
    they stand where `tree` puts something (see `unrecorded_in_the_way`)."""
    _git(ws.root, "read-tree", "--reset", "-u", tree, index=ws.index)


def unrestored_paths(root: Path, target: str, now: str) -> list[str]:
    """Paths where the folder's tree `now` still differs from the `target` a restore wrote,
    nested repositories aside: a restore neither removes nor rewinds one (git records them
    by commit, "gitlinks", and leaves their folders alone), so they never count."""
    out = _git(root, "diff-tree", "-r", "-z", "--raw", "--no-renames", target, now)
    fields = out.split("\0")
    paths = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(":"):
            break
        old_mode, new_mode = meta[1:].split()[:2]
        if GITLINK not in (old_mode, new_mode):
            paths.append(path)
    return sorted(paths)


def unrecorded_in_the_way(ws: Workspace, current: str, target: str) -> list[str]:
    """Ignored files (which no checkpoint holds) that restoring `target` over `current` would
    delete or overwrite: read-tree removes whatever stands where `target` puts a file, a link
    or a folder, ignored files included. The session index must hold `current`."""
    added = _git(
        ws.root, "diff-tree", "-r", "-z", "--no-renames", "--diff-filter=A", "--name-only",
        current, target,
    )  # fmt: skip
    in_the_way: set[str] = set()
    folders: set[str] = set()  # real folders already looked at (many paths share them)
    for path in filter(None, added.split("\0")):
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            place = "/".join(parts[:depth])
            if depth < len(parts) and place in folders:
                continue
            on_disk = ws.root / place
            if not os.path.lexists(on_disk):
                break  # nothing stands here, nor below
            if depth == len(parts) or on_disk.is_symlink() or not on_disk.is_dir():
                in_the_way.add(place)  # what the target's file replaces, or a file in its way
                break
            folders.add(place)
    if not in_the_way:
        return []
    listing = ("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    out = _git(ws.root, "--literal-pathspecs", *listing, "--", *sorted(in_the_way), index=ws.index)
    return sorted(p for p in out.split("\0") if p)


def _entries(root: Path, old: str, new: str) -> list[FileDiff]:
    out = _git(root, "diff-tree", "-r", "-z", "-M", "--raw", old, new)
    fields = out.split("\0")
    files: list[FileDiff] = []
    i = 0
    while i < len(fields) and fields[i].startswith(":"):
        letter = fields[i].split()[-1][:1]
        if letter in ("R", "C"):
            source, path = fields[i + 1], fields[i + 2]
            i += 3
            if letter == "R":
                files.append(FileDiff(path, source, "renamed"))
            else:
                files.append(FileDiff(path, None, "added"))
            continue
        path = fields[i + 1]
        i += 2
        files.append(FileDiff(path, None, _STATUS.get(letter, "modified")))
    _mark_binary(root, old, new, files)
    return files


def _mark_binary(root: Path, old: str, new: str, files: list[FileDiff]) -> None:
    r"""`--numstat` says `-\t-` for a binary pair; it lists the pairs in --raw's order."""
    out = _git(root, "diff-tree", "-r", "-z", "-M", "--numstat", old, new)
    fields = out.split("\0")
    i = n = 0
    while i < len(fields) and n < len(files):
        counts = fields[i]
        if not counts:
            break
        added, deleted, path = ([*counts.split("\t", 2), "", ""])[:3]
        i += 1 if path else 3  # a rename: empty path, then source and destination
        files[n].binary = added == "-" and deleted == "-"
        n += 1


def diff_trees(
    root: Path,
    old: str,
    new: str,
    *,
    file_limit: int = FILE_DIFF_LIMIT,
    answer_limit: int = ANSWER_DIFF_LIMIT,
) -> TreeDiff:
    """Net change from `old` to `new`: every changed file listed, each with its unified diff
    cut at `file_limit` bytes and all diffs together at `answer_limit` (flags say so)."""
    result = TreeDiff(files=_entries(root, old, new))
    if not result.files:
        return result
    command = ["git", *_GIT_CONFIG, "-C", str(root), "diff-tree", "-r", "-p", "-M"]
    command += ["--no-color", "--no-ext-diff", "--no-textconv", old, new]
    try:
        proc = subprocess.Popen(
            command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
    except OSError as exc:
        raise CheckpointGitError(f"git diff-tree failed in {root}: {exc}") from None
    assert proc.stdout is not None
    try:
        _read_patches(proc.stdout, result, file_limit, answer_limit)
    finally:
        proc.kill()  # an answer cut short need not wait for the rest of a huge diff
        proc.stdout.close()
        proc.wait()
    return result


def _read_patches(stream: IO[bytes], result: TreeDiff, file_limit: int, answer_limit: int) -> None:
    """Split `git diff-tree -p` output into the files of `result` (same order as --raw)."""
    index = -1
    chunks: list[bytes] = []
    size = total = 0
    at_line_start = True

    def close() -> None:
        if index >= 0:
            result.files[index].diff = b"".join(chunks).decode("utf-8", "replace")

    while piece := stream.readline(_READ_PIECE):
        starts_line, at_line_start = at_line_start, piece.endswith(b"\n")
        if starts_line and piece.startswith(b"diff --git "):
            close()
            index += 1
            chunks, size = [], 0
            if index >= len(result.files):
                break  # never expected: git listed fewer pairs than it printed
        if index < 0:
            continue
        entry = result.files[index]
        if entry.truncated:
            continue
        if size + len(piece) > file_limit or total + len(piece) > answer_limit:
            entry.truncated = True
            if total + len(piece) > answer_limit:
                result.truncated = True
                break
            continue
        chunks.append(piece)
        size += len(piece)
        total += len(piece)
    close()
    if result.truncated:
        for entry in result.files[index + 1 :]:
            entry.truncated = True
