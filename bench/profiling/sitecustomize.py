"""Profiles the `c2 serve` a bench starts (bench/fleet.py --profile): on PYTHONPATH first, so
Python imports it at start-up. With C2_BENCH_PROFILE set, SIGUSR1 starts yappi (CPU clock,
every thread) and SIGUSR2 stops it and writes pstats to that path plus per-thread CPU to
PATH.threads, so the profile covers the measured window only, not start-up.

yappi is not a dependency of c2: `.venv/bin/pip install yappi` before profiling.
"""

from __future__ import annotations

import os
import signal

_OUT = os.environ.get("C2_BENCH_PROFILE")


def _start(_signum: int, _frame: object) -> None:
    import yappi

    yappi.clear_stats()
    yappi.set_clock_type("cpu")
    yappi.start(builtins=True, profile_threads=True)


def _stop(_signum: int, _frame: object) -> None:
    import yappi

    yappi.stop()
    assert _OUT is not None
    yappi.get_func_stats().save(_OUT, type="pstat")
    with open(f"{_OUT}.threads", "w") as out:
        for thread in yappi.get_thread_stats():
            out.write(f"{thread.ttot:8.3f} s  {thread.name} ({thread.id})\n")
    with open(f"{_OUT}.done", "w") as out:
        out.write("done\n")


if _OUT:
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
