"""The agent subprocess: spawning (own process group, killed with the server on Linux), its
stdout on a pipe c2 reads itself (core/agents/pipes.py) into the NDJSON transport
(core/agents/framing.py), exit detection that does not depend on the pipes closing (a
grandchild may hold stdout open), process-group termination, and the tail of its stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import logging
import os
import signal
import sys
from collections.abc import Callable

from c2.core.agents.environment import agent_environment
from c2.core.agents.framing import LINE_LIMIT
from c2.core.agents.pipes import PipeTicker, StdoutPipe

logger = logging.getLogger(__name__)

# The agent's stdout pipe holds this much, not Linux's 64 KiB. Under load the pipe is read on
# the pipes' tick (two commit intervals, core/agents/pipes.py), and an agent streaming flat
# out (~13 MB/s here) filled 64 KiB in 5 ms, then blocked for the rest of the tick: with a
# 15 ms commit interval flat out fell to a third of the bare reader, with this pipe 71 %
# (docs/decisions.md, "fifteenth sitting"). No more than that: the pipes of one user count
# against its pipe-user-pages-soft.
STDOUT_PIPE_BYTES = 256 * 1024
STDERR_TAIL_BYTES = 4096
ERROR_TAIL_BYTES = 2048  # what an error report carries of the agent's stderr
ERROR_TAIL_LINES = 20
PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl, resolved once here: the child between fork and exec must not load it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


_PRCTL = _load_prctl()


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A preexec hook giving the agent leader SIGKILL when the spawning thread dies (Linux).

    It survives exec. The getppid check closes the race where c2 died before the prctl.
    """
    prctl = _PRCTL
    if prctl is None:
        return None

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class AgentProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """Stream protocol for the agent's stdin and stderr that reports process exit as soon as
    the child is reaped; stdout is c2's own pipe (`stdout_pipe`, core/agents/pipes.py).

    `Process.wait()` (Python 3.11) only returns once every pipe is closed, which never happens
    while a surviving grandchild keeps stdout open; `process_exited` fires on reap.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop, stdout: StdoutPipe) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()
        self.stdout_pipe = stdout

    def process_exited(self) -> None:
        """Mark the process exited (without waiting for its pipes to close)."""
        super().process_exited()
        self.exited.set()


async def spawn(
    command: str,
    args: list[str],
    env: dict[str, str],
    cwd: str,
    pipes: PipeTicker | None = None,
) -> tuple[asyncio.subprocess.Process, AgentProtocol]:
    """Start `command` in its own session/process group with piped stdio. No shell.

    On Linux the leader also dies with c2 (parent-death signal); its own children cannot be
    covered that way, the start-up sweep of recorded groups ends them (core/processes.py).
    """
    loop = asyncio.get_running_loop()
    read_end, write_end = os.pipe()  # neither inherited by other children (PEP 446)
    _widen(read_end)
    stdout = StdoutPipe(read_end, pipes)
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: AgentProtocol(LINE_LIMIT, loop, stdout),
            command,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=write_end,
            stderr=asyncio.subprocess.PIPE,
            env=agent_environment(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()),
        )
    except BaseException:
        stdout.close()
        raise
    finally:
        # The child has its own copy: EOF comes when it and its own children let go of it.
        os.close(write_end)
    return asyncio.subprocess.Process(transport, protocol, loop), protocol


def _widen(fd: int) -> None:
    """Make `fd`'s pipe hold STDOUT_PIPE_BYTES (Linux); the default where that is refused."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is None:
        return
    with contextlib.suppress(OSError):  # EPERM past the user's pipe quota: 64 KiB still works
        fcntl.fcntl(fd, setsize, STDOUT_PIPE_BYTES)


def signal_group(pgid: int, signum: int) -> bool:
    """Send `signum` to the process group; False when no member is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed credentials; nothing more we can do
        logger.warning("not allowed to signal agent process group %d", pgid)
        return False
    return True


async def terminate_group(pgid: int, exited: asyncio.Event, grace: float) -> None:
    """SIGTERM the group, wait up to `grace` for the leader and the group to go, then SIGKILL."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    if signal_group(pgid, signal.SIGTERM):
        while loop.time() < deadline:
            if exited.is_set() and not signal_group(pgid, 0):
                return
            await asyncio.sleep(0.02)
    signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(grace, 1.0)):
            await exited.wait()


class StderrTail:
    """Drains the agent's stderr (so it can never block on a full pipe), keeping the tail."""

    def __init__(self) -> None:
        self._tail = bytearray()
        self.received = 0  # bytes seen so far: a mark for `since`
        self.grew = asyncio.Event()  # set on every chunk; cleared by whoever waits on it
        self.done = asyncio.Event()

    async def drain(self, reader: asyncio.StreamReader) -> None:
        """Read until EOF; log what arrives at debug level."""
        try:
            while chunk := await reader.read(65536):
                logger.debug("agent stderr: %s", chunk.decode(errors="replace").rstrip())
                self._tail += chunk
                del self._tail[:-STDERR_TAIL_BYTES]
                self.received += len(chunk)
                self.grew.set()
        finally:
            self.done.set()

    def last_line(self, limit: int = 300) -> str:
        """The last non-blank stderr line, bounded, or ""."""
        lines = [ln for ln in self._tail.decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1].strip()[:limit] if lines else ""

    def since(self, mark: int) -> str:
        """What arrived after `mark` (a past `received`), bounded to the last ERROR_TAIL_BYTES
        and ERROR_TAIL_LINES non-blank lines; "" if nothing did."""
        fresh = min(self.received - mark, len(self._tail), ERROR_TAIL_BYTES)
        if fresh <= 0:
            return ""
        text = bytes(self._tail[-fresh:]).decode(errors="replace")
        lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
        return "\n".join(lines[-ERROR_TAIL_LINES:])
