"""Ports for the `c2 serve` processes tests start.

A test picks a port, then the server binds it; between the two another process could take it.
Under pytest-xdist each worker therefore draws from a range of its own, below the kernel's
ephemeral range (32768+), so two workers never pick the same port and outgoing connections
never sit on one. A readiness probe could otherwise reach another worker's server. Each
process starts at a random place in its range, so two test runs on one machine (whose workers
share the names gw0, gw1, ...) rarely reach for the same port at the same time.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from collections.abc import Iterator

_FIRST = 10_000
_SPAN = 2_000  # ports per worker: far more than one worker's tests start
# Browsers refuse to load pages from some ports (Chromium: net::ERR_UNSAFE_PORT), and the web
# tests open the server's pages in Chromium. Of Chromium's restricted list only 10080 falls in
# the ranges above; a server drawn there failed every test of a web module in CI.
_BROWSER_REFUSED = frozenset({10080})


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # "gw3" under xdist
    return int(worker.removeprefix("gw") or 0) if worker.startswith("gw") else 0


_START = _FIRST + _worker_index() * _SPAN
_OFFSET = random.randrange(_SPAN)
_CANDIDATES: Iterator[int] = itertools.cycle(
    port
    for port in [*range(_START + _OFFSET, _START + _SPAN), *range(_START, _START + _OFFSET)]
    if port not in _BROWSER_REFUSED
)


def free_port() -> int:
    """A port of this worker's range that nothing listens on now."""
    for port in itertools.islice(_CANDIDATES, _SPAN):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port left in this worker's range")
