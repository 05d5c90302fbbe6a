"""Device scopes (issue 15): what a paired device's bearer may do.

Four independent scopes: `read` (lists, transcripts, the stream), `approve` (answer
permissions), `operate` (create, prompt, cancel, settings, delete) and `admin` (devices). A
device holds a set of them, stored as a comma-separated text column; which scope each route
needs is declared where the route is defined (api/scopes.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Scope(StrEnum):
    """What a device may do: read, answer permissions, operate, administer."""

    READ = "read"
    APPROVE = "approve"
    OPERATE = "operate"
    ADMIN = "admin"


ALL_SCOPES: frozenset[Scope] = frozenset(Scope)
_ORDER = {scope: i for i, scope in enumerate(Scope)}


class UnknownScopeError(ValueError):
    """A scope name that is not one of the four (`c2 pair --scopes`)."""


def parse_scopes(text: str) -> frozenset[Scope]:
    """Scopes from comma-separated names (`read,approve`); an unknown or empty name is an
    UnknownScopeError naming it, and at least one scope is required."""
    names = [name.strip() for name in text.split(",")]
    scopes: set[Scope] = set()
    for name in names:
        try:
            scopes.add(Scope(name))
        except ValueError:
            known = ", ".join(s.value for s in Scope)
            raise UnknownScopeError(f"unknown scope {name!r} (known: {known})") from None
    return frozenset(scopes)


def scopes_text(scopes: Iterable[Scope]) -> str:
    """The stored form: names in canonical order, comma-separated."""
    return ",".join(ordered(scopes))


def ordered(scopes: Iterable[Scope]) -> list[str]:
    """Scope names in canonical order (read, approve, operate, admin)."""
    return [s.value for s in sorted(set(scopes), key=_ORDER.__getitem__)]
