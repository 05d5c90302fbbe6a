"""A flag one thread waits on with a timeout and others set: `threading.Event`'s `set`, `clear`,
`is_set` and `wait`, on one bare lock.

The store's writer waits on such a flag after every commit while agents stream (the commit
interval), and the loop sets it on every pipe tick. `threading.Event` waits through a
`Condition`: a lock made per wait, a list of waiters and a second lock to guard it. On the
2-core VM, `Event.wait(0.02)` woken by a set cost the waiting thread 35 µs of CPU a round,
against 24 µs for a bare lock's timed acquire (docs/decisions.md, "seventeenth sitting").

The lock is held while the flag is clear; `set` releases it, so a waiter's acquire returns.
"""

from __future__ import annotations

import _thread


class Signal:
    """A flag: clear at first. Any thread may `set` it; one thread at a time may `wait`."""

    __slots__ = ("_clear",)

    def __init__(self) -> None:
        self._clear = _thread.allocate_lock()
        self._clear.acquire()

    def is_set(self) -> bool:
        """Set and not cleared since."""
        return not self._clear.locked()

    def set(self) -> None:
        """Set the flag (a waiter returns); setting it again does nothing."""
        try:
            self._clear.release()
        except RuntimeError:
            pass  # set already (two threads may race here: both find it clear, one wins)

    def clear(self) -> None:
        """Clear the flag, if set."""
        self._clear.acquire(False)

    def wait(self, timeout: float) -> bool:
        """Wait until the flag is set or `timeout` seconds pass; whether it is set. The flag
        stays as it was: only `clear` clears it."""
        if self._clear.acquire(True, timeout):
            self.set()
            return True
        return False
