"""The event log's bounds (core/store/events.py) on a real SQLite store: every stream that
resumes asks for them, so what they cost must not grow with the log."""

from __future__ import annotations

from c2.core.protocol.events import ErrorEvent
from c2.core.store.database import ReadUnit, Store, UnitOfWork
from c2.core.store.events import LogBounds


def _emit(count: int, uow: UnitOfWork) -> None:
    for n in range(count):
        uow.emit(ErrorEvent(session=None, message=f"e{n}", terminal=False))


def _bounds_and_steps(store: Store) -> tuple[LogBounds, int]:
    """The bounds, and how many SQLite virtual-machine steps reading them took."""

    def read(r: ReadUnit) -> tuple[LogBounds, int]:
        sqlite = r.conn.connection.driver_connection
        assert sqlite is not None
        steps = 0

        def count() -> int:
            nonlocal steps
            steps += 1
            return 0  # go on

        sqlite.set_progress_handler(count, 1)
        try:
            return r.events.bounds(), steps
        finally:
            sqlite.set_progress_handler(None, 1)

    bounds, _ = store.read_sync(read)
    return bounds, store.read_sync(read)[1]  # the second read: statement compiled and cached


def test_the_log_bounds_read_its_two_ends_not_the_whole_log(store: Store):
    store.write_sync(lambda uow: _emit(10, uow))
    small, small_steps = _bounds_and_steps(store)
    store.write_sync(lambda uow: _emit(2_000, uow))
    large, large_steps = _bounds_and_steps(store)

    assert (small.first, small.last) == (1, 10)
    assert (large.first, large.last) == (1, 2_010)
    assert large_steps == small_steps  # a scan of the log took ~7 steps per event
