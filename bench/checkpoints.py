"""Checkpoint cost (issue 14): time a turn's start and end checkpoints add for a worktree of
10,000 files with 100 changed during the turn, plus the turn's diff and a rewind.

Runs the same git plumbing a turn runs (core/worktrees/checkpoints.py: `git add -A` into the
session's own index, `write-tree`, `update-ref`) on a real repository in a temp dir, and
prints medians and maxima over several rounds. Usage: `python -m bench.checkpoints [files]
[changed] [rounds]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from c2.core.worktrees.checkpoints import Workspace, capture, diff_trees, restore, set_ref

TARGET_MS = 200  # issue 14: what a turn's start and end checkpoints may add

ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], env=ENV, check=True, capture_output=True)


def make_tree(root: Path, files: int) -> list[Path]:
    paths = []
    for i in range(files):
        path = root / f"dir{i // 100:03d}" / f"file{i:05d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# file {i}\n" + "VALUE = 1\n" * 20)
        paths.append(path)
    git(root, "init", "--quiet")
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", "tree")
    return paths


def timed(call: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = call()
    return (time.perf_counter() - start) * 1000, value


def rewind(ws: Workspace, tree: str) -> None:
    """What a rewind does: capture the worktree as it is (so the rewind can be undone), then
    restore `tree`."""
    capture(ws)
    restore(ws, tree)


def checkpoint(ws: Workspace, ref: str) -> str:
    """What a turn hook does: capture and keep it under a ref."""
    tree = capture(ws)
    set_ref(ws.root, ref, tree)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("files", type=int, nargs="?", default=10_000, help="files in the tree")
    parser.add_argument("changed", type=int, nargs="?", default=100, help="files changed a turn")
    parser.add_argument("rounds", type=int, nargs="?", default=7, help="turns")
    args = parser.parse_args()
    files, changed, rounds = args.files, args.changed, args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        paths = make_tree(root, files)
        ws = Workspace(root, Path(tmp) / "session.index")
        first, _ = timed(partial(checkpoint, ws, "refs/c2/checkpoints/bench/baseline"))
        starts, ends, diffs, rewinds = [], [], [], []
        for n in range(1, rounds + 1):
            ms, before = timed(partial(checkpoint, ws, f"refs/c2/checkpoints/bench/{n}/start"))
            starts.append(ms)
            for i, path in enumerate(paths[n * changed : (n + 1) * changed]):
                path.write_text(f"# turn {n} changed {i}\n" + "VALUE = 2\n" * 20)
            (root / f"new{n}.txt").write_text("untracked\n")
            ms, after = timed(partial(checkpoint, ws, f"refs/c2/checkpoints/bench/{n}/end"))
            ends.append(ms)
            ms, _ = timed(partial(diff_trees, root, str(before), str(after)))
            diffs.append(ms)
            ms, _ = timed(partial(rewind, ws, str(before)))
            rewinds.append(ms)
            restore(ws, str(after))
            capture(ws)
    print(f"worktree: {files} files, {changed} changed per turn, {rounds} turns")
    print(f"target (issue 14): turn start and end checkpoints under {TARGET_MS} ms")
    print(f"first checkpoint (cold session index, seeded from none): {first:.0f} ms")
    for name, values in (
        ("turn start checkpoint", starts),
        ("turn end checkpoint", ends),
        (f"turn diff ({changed} files)", diffs),
        ("rewind (capture + restore)", rewinds),
    ):
        print(f"{name:28s} median {statistics.median(values):6.1f} ms  max {max(values):6.1f} ms")
    met = max(starts + ends) < TARGET_MS
    print(f"start and end under {TARGET_MS} ms in every turn: {'met' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
