"""Profiles the `c2 serve` a bench starts (bench/fleet.py --profile): on PYTHONPATH first, so
Python imports it at start-up. With C2_BENCH_PROFILE=PATH, SIGUSR1 starts profiling and
SIGUSR2 stops it and writes PATH (the report) and then PATH.done, so the profile covers the
measured window only, not start-up.

Two profilers (C2_BENCH_PROFILER):
- `sample` (default): a thread samples the Python stacks of the event loop's thread and the
  store's writer every 4 ms. Cheap (its own CPU is reported apart), so batching and latency
  stay close to a plain run (the GIL switch interval is shortened meanwhile, so short
  bursts of work are sampled in proportion, not only long ones); each sample counts for the
  function on top (self) and for every function on the stack (inclusive); time in C (a
  socket write, a commit, JSON) counts for the Python function that called it. An idle
  thread is sampled too: its top frame is where it waits (the loop's run, the writer's get).
- `yappi` (`pip install yappi`): exact call counts and CPU per function, every call traced;
  costs several times the server's CPU, so batches grow and per-wake costs shrink. Written
  as pstats to PATH.pstat, and each busy thread alone to PATH.<thread>-<id>.pstat.
Both add garbage-collection counts and CPU per generation (a collection is charged to
whatever function allocated when it started, in either profile).
"""

from __future__ import annotations

import collections
import gc
import os
import signal
import sys
import threading
import time
from types import FrameType

_OUT = os.environ.get("C2_BENCH_PROFILE")
_KIND = os.environ.get("C2_BENCH_PROFILER", "sample")
_GC: dict[int, list[float]] = {}
_gc_started = 0.0
_stop = threading.Event()
_sampler: threading.Thread | None = None
_self: collections.Counter[tuple[str, str]] = collections.Counter()
_incl: collections.Counter[tuple[str, str]] = collections.Counter()
_samples: collections.Counter[str] = collections.Counter()
_cpu0: dict[str, float] = {}
_switch = [0.005]


def _gc_timer(phase: str, info: dict[str, int]) -> None:
    global _gc_started
    if phase == "start":
        _gc_started = time.thread_time()
    else:
        entry = _GC.setdefault(info["generation"], [0.0, 0.0])
        entry[0] += 1
        entry[1] += time.thread_time() - _gc_started


def _where(code: object) -> str:
    filename = code.co_filename  # type: ignore[attr-defined]
    for cut in ("site-packages/", "/c2/", "python3.11/"):
        if cut in filename:
            filename = filename.split(cut, 1)[1]
            break
    return f"{filename}:{code.co_qualname}"  # type: ignore[attr-defined]


# The threads that do the work (the event loop, the store's writer); the others only wait.
_SAMPLED = ("MainThread", "c2-db-writer")


def _sample_loop(interval: float) -> None:
    while not _stop.wait(interval):
        wanted = {t.ident: t.name for t in threading.enumerate() if t.name in _SAMPLED}
        for ident, newest in sys._current_frames().items():
            frame: FrameType | None = newest
            name = wanted.get(ident)
            if name is None:
                continue
            _samples[name] += 1
            top = _where(newest.f_code)
            _self[(name, top)] += 1
            seen = set()
            while frame is not None:
                where = _where(frame.f_code)
                if where not in seen:
                    seen.add(where)
                    _incl[(name, where)] += 1
                frame = frame.f_back


def _thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread, by name, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    cpu: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            with open(f"/proc/self/task/{thread.native_id}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu[thread.name] = cpu.get(thread.name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return cpu


_threads0: dict[str, float] = {}


def _start(_signum: int, _frame: object) -> None:
    global _sampler
    _threads0.clear()
    _threads0.update(_thread_cpu())
    _GC.clear()
    gc.callbacks.append(_gc_timer)
    _cpu0["process"] = time.process_time()
    if _KIND == "yappi":
        import yappi

        yappi.clear_stats()
        yappi.set_clock_type("cpu")
        yappi.start(builtins=True, profile_threads=True)
        return
    _self.clear()
    _incl.clear()
    _samples.clear()
    _stop.clear()
    # A busy thread holds the GIL until the switch interval (5 ms) asks it to let go, so
    # bursts shorter than that (one agent line, one stream's write) would almost never be
    # sampled, and idle waits always. A short interval makes samples land in proportion.
    _switch[0] = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    _sampler = threading.Thread(target=_sample_loop, args=(0.004,), daemon=True)
    _sampler.start()


def _stop_profile(_signum: int, _frame: object) -> None:
    assert _OUT is not None
    gc.callbacks.remove(_gc_timer)
    lines = [f"process CPU in the window: {time.process_time() - _cpu0['process']:.3f} s"]
    for name, seconds in sorted(_thread_cpu().items(), key=lambda x: -x[1]):
        used = seconds - _threads0.get(name, 0.0)
        if used >= 0.01:
            lines.append(f"  thread {name}: {used:.2f} s CPU")
    if _KIND == "yappi":
        import yappi

        yappi.stop()
        yappi.get_func_stats().save(f"{_OUT}.pstat", type="pstat")
        for thread in yappi.get_thread_stats():
            lines.append(f"{thread.ttot:8.3f} s CPU  {thread.name} ({thread.id})")
            # Each busy thread on its own too: the writer's costs drown in the loop's otherwise.
            if thread.ttot >= 0.1:
                stats = yappi.get_func_stats(filter={"ctx_id": thread.id})
                stats.save(f"{_OUT}.{thread.name}-{thread.id}.pstat", type="pstat")
    else:
        _stop.set()
        if _sampler is not None:
            _sampler.join()
        sys.setswitchinterval(_switch[0])
        for thread, count in _samples.most_common():
            lines.append(f"\n== thread {thread}: {count} samples; self, then inclusive ==")
            mine = [(w, c) for (t, w), c in _self.items() if t == thread]
            for where, c in sorted(mine, key=lambda x: -x[1])[:40]:
                lines.append(f"  self {c / count:6.1%}  {where}")
            mine = [(w, c) for (t, w), c in _incl.items() if t == thread]
            for where, c in sorted(mine, key=lambda x: -x[1])[:60]:
                lines.append(f"  incl {c / count:6.1%}  {where}")
    for generation, (runs, seconds) in sorted(_GC.items()):
        lines.append(f"gc generation {generation}: {runs:.0f} collections, {seconds:.3f} s")
    lines.append(f"gc objects tracked at the end: {len(gc.get_objects())}")
    with open(_OUT, "w") as out:
        out.write("\n".join(lines) + "\n")
    with open(f"{_OUT}.done", "w") as out:
        out.write("done\n")


if _OUT:
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop_profile)
