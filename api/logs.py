"""Log hygiene: timestamped lines, credentials never in the access log, a flood is one line.

Every line starts with its local time and UTC offset (`LOG_FORMAT`, and uvicorn's own loggers
through `uvicorn_log_config`), so a log read later can be put next to events and agent output.

`RedactCredentials` rewrites uvicorn's access-log request line so `?ticket=` (and any other
credential-bearing query parameter, however its name is percent-encoded) shows its name but not
its value. `OncePerInterval` lets a
repeated warning or error through once per interval and counts what it held back, so a flood
of bad connections (or `Too many open files`) cannot fill the disk.
"""

from __future__ import annotations

import copy
import logging
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

from uvicorn.config import LOGGING_CONFIG

CREDENTIAL_PARAMS = ("ticket", "token", "bearer", "access_token")
# A query's fields, each with the separator before it (the guard splits on `&` only, so `;`
# splitting here can only redact more).
_FIELD = re.compile(r"([?&;])([^&;]*)")
REDACTED = "[redacted]"
LOG_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REPEAT_INTERVAL_SECONDS = 60.0
# Loggers whose messages a client can make repeat at will (protocol errors, accept failures).
NOISY_LOGGERS = ("uvicorn.error", "asyncio", "sse_starlette.sse")


def _credential(name: str) -> bool:
    # Decoded as the guard decodes it (parse_qsl: `+` and %XX), so `?%74icket=` is a ticket.
    return unquote_plus(name).strip().lower() in CREDENTIAL_PARAMS


def redact(target: str) -> str:
    """`target` (a path with query) with every credential parameter's value replaced,
    whatever the spelling of its name (percent-encoded, any case)."""
    path, mark, query = target.partition("?")
    if not mark:
        return target

    def field(match: re.Match[str]) -> str:
        name, equals, _ = match.group(2).partition("=")
        if equals and _credential(name):
            return f"{match.group(1)}{name}={REDACTED}"
        return match.group(0)

    return path + _FIELD.sub(field, mark + query)


class RedactCredentials(logging.Filter):
    """For `uvicorn.access`: its args are (client, method, path with query, version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) and "=" in a else a for a in args)
        return True


class OncePerInterval(logging.Filter):
    """Passes each distinct warning-or-worse message once per `interval` seconds."""

    def __init__(
        self,
        interval: float = REPEAT_INTERVAL_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 1024,
    ) -> None:
        super().__init__()
        self._interval, self._clock, self._max_keys = interval, clock, max_keys
        self._last: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, str(record.msg))  # the template, not its values
        now = self._clock()
        seen = self._last.get(key)
        if seen is not None and now - seen[0] < self._interval:
            self._last[key] = (seen[0], seen[1] + 1)
            return False
        if len(self._last) >= self._max_keys:
            self._last.clear()
        self._last[key] = (now, 0)
        if seen is not None and seen[1]:
            record.msg = f"{record.msg} ({seen[1]} more like this in the last interval)"
        return True


def install_log_filters() -> None:
    """Attach the filters to their loggers once (idempotent; a process may build many apps)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactCredentials) for f in access.filters):
        access.addFilter(RedactCredentials())
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, OncePerInterval) for f in logger.filters):
            logger.addFilter(OncePerInterval())


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with a timestamp at the head of every line."""
    config = copy.deepcopy(LOGGING_CONFIG)
    for formatter in config["formatters"].values():
        formatter["fmt"] = "%(asctime)s " + formatter["fmt"]
        formatter["datefmt"] = LOG_DATE_FORMAT
    return config
