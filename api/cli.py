"""The `c2` console script: `serve`, `pair`, `pair-url`, `openapi` (docs/api.md §0).

Each command builds its own Settings from arguments and the environment; nothing is built at
import time. `pair` mints a bearer directly in the store (local admin: whoever can read home).

Over 300 lines: the commands share their argument parser, its value checks and the one-line
failures of start-up; split, each command would reach back into them.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from c2.api.schemas import MAX_DEVICE_NAME
from c2.api.settings import DEFAULT_HOST, DEFAULT_PORT, Settings

if TYPE_CHECKING:  # imported where used: `c2 --help` and the one-shot commands stay light
    import socket

    from c2.api.server import C2Server
    from c2.core.home import HomeLock

# The store's writer shares the GIL with the loop: handed over every 0.5 ms, not CPython's 5 ms,
# commits flow while the loop streams (+15-20% agent chunks/s to 10 SSE clients, bench/turns.py).
GIL_SWITCH_INTERVAL = 0.0005


def _fail(exc: Exception | str, status: int = 1) -> int:
    print(f"c2: {exc}", file=sys.stderr, flush=True)
    return status


@contextlib.contextmanager
def _lasting_objects() -> Iterator[None]:
    """Make what lives as long as the server (~190,000 objects: modules, app, schemas) with the
    cyclic collector off, then freeze it: the collector walked them again and again while they
    were made (~0.2 s of time to ready) and would at every full collection later (a pause)."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _serve(args: argparse.Namespace) -> int:
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    try:
        with _lasting_objects():
            built = _build_server(args)
        if isinstance(built, int):
            return built  # it failed, and said why
        server, sock, home_claim = built
        server.run(sockets=[sock])
        home_claim.release()
        return 0
    finally:
        gc.unfreeze()  # they lived as long as the server: collectable again (an in-process caller)


def _build_server(args: argparse.Namespace) -> tuple[C2Server, socket.socket, HomeLock] | int:
    """The server ready to run, its listening socket and the home's claim; or the exit status
    once it said why it cannot start."""
    from c2.api.app import create_app
    from c2.api.hosts import check_allowed_hosts
    from c2.api.logs import LOG_DATE_FORMAT, LOG_FORMAT
    from c2.api.server import build_server, cannot_listen, listen_socket
    from c2.api.services import StartupError, preflight
    from c2.api.settings import outward_host, url_host
    from c2.core.providers import ProviderConfigError, ProviderRegistry

    try:
        check_allowed_hosts(args.allow_host)  # before anything is opened
        settings = Settings.build(
            home=args.home,
            host=args.host,
            port=args.port,
            allow_hosts=args.allow_host,
            allow_origins=args.allow_origin,
            trusted_proxies=args.trusted_proxy,
            vapid_subject=args.vapid_subject,
            cluster=args.cluster,
            advertise_url=args.advertise_url,
        )
    except ValueError as exc:  # a value of the environment or a flag: one clear line
        return _fail(exc, 2)
    if settings.vapid_subject and not settings.vapid_subject.startswith(("mailto:", "https:")):
        return _fail("--vapid-subject must be a mailto: or https: URI", 2)
    try:
        home_claim = preflight(settings)  # held to the end; the server's start re-enters it
    except StartupError as exc:
        return _fail(exc)
    try:
        ProviderRegistry.load(settings.home)  # checked here: one line instead of a traceback
    except ProviderConfigError as exc:
        home_claim.release()
        return _fail(f"{exc} (fix or remove the file, then start again)", 2)
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, datefmt=LOG_DATE_FORMAT)
    try:
        app = create_app(settings)
    except ValueError as exc:  # a refused --allow-host / --allow-origin: one clear line
        home_claim.release()
        return _fail(exc, 2)
    try:
        sock = listen_socket(settings.host, settings.port)
    except OSError as exc:
        home_claim.release()
        return _fail(cannot_listen(settings.host, settings.port, exc))

    async def announce(server: C2Server) -> None:
        services = server.services
        assert services is not None
        host, port = server.bound
        token = await services.auth.mint_pairing_token()
        minutes = int(settings.pairing_ttl_seconds // 60)
        print(f"c2 listening on http://{url_host(host)}:{port}", flush=True)
        outward = outward_host(host)
        if outward != url_host(host):  # a wildcard bind: how another device gets here
            allowed = outward.strip("[]") in settings.allow_hosts or "*" in settings.allow_hosts
            print(
                f"from other devices: http://{outward}:{port}"
                + ("" if allowed else f" (answered once started with --allow-host {outward})"),
                flush=True,
            )
        print(f"home: {settings.home}", flush=True)
        print(
            f"pair a device (one use, {minutes} min): "
            f"http://{url_host(host)}:{port}/pair#token={token}",
            flush=True,
        )

    return build_server(app, settings, on_started=announce), sock, home_claim


def _pair(args: argparse.Namespace) -> int:
    from c2.core.home import StartupError, pair_device
    from c2.core.scopes import ALL_SCOPES, UnknownScopeError, ordered, parse_scopes

    try:
        scopes = ALL_SCOPES if args.scopes is None else parse_scopes(args.scopes)
    except UnknownScopeError as exc:
        return _fail(exc, 2)
    settings = Settings.build(home=args.home)
    try:
        paired = pair_device(settings.home, settings.database_url, args.name, scopes)
    except StartupError as exc:
        return _fail(exc)
    print(
        json.dumps(
            {"device_id": paired.device_id, "bearer": paired.bearer, "scopes": ordered(scopes)}
        ),
        flush=True,
    )
    return 0


def _pair_url(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from c2.api.settings import url_host
    from c2.core.home import StartupError, mint_pairing_token

    settings = Settings.build(home=args.home, host=args.host, port=args.port)
    ttl = timedelta(seconds=settings.pairing_ttl_seconds)
    try:
        token = mint_pairing_token(settings.home, settings.database_url, ttl)
    except StartupError as exc:
        return _fail(exc)
    print(f"http://{url_host(settings.host)}:{settings.port}/pair#token={token}", flush=True)
    return 0


def _openapi(_args: argparse.Namespace) -> int:
    from c2.api.app import create_app
    from c2.api.openapi import document, dumps

    # The document depends on routes only: a placeholder home, never touched.
    settings = Settings(home=Path("/nonexistent/c2-home"), database_url="sqlite://")
    sys.stdout.write(dumps(document(create_app(settings))))
    return 0


ENVIRONMENT = f"""environment:
  C2_HOME                   data folder when --home is not given (default ~/.c2)
  C2_DATABASE_URL           database (default sqlite in the home; postgresql+psycopg://…)
  C2_MAX_LIVE_AGENTS        agent processes running at once (default 32)
  C2_EVENT_RETENTION_DAYS   days of event log kept for resume (default 7)
  C2_MAX_BODY_BYTES         largest request body accepted (default {Settings.max_body_bytes})
  C2_MAX_CONNECTIONS        concurrent connections served (default {Settings.max_connections})
  C2_MAX_STREAMS_PER_DEVICE event streams one device may open (default 32)
  C2_STORE_RETRY_SECONDS    store retry window in seconds (default 30)
  C2_TRUSTED_PROXIES        reverse proxies trusted for X-Forwarded-For, comma-separated
  C2_VAPID_SUBJECT          Web Push VAPID `sub` when --vapid-subject is not given
  C2_WEBHOOK_BACKOFF_SCALE  multiplies webhook retry delays (default 1)
  C2_CLUSTER                1: the same as --cluster
  C2_ADVERTISE_URL          the URL cluster peers reach this instance at (--advertise-url)
  C2_CLUSTER_LEASE_SECONDS  a member missing heartbeats this long is dead (default 15)
  C2_CLUSTER_SECRET         instance-to-instance key (default: one kept in the database)
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("c2")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown"


def port_number(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535 (argparse type)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65_535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {port}")
    return port


def device_name(text: str) -> str:
    """A device's name, as pairing takes it: 1 to 128 characters (argparse type)."""
    name = text.strip()
    if not 1 <= len(name) <= MAX_DEVICE_NAME:
        raise argparse.ArgumentTypeError(f"a device name is 1 to {MAX_DEVICE_NAME} characters")
    return name


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="c2",
        description="c2: coding-agent sessions over HTTP",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    root.add_argument("--version", action="version", version=f"c2 {_version()}")
    commands = root.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve",
        help="run the HTTP + SSE server",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "--host", default=DEFAULT_HOST, help=f"bind address (default {DEFAULT_HOST})"
    )
    serve.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})"
    )
    serve.add_argument("--home", help="data folder (default $C2_HOME, else ~/.c2)")
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="also answer this Host name (loopback names always); '*' allows any",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow CORS from this origin (closed by default)",
    )
    serve.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="a reverse proxy (IP address or network) whose X-Forwarded-For names the client; "
        "also $C2_TRUSTED_PROXIES, comma-separated (default: none, headers are ignored)",
    )
    serve.add_argument(
        "--vapid-subject",
        metavar="URI",
        help="Web Push VAPID subject, a mailto: or https: URI (default mailto: of this host)",
    )
    serve.add_argument(
        "--cluster",
        action="store_true",
        help="join the other instances on this PostgreSQL database (see docs/deployment.md)",
    )
    serve.add_argument(
        "--advertise-url",
        metavar="URL",
        help="the URL cluster peers reach this instance at (default http://HOST:PORT)",
    )
    serve.set_defaults(run=_serve)

    pair = commands.add_parser("pair", help="mint a device bearer directly in the store")
    pair.add_argument("--name", required=True, type=device_name)
    pair.add_argument("--home", help="data folder (default $C2_HOME, else ~/.c2)")
    pair.add_argument(
        "--scopes",
        metavar="LIST",
        help="comma-separated scopes: read, approve, operate, admin (default: all four)",
    )
    pair.set_defaults(run=_pair)

    pair_url = commands.add_parser(
        "pair-url",
        help="mint a fresh one-time pairing URL for the server of this home",
        description="Mint a one-time pairing URL (valid 15 min) in the home's store; the"
        " server running on that home redeems it. --host/--port only shape the printed URL.",
    )
    pair_url.add_argument("--home", help="data folder (default $C2_HOME, else ~/.c2)")
    pair_url.add_argument("--host", default=DEFAULT_HOST)
    pair_url.add_argument("--port", type=port_number, default=DEFAULT_PORT)
    pair_url.set_defaults(run=_pair_url)

    openapi = commands.add_parser("openapi", help="print the OpenAPI document")
    openapi.set_defaults(run=_openapi)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
