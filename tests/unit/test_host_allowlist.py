"""Host header parsing and the allowlist decision (docs/api.md §2), without a server."""

from __future__ import annotations

import pytest

from c2.api.hosts import HostAllowlist, split_host


async def _app(scope: object, receive: object, send: object) -> None:  # pragma: no cover
    raise AssertionError("never called")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("localhost", ("localhost", None)),
        ("LOCALHOST:4599", ("localhost", "4599")),
        ("[::1]:80", ("::1", "80")),
        ("[::1]", ("::1", None)),
        ("127.0.0.1:1", ("127.0.0.1", "1")),
        ("", None),
        ("::1", None),
        ("[::1", None),
        ("host:port", None),
        ("a b", None),
        ("evil@localhost", None),
        ("localhost/x", None),
    ],
)
def test_split_host_parses_or_rejects(header: str, expected: tuple[str, str | None] | None):
    """Names are lowercased, IPv6 unbracketed, ports numeric; anything odd is malformed."""
    assert split_host(header) == expected


def test_host_allowlist_loopback_names_and_additions():
    """Loopback names with any port, added names with any port, NAME:PORT exactly."""
    hosts = HostAllowlist(_app, ["c2.lan", "box:8080"])
    assert hosts.allows("localhost:1") and hosts.allows("[::1]:2") and hosts.allows("127.0.0.1")
    assert hosts.allows("c2.lan:443") and hosts.allows("box:8080")
    assert hosts.allows("box:8081") is False and hosts.allows("evil.example") is False
    assert hosts.allows(None) is None and hosts.allows("x y") is None
    assert HostAllowlist(_app, ["*"]).allows("anything.example")
    with pytest.raises(ValueError):
        HostAllowlist(_app, ["bad host"])
