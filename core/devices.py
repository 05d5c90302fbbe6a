"""A paired device as core and the HTTP layer see it (the store maps its row to this)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from c2.core.scopes import Scope


@dataclass(frozen=True, slots=True)
class Device:
    """A paired device: its id, name, when it was paired and last seen, and its scopes."""

    id: str
    name: str
    created_at: datetime
    last_seen: datetime | None
    scopes: frozenset[Scope]
