"""Which processes are ours: /proc identities of agent process groups, and ending the groups a
crashed c2 left behind (issue: orphans after a crash).

A pid alone is not an identity (pids are reused); (boot id, pid, start time) is. A recorded
group is ended only when its leader still runs with the recorded start time, or, once the
leader is gone, only its members that started after the recorded leader and still belong to
its group and session: Linux never hands out a pid while it still names a process group, so
group P without a leader is the recorded group unless P was reused after that group had fully
ended (a case this check cannot tell apart; see docs/decisions.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)
PROC = Path("/proc")


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat that identify a process and its group."""

    pid: int
    state: str
    pgid: int
    sid: int
    start_time: int  # clock ticks after boot


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat, or None when it is gone (or /proc is unavailable)."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ")".
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcStat(pid, fields[0], int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def boot_id() -> str:
    """This boot's id ("" where the kernel does not say)."""
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def running(stat: ProcStat | None) -> bool:
    """True for a process that exists and is not a zombie."""
    return stat is not None and stat.state not in ("Z", "X")


def group_members(pgid: int) -> list[ProcStat]:
    """Every running process whose process group is `pgid`."""
    members: list[ProcStat] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC):
            if entry.name.isdigit():
                stat = read_stat(int(entry.name))
                if running(stat) and stat is not None and stat.pgid == pgid:
                    members.append(stat)
    return members


def end_orphaned_group(pid: int, pgid: int, start_time: int, recorded_boot: str) -> int:
    """SIGKILL what is left of a recorded agent group; returns how many processes were hit."""
    if not recorded_boot or recorded_boot != boot_id():
        return 0  # another boot: every process of that group ended with it
    leader = read_stat(pid)
    if leader is not None:
        if leader.start_time != start_time or leader.pgid != pgid:
            return 0  # the pid now names another process
        members = [m for m in group_members(pgid) if m.start_time >= start_time]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        return max(len(members), 1)
    hit = 0
    for member in group_members(pgid):
        if member.start_time < start_time or member.sid != pgid:
            continue  # older than our leader, or not of the session it created
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member.pid, signal.SIGKILL)
            hit += 1
    return hit
