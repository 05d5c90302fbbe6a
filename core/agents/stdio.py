"""The agent subprocess: spawning (own process group, killed with the server on Linux), its
stdout on a pipe c2 reads itself (core/agents/pipes.py) into the NDJSON transport
(core/agents/framing.py), exit detection that does not depend on the pipes closing (a
grandchild may hold stdout open), process-group termination, and the tail of its stderr.

Agents are started with the standard library's `subprocess.Popen`, never the loop's
`subprocess_exec`: on uvloop that is a `fork` of the whole server on the loop's thread, which
held every stream and request for 5–20 ms per new session as the server's memory grew, where
Popen's `vfork` takes ~0.2 ms (docs/decisions.md, "An agent's spawn off the event loop").
`vfork` rules out a `preexec_fn`, so the parent-death signal is set by `setpriv` in the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping

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


def _death_signal_prefix() -> tuple[str, ...]:
    """What the agent's command line starts with so that its leader gets SIGKILL when the
    thread that started it (the event loop's) dies: util-linux's `setpriv`, which sets the
    parent-death signal and execs the agent (Linux). Empty where there is none: the start-up
    sweep of recorded groups still ends what a dead server left (core/processes.py)."""
    if not sys.platform.startswith("linux"):
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        logger.warning(
            "setpriv (util-linux) not found: agents will outlive a c2 that dies until its next "
            "start ends them"
        )
        return ()
    return (setpriv, "--pdeathsig", "KILL", "--")


_DIE_WITH_PARENT = _death_signal_prefix()


class AgentChild:
    """One spawned agent: its stdin as a stream writer, its stderr as a stream reader, its
    stdout on c2's own pipe, and its exit, seen when the kernel reports it (a pidfd), not when
    its pipes close: `Process.wait()` would wait for every pipe, which a surviving grandchild
    keeps open."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: asyncio.StreamWriter,
        stderr: asyncio.StreamReader,
        stdout_pipe: StdoutPipe,
    ) -> None:
        # Kept while the child lives: a Popen collected before its child is reaped goes on
        # subprocess's list of children to reap, whose next sweep would take this exit status.
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stderr = stderr
        self.stdout_pipe = stdout_pipe
        self.exited = asyncio.Event()  # set once the child is reaped

    @property
    def returncode(self) -> int | None:
        """The exit code once reaped (negative: the signal that ended it), else None."""
        return self._popen.returncode

    def _watch_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        """Reap the child when it exits: on the loop through a pidfd (Linux 5.3+), else on a
        thread of its own (what asyncio's own child watcher does)."""
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            threading.Thread(
                target=self._wait_on_thread, args=(loop,), name=f"c2-agent-{self.pid}", daemon=True
            ).start()
            return

        def reap() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._popen.poll()
            self.exited.set()

        loop.add_reader(pidfd, reap)

    def _wait_on_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        self._popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self.exited.set)


class _Stdin(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """The agent's stdin transport's protocol: a writer's `drain` waits while the pipe is full."""


async def spawn(
    command: str,
    args: list[str],
    env: Mapping[str, str],
    cwd: str,
    pipes: PipeTicker | None = None,
) -> AgentChild:
    """Start `command` in its own session/process group with piped stdio. No shell.

    A missing or non-executable command raises FileNotFoundError or PermissionError here, as
    exec would. On Linux the leader also dies with c2 (parent-death signal); its own children
    cannot be covered that way, the start-up sweep of recorded groups ends them
    (core/processes.py).
    """
    loop = asyncio.get_running_loop()
    child_env = agent_environment(env)
    executable = await asyncio.to_thread(_executable, command, child_env, cwd)
    read_end, write_end = os.pipe()  # neither inherited by other children (PEP 446)
    _widen(read_end)
    stdout = StdoutPipe(read_end, pipes)
    try:
        # On the loop's thread, whose exit is the parent's death for the signal above; a
        # vfork, which returns once the child has exec'd (~0.2 ms).
        popen = subprocess.Popen(  # noqa: ASYNC220
            [*_DIE_WITH_PARENT, executable, *args],
            stdin=subprocess.PIPE,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=child_env,
            cwd=cwd,
            start_new_session=True,
            bufsize=0,
        )
    except BaseException:
        stdout.close()
        raise
    finally:
        # The child has its own copy: EOF comes when it and its own children let go of it.
        os.close(write_end)
    try:
        child = await _connect(loop, popen, stdout)
    except BaseException:
        signal_group(popen.pid, signal.SIGKILL)
        stdout.close()
        for pipe in (popen.stdin, popen.stderr):  # a no-op for one a transport closed
            if pipe is not None:
                pipe.close()
        await asyncio.to_thread(popen.wait)
        raise
    child._watch_exit(loop)
    return child


async def _connect(
    loop: asyncio.AbstractEventLoop, popen: subprocess.Popen[bytes], stdout: StdoutPipe
) -> AgentChild:
    """The child's stdin and stderr pipes handed to the loop (whose transports own them)."""
    assert popen.stdin is not None and popen.stderr is not None
    stdin_transport, stdin_protocol = await loop.connect_write_pipe(
        lambda: _Stdin(loop), popen.stdin
    )
    reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), popen.stderr)
    except BaseException:
        stdin_transport.close()
        raise
    writer = asyncio.StreamWriter(stdin_transport, stdin_protocol, None, loop)
    return AgentChild(popen, writer, reader, stdout)


def _executable(command: str, env: Mapping[str, str], cwd: str) -> str:
    """The file exec would run for `command` in the child: a path with a slash from the
    child's working directory, a bare name through the child's PATH. Resolved here so a
    missing or non-executable command fails before anything starts, as exec would fail, and
    not as an exit of the `setpriv` in front of it."""
    if "/" in command:
        candidates = [os.path.join(cwd, command)]
    else:
        path = env.get("PATH", os.defpath)
        candidates = [os.path.join(cwd, folder, command) for folder in path.split(os.pathsep)]
    denied = False
    for candidate in candidates:
        if os.path.isfile(candidate):
            if os.access(candidate, os.X_OK):
                return os.path.abspath(candidate)
            denied = True
    if denied:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


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
