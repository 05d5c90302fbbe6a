"""Host allowlist (docs/api.md §2): defeats DNS rebinding by answering only allowed `Host` names.

Loopback names are always allowed with any port; `--allow-host NAME` adds a name (any port),
`--allow-host NAME:PORT` one exact authority, `--allow-host '*'` disables the check.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from c2.api.errors import HostNotAllowedError, InvalidHostError, problem_response
from c2.api.settings import LOOPBACK_HOSTS


def split_host(header: str) -> tuple[str, str | None] | None:
    """(name, port) of a Host header, lowercased, IPv6 without brackets; None if malformed."""
    value = header.strip().lower()
    if not value or any(c in value for c in " /\\@?#"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
    elif value.count(":") > 1:
        return None  # a bare IPv6 address must be bracketed in a Host header
    else:
        name, _, port_text = value.partition(":")
        port = port_text if ":" in value else None
    if not name or (port is not None and not (port.isdigit() and int(port) <= 65_535)):
        return None
    return name, port


def check_allowed_hosts(entries: Iterable[str]) -> None:
    """ValueError naming the first `--allow-host` value that is no host name (`*`, a name, or
    name:port): `c2 serve` refuses it in one line before it opens anything."""
    for entry in entries:
        if entry.strip() != "*" and split_host(entry) is None:
            raise ValueError(f"invalid --allow-host value: {entry!r}")


class HostAllowlist:
    """Pure ASGI middleware answering 421 (or 400 when malformed) problems for other hosts."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.any_host = False
        self.names: set[str] = set(LOOPBACK_HOSTS)
        self.authorities: set[tuple[str, str]] = set()
        allowed = list(allowed)
        check_allowed_hosts(allowed)
        for entry in allowed:
            if entry.strip() == "*":
                self.any_host = True
                continue
            parsed = split_host(entry)
            assert parsed is not None  # checked above
            name, port = parsed
            if port is None:
                self.names.add(name)
            else:
                self.authorities.add((name, port))

    def allows(self, header: str | None) -> bool | None:
        """True/False for a well-formed Host header, None for a missing or malformed one."""
        parsed = split_host(header) if header else None
        if parsed is None:
            return None
        name, port = parsed
        return (
            self.any_host
            or name in self.names
            or (port is not None and (name, port) in self.authorities)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host: str | None = None
        for key, value in scope["headers"]:
            if key == b"host":
                host = value.decode("latin-1")
                break
        verdict = self.allows(host)
        if verdict:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if verdict is None:
            err: HostNotAllowedError | InvalidHostError = InvalidHostError(
                "the Host header is missing or malformed"
            )
        else:
            err = HostNotAllowedError(f"host {host!r} is not allowed; see --allow-host")
        await problem_response(err)(scope, receive, send)
