"""The `c2` console script: `serve`, `pair`, `openapi` (API.md §0).

Each command builds its own Settings from arguments and the environment; nothing is built at
import time. `pair` mints a bearer directly in the store (local admin: whoever can read home).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from api.settings import DEFAULT_HOST, DEFAULT_PORT, Settings, prepare_home

# The store's writer thread shares the GIL with the event loop. Handing it over every 0.5 ms
# instead of CPython's 5 ms keeps commits flowing while the loop streams: +15-20% agent
# chunks/s to 10 SSE clients in bench/turns.py on 2 cores.
GIL_SWITCH_INTERVAL = 0.0005


def _serve(args: argparse.Namespace) -> int:
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    from api.app import create_app
    from api.server import C2Server, build_server, url_host
    from api.services import StartupError, preflight

    settings = Settings.build(
        home=args.home,
        host=args.host,
        port=args.port,
        allow_hosts=args.allow_host,
        allow_origins=args.allow_origin,
    )
    try:
        # Held until the process exits; the server's own start re-enters this claim.
        home_claim = preflight(settings)
    except StartupError as exc:
        print(f"c2: {exc}", file=sys.stderr, flush=True)
        return 1
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    try:
        app = create_app(settings)
    except ValueError as exc:  # a refused --allow-host / --allow-origin: one clear line
        print(f"c2: {exc}", file=sys.stderr, flush=True)
        return 2

    async def announce(server: C2Server) -> None:
        services = server.services
        assert services is not None
        host, port = server.bound
        token = await services.auth.mint_pairing_token()
        minutes = int(settings.pairing_ttl_seconds // 60)
        print(f"c2 listening on http://{url_host(host)}:{port}", flush=True)
        print(f"home: {settings.home}", flush=True)
        print(
            f"pair a device (one use, {minutes} min): "
            f"http://{url_host(host)}:{port}/pair#token={token}",
            flush=True,
        )

    build_server(app, settings, on_started=announce).run()
    home_claim.release()
    return 0


def _pair(args: argparse.Namespace) -> int:
    from core.auth import create_device
    from core.scopes import ALL_SCOPES, UnknownScopeError, ordered, parse_scopes
    from core.store.database import Store

    try:
        scopes = ALL_SCOPES if args.scopes is None else parse_scopes(args.scopes)
    except UnknownScopeError as exc:
        print(f"c2: {exc}", file=sys.stderr, flush=True)
        return 2
    settings = Settings.build(home=args.home)
    prepare_home(settings.home, create_database=settings.database_in_home)
    store = Store(settings.database_url)
    try:
        store.migrate()
        paired = store.write_sync(lambda uow: create_device(uow, args.name, scopes))
    finally:
        store.close()
    print(
        json.dumps(
            {"device_id": paired.device_id, "bearer": paired.bearer, "scopes": ordered(scopes)}
        ),
        flush=True,
    )
    return 0


def _openapi(_args: argparse.Namespace) -> int:
    from api.app import create_app
    from api.openapi import document, dumps

    # The document depends on routes only: a placeholder home, never touched.
    settings = Settings(home=Path("/nonexistent/c2-home"), database_url="sqlite://")
    sys.stdout.write(dumps(document(create_app(settings))))
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="c2", description="c2: coding-agent sessions over HTTP")
    commands = root.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP + SSE server")
    serve.add_argument("--host", default=DEFAULT_HOST)
    serve.add_argument("--port", type=int, default=DEFAULT_PORT)
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
    serve.set_defaults(run=_serve)

    pair = commands.add_parser("pair", help="mint a device bearer directly in the store")
    pair.add_argument("--name", required=True)
    pair.add_argument("--home", help="data folder (default $C2_HOME, else ~/.c2)")
    pair.add_argument(
        "--scopes",
        metavar="LIST",
        help="comma-separated scopes: read, approve, operate, admin (default: all four)",
    )
    pair.set_defaults(run=_pair)

    openapi = commands.add_parser("openapi", help="print the OpenAPI document")
    openapi.set_defaults(run=_openapi)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
