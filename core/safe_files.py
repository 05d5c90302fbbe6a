"""Reading files that a repository (or an agent in a worktree) controls, without trusting them.

A checked-out project may hold symlinks to `/dev/zero` or to files outside the project, FIFOs,
sockets and huge files (git keeps symlinks; an agent can create anything). `read_bounded` reads
only a regular file, at most `limit` bytes, never blocks on open, and with `root` never follows
a symlink out of that folder. Every read of project or worktree content goes through here.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: the resolved path is
# walked component by component, so a symlink swapped in meanwhile is refused, not followed.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFileError(OSError):
    """The file is not a regular file, is too large, or lies outside its allowed folder."""


def _contained(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _open_resolved(real: str, root: str | None) -> int:
    """Open `real` (symlink-free) read-only, each component without following symlinks."""
    base = root if root is not None else os.sep
    parts = Path(real).relative_to(base).parts
    if not parts:
        raise UnsafeFileError(f"{real} is a directory")
    fd = os.open(base, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def read_bounded(
    path: str | os.PathLike[str], *, limit: int, root: str | os.PathLike[str] | None
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them.

    With `root`, the file (after resolving every symlink) must lie inside `root`. Raises
    FileNotFoundError when it does not exist, UnsafeFileError when it is not a regular file,
    is larger than `limit` or escapes `root`, and OSError for other failures.
    """
    real = os.path.realpath(path)
    real_root = os.path.realpath(root) if root is not None else None
    if real_root is not None and not _contained(real, real_root):
        raise UnsafeFileError(f"{path} resolves outside {root}")
    try:
        fd = _open_resolved(real, real_root)
    except (FileNotFoundError, NotADirectoryError, UnsafeFileError):
        raise
    except OSError as exc:  # ELOOP (a symlink swapped in), ENXIO (a socket), EACCES, ...
        raise UnsafeFileError(f"{path} cannot be opened safely: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(f"{path} is not a regular file")
        if info.st_size > limit:
            raise UnsafeFileError(f"{path} is larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # the size may grow after fstat: read at most limit + 1 bytes
            chunk = os.read(fd, min(65536, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnsafeFileError(f"{path} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def is_dir_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether `path` is a directory whose resolved location lies inside `root`."""
    real = os.path.realpath(path)
    if not _contained(real, os.path.realpath(root)):
        return False
    try:
        return stat.S_ISDIR(os.stat(real).st_mode)
    except OSError:
        return False
