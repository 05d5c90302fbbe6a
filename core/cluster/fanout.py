"""Live fan-out of the shared event log to this instance's streams (issue 18).

Every member commits to one log (core/store/events.py numbers it in commit order). A writer
that commits events also sends, in the same transaction, a PostgreSQL NOTIFY carrying only a
position (`<instance id> <last seq>`); NOTIFY is delivered at COMMIT, so the rows are visible
when it arrives. Peers never receive events through the notification: they read them from
the log.

`LogFollower` is the only way events reach this instance's bus in a cluster, and it delivers
them in sequence order without a gap (the bus, its ring of recent frames and every stream
rely on that, exactly as with one writer). Its own commits go straight to the bus when they
are next in line (the common case: no peer committed since); otherwise they wait while the
follower reads the missing positions from the log. `PeerListener` holds the LISTEN
connection, reconnecting with back-off; after a reconnect the follower re-reads the log's
head, as notifications sent meanwhile are lost. The same connection carries control messages
(a revoked device) to every member.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from functools import partial

from sqlalchemy.engine import make_url

from c2.core.store.database import ReadUnit, Store
from c2.core.store.events import CommittedEvent

log = logging.getLogger(__name__)
Deliver = Callable[[list[CommittedEvent]], None]
FETCH_LIMIT = 500
RECONNECT_BACKOFF = (0.1, 2.0)


class LogFollower:
    """Delivers the log to the bus in order: own commits directly, peers' read from the log."""

    def __init__(self, store: Store, deliver: Deliver) -> None:
        self._store = store
        self._deliver = deliver
        self.through: int | None = None  # delivered through this seq (None: not started)
        self._target = 0  # highest seq known committed
        self._pending: dict[int, CommittedEvent] = {}  # own commits waiting for their turn
        self._wake = asyncio.Event()
        self._reread = False  # the head must be read from the log (notifications were lost)

    def begin(self, through: int) -> None:
        """Start after `through` (the log's head when this instance started listening)."""
        self.through = through
        self._target = max(self._target, through)
        self._pending = {seq: ev for seq, ev in self._pending.items() if seq > through}
        self._wake.set()

    def local(self, events: list[CommittedEvent]) -> None:
        """This instance's committed batch (the store's publish hook, on the loop)."""
        if not events:
            return
        if self.through is not None and not self._pending and events[0].seq == self.through + 1:
            self._publish(events)  # next in line: no peer committed in between
            return
        for ev in events:
            self._pending[ev.seq] = ev
        self.notified(events[-1].seq)

    def reread(self) -> None:
        """Notifications may have been lost (the listener reconnected): read the head."""
        self._reread = True
        self._wake.set()

    def notified(self, seq: int) -> None:
        """A commit through `seq` exists (a peer's notification, or a reconnect's re-read)."""
        if seq > self._target:
            self._target = seq
        self._wake.set()

    async def run(self) -> None:
        """Deliver up to the known head whenever it moves, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._catch_up()
            except Exception as exc:  # the database is away: try again shortly
                log.warning("could not read the event log for live delivery: %s", exc)
                self._reread = True
                await asyncio.sleep(RECONNECT_BACKOFF[0])
                self._wake.set()

    async def _catch_up(self) -> None:
        if self._reread:
            self._reread = False
            self.notified(await self._store.read(lambda r: r.events.last_seq()))
        while self.through is not None and self._target > self.through:
            run = self._pending_run()
            if run:
                self._publish(run)
                continue
            batch = await self._store.read(partial(_after, self.through))
            # Own commits may have been delivered while the read ran.
            fresh = [ev for ev in batch if ev.seq > self.through]
            if not fresh:
                if not batch:
                    return  # nothing visible beyond `through` (yet): wait for the next wake
                continue
            self._publish(fresh)

    def _pending_run(self) -> list[CommittedEvent]:
        assert self.through is not None
        run: list[CommittedEvent] = []
        nxt = self.through + 1
        while nxt in self._pending:
            run.append(self._pending.pop(nxt))
            nxt += 1
        return run

    def _publish(self, events: list[CommittedEvent]) -> None:
        self.through = events[-1].seq
        for seq in [s for s in self._pending if s <= self.through]:
            del self._pending[seq]
        self._target = max(self._target, self.through)
        self._deliver(events)


def _after(seq: int, r: ReadUnit) -> list[CommittedEvent]:
    return r.events.after(seq, limit=FETCH_LIMIT)


def conninfo(database_url: str) -> str:
    """The libpq URL of a SQLAlchemy `postgresql+psycopg://` URL (query options kept)."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


class PeerListener:
    """LISTENs on the schema's log and control channels; reconnects until cancelled."""

    def __init__(
        self,
        database_url: str,
        *,
        instance_id: str,
        on_position: Callable[[int], None],
        on_control: Callable[[str], None],
        on_connected: Callable[[], None],
    ) -> None:
        self._conninfo = conninfo(database_url)
        self._instance = instance_id
        self._on_position = on_position
        self._on_control = on_control
        self._on_connected = on_connected
        self.ready = asyncio.Event()  # set once the first LISTEN is in place

    async def run(self) -> None:
        """LISTEN until cancelled, reconnecting with back-off after a lost connection."""
        delay = RECONNECT_BACKOFF[0]
        while True:
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cluster listener lost its connection, reconnecting: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_BACKOFF[1])

    async def _listen(self) -> None:
        # psycopg is imported by cluster members only: a SQLite server never loads it (10 MB).
        import psycopg

        conn = await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, application_name=f"c2 listener {self._instance}"
        )
        try:
            cur = await conn.execute(
                "SELECT 'c2_log_' || md5(current_schema()), 'c2_ctl_' || md5(current_schema())"
            )
            row = await cur.fetchone()
            assert row is not None
            log_channel, control_channel = str(row[0]), str(row[1])
            await conn.execute(f'LISTEN "{log_channel}"')
            await conn.execute(f'LISTEN "{control_channel}"')
            self.ready.set()
            self._on_connected()  # re-read the head: notifications were lost while away
            async for note in conn.notifies():
                if note.channel == log_channel:
                    instance, _, seq = note.payload.partition(" ")
                    if instance != self._instance and seq.isdigit():
                        self._on_position(int(seq))
                else:
                    self._on_control(note.payload)
        finally:
            with contextlib.suppress(Exception):
                await conn.close()
