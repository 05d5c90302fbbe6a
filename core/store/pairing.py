"""Failed pairing attempts counted in the database (issue 18): the pairing-attempt limit of
cluster members is cluster-wide, so guesses spread over N members get one budget, not N.

PostgreSQL only (a cluster needs it; a plain server counts in memory, core/auth.py). Every
time is the database's clock. A client's check and its failure are serialized across
members by a transaction-level advisory lock on the client, so concurrent attempts on
several members cannot all pass one check. Rows older than the window are pruned as new
failures arrive. Every schema change here needs an Alembic revision in
migrations/versions/.
"""

from __future__ import annotations

import math

from sqlalchemy import Connection, text

# pg_advisory_xact_lock(int4, int4) key: "c4" and a hash of the schema and the client (the
# owner lock uses "c2", sequence assignment "c3").
_CLASS = 0x6334
_LOCK = text("SELECT pg_advisory_xact_lock(:a, hashtext(current_schema() || ' ' || :client))")
# The newest `n` failures of the client within the window: how many, and seconds until the
# oldest of them leaves the window.
_RECENT = text(
    "SELECT count(*), extract(epoch FROM min(failed_at) + make_interval(secs => :window) "
    "- now()) FROM (SELECT failed_at FROM pairing_failures WHERE client = :client "
    "AND failed_at > now() - make_interval(secs => :window) "
    "ORDER BY failed_at DESC LIMIT :n) AS recent"
)
_ADD = text("INSERT INTO pairing_failures (client, failed_at) VALUES (:client, now())")
_PRUNE = text(
    "DELETE FROM pairing_failures WHERE failed_at <= now() - make_interval(secs => :window)"
)


class PairingFailures:
    """One client's failed pairing attempts, as every member sees them."""

    def __init__(self, conn: Connection, client: str, attempts: int, window: float) -> None:
        self._conn, self._client = conn, client
        self._attempts, self._window = attempts, window
        conn.execute(_LOCK, {"a": _CLASS, "client": client})  # until this transaction ends

    def retry_after(self) -> int | None:
        """None when the client may try now, else the seconds until it may."""
        count, left = self._conn.execute(
            _RECENT, {"client": self._client, "window": self._window, "n": self._attempts}
        ).one()
        if int(count) < self._attempts:
            return None
        return max(1, math.ceil(float(left)))

    def fail(self) -> None:
        """Count one failed attempt (and forget those past the window, everyone's)."""
        self._conn.execute(_PRUNE, {"window": self._window})
        self._conn.execute(_ADD, {"client": self._client})
