"""A c2 home on disk and its database, outside a running server: preparing and claiming the
home (one server per home), the start-up preflight, and the offline admin commands that write
to the database directly (`c2 pair`, `c2 pair-url`).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from c2.core.auth import PairedDevice, add_pairing_token, create_device
from c2.core.cluster.joining import JoinRefusedError, check_joining
from c2.core.cluster.membership import DEFAULT_LEASE_SECONDS
from c2.core.scopes import Scope
from c2.core.store.database import Store, UnknownSchemaError, sqlite_url
from c2.core.store.faults import describe
from c2.core.store.ownership import HomeLock, OwnershipError, claim_home

__all__ = [
    "DATABASE_FILES",
    "HomeLock",
    "StartupError",
    "mint_pairing_token",
    "open_home",
    "pair_device",
    "preflight",
    "prepare_home",
    "sqlite_url",
]
DATABASE_FILES = ("c2.db", "c2.db-wal", "c2.db-shm")


class StartupError(Exception):
    """A command (`serve`, `pair`, `pair-url`) cannot use the home or its database; the
    message is the one line a user sees."""


def prepare_home(home: Path, *, create_database: bool = True) -> None:
    """Create the home folder, or tighten an existing one: the folder readable by its owner
    only (0700), the database files 0600. With `create_database` (SQLite in the home), an
    empty c2.db is created 0600 up front: SQLite gives -wal and -shm the database's mode."""
    if not home.exists():
        home.mkdir(parents=True, mode=0o700)
    home.chmod(0o700)  # mkdir's mode is masked by the umask; an existing home may be open
    for name in DATABASE_FILES:
        path = home / name
        if create_database and name == "c2.db" and not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        if path.exists():
            path.chmod(0o600)


def open_home(home: Path, *, create_database: bool) -> HomeLock:
    """Create or tighten the home and claim it (one server per home)."""
    try:
        prepare_home(home, create_database=create_database)
        return claim_home(home)
    except OwnershipError as exc:
        raise StartupError(str(exc)) from None
    except OSError as exc:
        raise StartupError(f"cannot use home {home}: {exc.strerror or exc}") from None


def preflight(
    home: Path,
    database_url: str,
    *,
    cluster: bool = False,
    cluster_secret: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
) -> HomeLock:
    """Everything `c2 serve` must be able to do before it listens, checked with one-line
    errors: the home is writable and not served by another c2, the database opens, is not
    owned by another c2 (a `cluster` member: not by a plain one) and migrates; a member's key
    and instance id suit the running members (core/cluster/joining.py). Returns the home
    claim, held for the process's life (the server's own start re-enters it)."""
    if cluster and database_url.startswith("sqlite"):
        raise StartupError(
            "--cluster needs PostgreSQL: set C2_DATABASE_URL to a postgresql+psycopg:// URL"
        )
    claim = open_home(home, create_database=database_url == sqlite_url(home))
    store = _open_store(database_url, exclusive=True, cluster=cluster)
    try:
        store.start()
        store.migrate()
        if cluster:
            check_joining(store, home, cluster_secret, lease_seconds)
    except (OwnershipError, JoinRefusedError) as exc:
        raise StartupError(str(exc)) from None
    except (SQLAlchemyError, OSError) as exc:
        raise StartupError(f"cannot open the database: {describe(exc)}") from None
    except UnknownSchemaError as exc:
        raise StartupError(str(exc)) from None
    finally:
        store.close()
    return claim


def _open_store(database_url: str, *, exclusive: bool = False, cluster: bool = False) -> Store:
    """`Store(database_url, ...)`; a URL SQLAlchemy cannot parse or has no dialect for, or
    whose driver is not installed, is a StartupError (one line, not the URL: it may hold a
    password)."""
    try:
        return Store(database_url, exclusive=exclusive, cluster=cluster)
    except (SQLAlchemyError, ImportError) as exc:
        missing = " (its driver is not installed)" if isinstance(exc, ImportError) else ""
        raise StartupError(
            f"cannot open the database{missing}: {describe(exc)}; C2_DATABASE_URL takes "
            "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
        ) from None


def _offline_store(home: Path, database_url: str) -> Store:
    """The home's store, migrated, for a one-shot command next to a running server (no claim
    on the home); an unusable home or database is a StartupError."""
    try:
        prepare_home(home, create_database=database_url == sqlite_url(home))
    except OSError as exc:
        raise StartupError(f"cannot use home {home}: {exc.strerror or exc}") from None
    store = _open_store(database_url)
    try:
        store.migrate()
    except (SQLAlchemyError, OSError) as exc:
        store.close()
        raise StartupError(f"cannot open the database: {describe(exc)}") from None
    except UnknownSchemaError as exc:
        store.close()
        raise StartupError(str(exc)) from None
    return store


def pair_device(
    home: Path, database_url: str, name: str | None, scopes: frozenset[Scope]
) -> PairedDevice:
    """Pair a device directly in the database (local admin: whoever can read the home)."""
    store = _offline_store(home, database_url)
    try:
        return store.write_sync(lambda uow: create_device(uow, name, scopes))
    finally:
        store.close()


def mint_pairing_token(home: Path, database_url: str, ttl: timedelta) -> str:
    """A pairing token valid for `ttl`, written directly in the database."""
    store = _offline_store(home, database_url)
    try:
        return store.write_sync(lambda uow: add_pairing_token(uow, ttl))
    finally:
        store.close()
