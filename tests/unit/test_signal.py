"""The writer's wake-up flag (core/store/signal.py): threading.Event's semantics on one lock."""

from __future__ import annotations

import threading
import time

from c2.core.store.signal import Signal


def test_a_flag_starts_clear_and_a_wait_times_out() -> None:
    flag = Signal()
    assert not flag.is_set()
    started = time.monotonic()
    assert flag.wait(0.05) is False
    assert time.monotonic() - started >= 0.04
    assert not flag.is_set()


def test_set_stays_set_through_waits_until_cleared() -> None:
    flag = Signal()
    flag.set()
    flag.set()  # again: no error, still one flag
    assert flag.is_set()
    assert flag.wait(0) is True
    assert flag.wait(0) is True  # a wait does not consume it
    flag.clear()
    flag.clear()  # clearing a clear flag does nothing
    assert not flag.is_set()
    assert flag.wait(0) is False


def test_a_set_from_another_thread_ends_the_wait_at_once() -> None:
    flag = Signal()
    timer = threading.Timer(0.05, flag.set)
    timer.start()
    started = time.monotonic()
    assert flag.wait(5.0) is True
    assert time.monotonic() - started < 2.0
    timer.join()


def test_racing_setters_leave_one_set_flag() -> None:
    flag = Signal()
    threads = [threading.Thread(target=flag.set) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert flag.is_set()
    flag.clear()
    assert not flag.is_set()
