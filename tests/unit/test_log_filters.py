"""The server's log filters, as `build_server` wires them on uvicorn's error log."""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI

from c2.api.logs import OncePerInterval
from c2.api.server import build_server
from c2.api.sse_response import _DROPPED, UNFINISHED, UnfinishedStreamFilter
from tests.conftest import make_settings


def _unfinished() -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, UNFINISHED, None, None)


def test_a_dropped_streams_unfinished_line_never_reaches_the_log(tmp_path: Path) -> None:
    """uvicorn's "returned without completing response" for a stream c2 dropped (and logged
    once) is filtered before repeats are counted: counted first, the line came back after an
    interval with a "(N more like this…)" suffix that no longer matched the filter."""
    build_server(FastAPI(), make_settings(tmp_path))
    error_log = logging.getLogger("uvicorn.error")
    kinds = [type(f) for f in error_log.filters]
    assert kinds.index(UnfinishedStreamFilter) < kinds.index(OncePerInterval)
    token = _DROPPED.set(True)
    try:
        assert [error_log.filter(_unfinished()) for _ in range(3)] == [False] * 3
        suffixed = _unfinished()
        suffixed.msg = f"{UNFINISHED} (3 more like this in the last interval)"
        assert not UnfinishedStreamFilter().filter(suffixed)
    finally:
        _DROPPED.reset(token)
    # Not a dropped stream: the line is uvicorn's to log.
    assert UnfinishedStreamFilter().filter(_unfinished())
