"""py-spy, from outside the server (`bench/fleet.py --profile FILE` with C2_BENCH_PROFILER=py-spy).

It samples every thread's Python stack without stopping the process (`--nonblocking`, so
batching and latency stay those of a plain run) and without the bias of an in-process sampler,
which only sees another thread where that thread lets the GIL go. Idle threads are left out
by py-spy itself. Time in C (a socket write, a commit, JSON) counts for the Python function
that called it; time in the event loop's own C code counts for `Runner.run`. A stack read
while it changed may come out cut short at the root: its leaf still counts.

`pip install py-spy` (it needs ptrace on the server, which runs as the same user).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

RATE = 250  # samples a second


def start(pid: int, raw: Path) -> subprocess.Popen[bytes]:
    """Start sampling `pid` into `raw` (collapsed stacks, one thread label first)."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        raise RuntimeError("C2_BENCH_PROFILER=py-spy needs py-spy: pip install py-spy")
    command = [exe, "record", "--pid", str(pid), "--rate", str(RATE), "--nonblocking"]
    command += ["--threads", "--format", "raw", "--output", str(raw)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop(sampler: subprocess.Popen[bytes], raw: Path, report: Path) -> None:
    """Stop sampling (py-spy writes its output on SIGINT) and write the summary to `report`."""
    sampler.send_signal(signal.SIGINT)
    _, err = sampler.communicate(timeout=60)
    if not raw.exists():
        raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace').strip()}")
    report.write_text(summarize(raw.read_text()))


def summarize(raw: str, top: int = 30) -> str:
    """Per thread, busiest first: its sample count, then the `top` functions by own samples
    and by inclusive samples, as shares of that thread's samples."""
    own: dict[str, Counter[str]] = {}
    inclusive: dict[str, Counter[str]] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        thread, *frames = stack.split(";")
        if not frames:
            continue
        name = thread.split(": ", 1)[-1]
        names = [frame.split(" (", 1)[0] for frame in frames]
        own.setdefault(name, Counter())[names[-1]] += int(count)
        inclusive.setdefault(name, Counter()).update(dict.fromkeys(names, int(count)))
    out = []
    for name in sorted(own, key=lambda n: -sum(own[n].values())):
        total = sum(own[name].values())
        out.append(f"== thread {name}: {total} samples ({total / RATE:.1f} s busy)")
        for kind, counter in (("self", own[name]), ("incl", inclusive[name])):
            for function, samples in counter.most_common(top):
                out.append(f"  {kind} {samples / total:6.1%}  {function}")
    return "\n".join(out) + "\n"
