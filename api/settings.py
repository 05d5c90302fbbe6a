"""Server settings: one frozen value built from CLI arguments and the environment.

Nothing here runs at import time or touches the disk; `Settings.build` reads the environment
it is handed (the home is prepared by core/home.py).
"""

from __future__ import annotations

import ipaddress
import math
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from c2.core.cluster.membership import DEFAULT_LEASE_SECONDS
from c2.core.home import sqlite_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4599
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_hosts: tuple[str, ...] = ()  # added to the loopback names; "*" allows any Host
    allow_origins: tuple[str, ...] = ()  # CORS stays closed while empty
    # Reverse proxies whose X-Forwarded-For names the client (addresses or networks); empty:
    # the peer address is the client, whatever headers say (docs/security.md).
    trusted_proxies: tuple[str, ...] = ()
    event_retention_days: float = 7.0
    pairing_ttl_seconds: float = 15 * 60
    ticket_ttl_seconds: float = 5 * 60
    pair_attempts_per_minute: int = 10
    ping_seconds: float = 15.0
    send_timeout_seconds: float = 30.0
    stream_backlog: int = 1024
    sweep_interval_seconds: float = 3600.0  # event-log, idempotency and token pruning
    last_seen_interval_seconds: float = 60.0
    shutdown_grace_seconds: float = 5.0
    max_live_agents: int = 32  # agent processes at once; LRU idle agents are closed past it
    # -- limits (docs/security.md) --
    max_body_bytes: int = 1024 * 1024  # request bodies above it are a 413, counted as they arrive
    max_connections: int = 1000  # uvicorn limit_concurrency (also capped by the fd limit)
    header_timeout_seconds: float = 10.0  # a connection must send a request head this fast
    keep_alive_seconds: int = 5  # an idle keep-alive connection is closed after it
    max_streams_per_device: int = 32  # open `GET /v1/events` streams per device
    auth_failures_per_minute: int = 30  # failed bearer/ticket checks per client address
    auth_failures_per_minute_total: int = 300  # the same, all addresses together
    store_retry_seconds: float = 30.0  # a write the database cannot take fails after this
    # -- throughput (issue 17) --
    commit_interval_ms: float = 5.0  # streamed agent output is committed at most this often
    stream_write_interval_ms: float = 5.0  # an event stream writes at most this often
    # -- notifications (issue 15) --
    webhook_backoff_scale: float = 1.0  # multiplies the retry delays (tests shorten them)
    vapid_subject: str = ""  # Web Push `sub` claim; empty: mailto: of this host
    # C2_PUSH_PRIVATE_ENDPOINTS=1: Web Push endpoints may be http and on loopback or private
    # addresses (a push service on the LAN, a test's); by default https on public ones only.
    push_private_endpoints: bool = False
    # -- scale-out (issue 18) --
    cluster: bool = False  # --cluster / C2_CLUSTER=1: a member of a cluster on PostgreSQL
    advertise_url: str = ""  # how peers reach this instance; empty: http://<host>:<port>
    cluster_lease_seconds: float = DEFAULT_LEASE_SECONDS
    cluster_secret: str = ""  # C2_CLUSTER_SECRET; empty: the key stored in the database

    @property
    def database_in_home(self) -> bool:
        """The database is the home's own SQLite file (not `$C2_DATABASE_URL`)."""
        return self.database_url == sqlite_url(self.home)

    @classmethod
    def build(
        cls,
        *,
        home: str | Path | None = None,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        allow_hosts: Sequence[str] = (),
        allow_origins: Sequence[str] = (),
        trusted_proxies: Sequence[str] = (),
        vapid_subject: str | None = None,
        cluster: bool = False,
        advertise_url: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Settings:
        """Settings from CLI values, falling back to `env` (the process environment)."""
        env = os.environ if env is None else env
        resolved = resolve_home(home, env)
        return cls(
            home=resolved,
            database_url=env.get("C2_DATABASE_URL") or sqlite_url(resolved),
            host=host,
            port=port,
            allow_hosts=tuple(allow_hosts),
            allow_origins=tuple(allow_origins),
            trusted_proxies=proxy_networks(
                [*trusted_proxies, *env.get("C2_TRUSTED_PROXIES", "").split(",")]
            ),
            # Zero or less would have the start-up sweep delete the whole event log.
            event_retention_days=_env_float(
                env, "C2_EVENT_RETENTION_DAYS", 7.0, above=0.0, high=36_500.0
            ),
            max_live_agents=int(_env_float(env, "C2_MAX_LIVE_AGENTS", 32, whole=True, low=1)),
            max_body_bytes=int(
                _env_float(env, "C2_MAX_BODY_BYTES", cls.max_body_bytes, whole=True, low=1024)
            ),
            max_connections=int(
                _env_float(env, "C2_MAX_CONNECTIONS", cls.max_connections, whole=True, low=8)
            ),
            max_streams_per_device=int(
                _env_float(
                    env, "C2_MAX_STREAMS_PER_DEVICE", cls.max_streams_per_device, whole=True, low=1
                )
            ),
            store_retry_seconds=_env_float(env, "C2_STORE_RETRY_SECONDS", 30.0, low=0.0),
            commit_interval_ms=_env_float(
                env, "C2_COMMIT_INTERVAL_MS", cls.commit_interval_ms, low=0.0, high=100.0
            ),
            stream_write_interval_ms=_env_float(
                env,
                "C2_STREAM_WRITE_INTERVAL_MS",
                cls.stream_write_interval_ms,
                low=0.0,
                high=100.0,
            ),
            webhook_backoff_scale=_env_float(env, "C2_WEBHOOK_BACKOFF_SCALE", 1.0, low=0.0),
            vapid_subject=vapid_subject or env.get("C2_VAPID_SUBJECT", ""),
            push_private_endpoints=env.get("C2_PUSH_PRIVATE_ENDPOINTS", "").strip().lower()
            in _TRUE,
            cluster=cluster or env.get("C2_CLUSTER", "").strip().lower() in _TRUE,
            advertise_url=(advertise_url or env.get("C2_ADVERTISE_URL", "")).rstrip("/"),
            cluster_lease_seconds=_env_float(
                env, "C2_CLUSTER_LEASE_SECONDS", DEFAULT_LEASE_SECONDS, low=0.5, high=3600.0
            ),
            cluster_secret=env.get("C2_CLUSTER_SECRET", ""),
        )


def _env_float(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    whole: bool = False,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
) -> float:
    """`name`'s number from `env` (`default` when unset), clamped to [`low`, `high`]; not a
    (`whole`) finite number, or not more than `above`, is a ValueError naming the variable:
    the server does not start (one line) rather than run on a value it cannot use."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(int(raw)) if whole else float(raw)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{name} must be {kind}, not {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, not {raw!r}")
    if above is not None and value <= above:
        raise ValueError(f"{name} must be more than {above:g}, not {raw!r}")
    if low is not None:
        value = max(low, value)
    if high is not None:
        value = min(high, value)
    return value


def proxy_networks(values: Sequence[str]) -> tuple[str, ...]:
    """The trusted proxies as networks (`10.0.0.5` → `10.0.0.5/32`), blanks dropped; a value
    that is no address or network is a ValueError naming it (the server does not start)."""
    networks: list[str] = []
    for value in (v.strip() for v in values):
        if not value:
            continue
        try:
            networks.append(str(ipaddress.ip_network(value, strict=False)))
        except ValueError:
            raise ValueError(
                f"trusted proxy {value!r} is not an IP address or network (e.g. 10.0.0.0/8)"
            ) from None
    return tuple(dict.fromkeys(networks))


def resolve_home(home: str | Path | None, env: Mapping[str, str]) -> Path:
    """`--home`, else `$C2_HOME`, else `~/.c2` (docs/api.md §0)."""
    if home:
        return Path(home).expanduser().resolve()
    if env.get("C2_HOME"):
        return Path(env["C2_HOME"]).expanduser().resolve()
    return (Path.home() / ".c2").resolve()


def outward_host(host: str) -> str:
    """A host other machines reach this server at: for a wildcard bind, the address this
    machine reaches the network from (the one its default route uses: a UDP connect sends
    nothing), else as `url_host`; loopback when the machine has no route out."""
    if host not in ("", "0.0.0.0", "::"):
        return url_host(host)
    v6 = host == "::"
    family, probe = (socket.AF_INET6, "2001:db8::1") if v6 else (socket.AF_INET, "192.0.2.1")
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as udp:
            udp.connect((probe, 9))  # documentation addresses (RFC 5737, RFC 3849)
            address = str(udp.getsockname()[0])
    except OSError:
        return url_host(host)
    return f"[{address}]" if ":" in address else address


def url_host(host: str) -> str:
    """A host usable in a URL: wildcard binds become loopback, IPv6 gets brackets."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
