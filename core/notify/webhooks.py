"""Webhooks (issue 15, part 3): the service behind `/v1/webhooks` and the delivery worker.

Deliveries come from the durable outbox the store fills in each event's own transaction
(core/store/webhooks.py). The `WebhookDispatcher` is one asyncio task of the server: it reads
due deliveries on a reader thread, posts each with `httpx.AsyncClient` (timeouts, bounded
concurrency, the response body never read), and records every outcome through the writer;
nothing it does blocks the event loop or holds the writer. It is woken when an event that
may have queued deliveries commits, when an attempt finishes, or when the next retry is due.

Every request is signed: `C2-Webhook-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "."
+ body)>` with `C2-Webhook-Timestamp` (unix seconds) and `C2-Webhook-Id` (the delivery id,
the same on every retry: receivers deduplicate on it; delivery is at least once). A failed
attempt (no 2xx in time; redirects are not followed) is retried after about 1, 2, 4, 8 … s
(±20 % jitter, at most 5 min); DISABLE_AFTER consecutive failures disable the webhook with a
`webhook_disabled` event, and its pending deliveries wait until it is re-enabled.

Over 300 lines: the routes' service and the delivery worker share the signing, the URL and
event checks and the retry schedule; the outbox itself is core/store/webhooks.py.
A dispatcher sends only the deliveries it claimed in the database (core/store/webhooks.py
`claim`, one conditional update for the due ones it is about to start), so two dispatchers
on one database (cluster members around a leader handover) never send the same delivery at
once. An attempt is bounded (ATTEMPT_SECONDS) well inside the claim's lease
(CLAIM_SECONDS); a sender that dies mid-attempt leaves its claim to run out, then the
delivery is due again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from c2.core.errors import (
    DomainError,
    InvalidWebhookUrlError,
    RequestIdReusedError,
    UnknownEventError,
    WebhookNotFoundError,
)
from c2.core.notify.payloads import WEBHOOK_EVENTS, KindTest
from c2.core.outbound import open_client
from c2.core.protocol.events import WebhookDisabled
from c2.core.session import utcnow
from c2.core.store.database import ReadUnit, Store, UnitOfWork
from c2.core.store.events import CommittedEvent
from c2.core.store.idempotency import Reply
from c2.core.store.webhooks import DueDelivery, WebhookRepository

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)
MAX_URL_CHARS = 2048
BACKOFF_CAP_SECONDS = 300.0
JITTER = 0.2
# Attempts in flight at once, and how long one may take.
CONCURRENCY = 8
CONNECT_TIMEOUT = 5.0
REQUEST_TIMEOUT = 10.0
# One attempt, all told (connect, send, the answer's head), and the claim a sender holds on a
# delivery meanwhile: longer than an attempt and the write recording its outcome.
ATTEMPT_SECONDS = CONNECT_TIMEOUT + 2 * REQUEST_TIMEOUT
CLAIM_SECONDS = 60.0
# Longest sleep with nothing due (a safety net: commits and finished attempts wake it).
IDLE_WAIT = 30.0
# Pause after the store could not record an outcome (the delivery is retried afterwards).
STORE_ERROR_PAUSE = 1.0
_MAY_DELIVER = KindTest(WEBHOOK_EVENTS)  # a committed event that may have queued deliveries


def check_url(url: str) -> str:
    """An http(s) URL with a host; loopback and private addresses are allowed (c2 is often
    on a LAN with its receivers)."""
    if len(url) > MAX_URL_CHARS or any(c.isspace() for c in url):
        raise InvalidWebhookUrlError("the URL is too long or contains whitespace")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError as exc:
        raise InvalidWebhookUrlError(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidWebhookUrlError("only http and https URLs are allowed")
    if not parts.hostname:
        raise InvalidWebhookUrlError("the URL has no host")
    return url


def shown_url(url: str) -> str:
    """A webhook URL as events and logs show it: scheme, host and port only. Its path, query
    and user info are often the secret itself (chat services' incoming-webhook URLs), and
    webhooks are an admin's business, while events reach every device."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    hidden = "/…" if (parts.path not in ("", "/") or parts.query or parts.username) else ""
    return f"{parts.scheme}://{host}{port}{hidden}"


def check_events(events: list[str]) -> list[str]:
    """The subscribed event names, deduplicated in order; an unknown one is named."""
    if not events:
        raise UnknownEventError("name at least one event")
    unknown = [name for name in events if name not in WEBHOOK_EVENTS]
    if unknown:
        known = ", ".join(sorted(WEBHOOK_EVENTS))
        raise UnknownEventError(f"unknown event {unknown[0]!r} (known: {known})")
    return list(dict.fromkeys(events))


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The `C2-Webhook-Signature` value: v1=<hex HMAC-SHA256(secret, timestamp "." body)>."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, "sha256")
    return f"v1={mac.hexdigest()}"


def retry_delay(
    attempts: int, scale: float = 1.0, rand: Callable[[], float] = random.random
) -> float:
    """Seconds before the next attempt after `attempts` failed ones: 1, 2, 4, 8 … ±20 %,
    at most 5 min, times `scale` (tests shorten it)."""
    base = 2.0 ** max(0, min(attempts - 1, 16))
    jittered = base * (1.0 - JITTER + 2 * JITTER * rand())
    return min(BACKOFF_CAP_SECONDS, jittered) * scale


class WebhookService:
    """Create, read, change and delete webhooks; list a webhook's deliveries."""

    def __init__(self, store: Store, due: Callable[[], None] = lambda: None) -> None:
        self._store = store
        # Told when deliveries became due with no event committed (a re-enabled webhook's),
        # which the dispatcher would otherwise only find after its idle wait.
        self._due = due

    async def create(
        self,
        *,
        url: str,
        secret: str,
        events: list[str],
        include_content: bool,
        device_id: str,
        request_id: str | None = None,
        refusal: Callable[[DomainError], Reply] | None = None,
    ) -> tuple[Reply, bool]:
        """The reply to creating a webhook (201, its wire form as JSON) and whether it is a
        replay of `request_id`. With a `request_id` the reply is kept as an op's is
        (core/idempotent.py): 2xx and 4xx outcomes, so a refused URL or event list, rendered
        by `refusal`, is the reply a retry gets too; another body under the same key is
        RequestIdReusedError. Without a `request_id` (or `refusal`) a refusal is raised."""
        names = list(dict.fromkeys(events))
        fingerprint = hashlib.sha256(
            json.dumps([url, secret, names, include_content]).encode("utf-8")
        ).hexdigest()
        refused: DomainError | None = None
        try:
            check_url(url)
            check_events(events)
        except DomainError as err:
            if request_id is None or refusal is None:
                raise
            refused = err

        def write(uow: UnitOfWork) -> tuple[Reply, bool]:
            if request_id is not None:
                record = uow.idempotency.get(device_id, request_id)
                if record is not None:
                    if not hmac.compare_digest(record.op_hash, fingerprint):
                        raise RequestIdReusedError(
                            f"request_id {request_id!r} was already used with a different body"
                        )
                    return Reply(record.status, record.body_json), True
            if refused is not None and refusal is not None:
                reply = refusal(refused)
            else:
                hook = WebhookRepository(uow.conn).create(
                    url=url,
                    secret=secret,
                    events=names,
                    include_content=include_content,
                    created_by=device_id,
                )
                reply = Reply(201, json.dumps(hook.wire(), separators=(",", ":")))
            if request_id is not None:
                uow.idempotency.put(device_id, request_id, fingerprint, reply.status, reply.body)
            return reply, False

        return await self._store.write(write)

    async def all(self) -> list[dict[str, Any]]:
        """Every webhook (secrets never included)."""
        hooks = await self._store.read(lambda r: WebhookRepository(r.conn).all())
        return [hook.wire() for hook in hooks]

    async def get(self, hook_id: str) -> dict[str, Any]:
        """One webhook; WebhookNotFoundError when there is none."""
        hook = await self._store.read(lambda r: WebhookRepository(r.conn).get(hook_id))
        if hook is None:
            raise WebhookNotFoundError(f"no webhook {hook_id!r}")
        return hook.wire()

    async def update(self, hook_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Change url, secret, events, include_content or enabled (true re-enables)."""
        if "url" in changes:
            check_url(changes["url"])
        if "events" in changes:
            changes["events"] = check_events(changes["events"])
        hook = await self._store.write(
            lambda uow: WebhookRepository(uow.conn).update(hook_id, changes)
        )
        if hook is None:
            raise WebhookNotFoundError(f"no webhook {hook_id!r}")
        if changes.get("enabled") is True:
            self._due()
        return hook.wire()

    async def delete(self, hook_id: str) -> None:
        """Delete a webhook and its delivery log."""
        if not await self._store.write(lambda uow: WebhookRepository(uow.conn).delete(hook_id)):
            raise WebhookNotFoundError(f"no webhook {hook_id!r}")

    async def prune(self, retention: timedelta) -> int:
        """Forget delivered deliveries past `retention` (housekeeping)."""
        cutoff = utcnow() - retention
        return await self._store.write(
            lambda uow: WebhookRepository(uow.conn).prune_delivered(cutoff)
        )

    async def deliveries(self, hook_id: str, limit: int) -> list[dict[str, Any]]:
        """A webhook's latest deliveries, newest first."""

        def read(r: Any) -> list[dict[str, Any]] | None:
            repo = WebhookRepository(r.conn)
            if repo.get(hook_id) is None:
                return None
            return [d.wire() for d in repo.deliveries(hook_id, limit)]

        found = await self._store.read(read)
        if found is None:
            raise WebhookNotFoundError(f"no webhook {hook_id!r}")
        return found


class WebhookDispatcher:
    """The delivery worker: run `run()` as a task for the server's life."""

    def __init__(
        self,
        store: Store,
        *,
        backoff_scale: float = 1.0,
        concurrency: int = CONCURRENCY,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self._store = store
        self._scale = backoff_scale
        self._concurrency = max(1, concurrency)
        self._timeout = timeout
        self._wake = asyncio.Event()
        self._inflight: dict[str, asyncio.Task[None]] = {}
        # This dispatcher as a sender in the deliveries it claims: its member (if any) and a
        # token of its own.
        self._sender = f"{store.instance_id or '-'} {uuid.uuid4().hex}"
        # Attempts that finished while `_start_due` was reading the pending list: that list may
        # predate their recorded outcome, so they must not be started again from it.
        self._finished_during_read: set[str] | None = None
        self._client: httpx.AsyncClient | None = None  # opened for the first due delivery
        self._read_failures = 0  # reads of the outbox failed in a row (the database is away)

    def notice(self, events: list[CommittedEvent]) -> None:
        """The store's publish hook (on the loop, after a commit): wake up when the batch
        holds an event that may have queued deliveries."""
        if any(_MAY_DELIVER(ev.payload) for ev in events):
            self._wake.set()

    def wake(self) -> None:
        """Look for due deliveries now (some became due without an event: a re-enable)."""
        self._wake.set()

    async def run(self) -> None:
        """Deliver pending webhook deliveries with retries and backoff, until cancelled."""
        # Claims this instance's earlier senders left (a restart, a killed process, a run
        # cancelled mid-attempt) would hold their deliveries for a lease: none of them sends.
        instance = self._store.instance_id  # None: a plain server, the only sender
        try:
            released = await self._store.write(
                lambda uow: WebhookRepository(uow.conn).release_claims(instance)
            )
        except Exception as exc:  # they become due when their claims run out
            log.warning("could not take back earlier webhook claims: %s", exc)
        else:
            if released:
                log.info("took back %d webhook deliveries an earlier run claimed", released)
        try:
            while True:
                self._wake.clear()
                wait = await self._next_wait()
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait):
                            await self._wake.wait()
        finally:
            for task in list(self._inflight.values()):
                task.cancel()
            if self._inflight:
                await asyncio.gather(*self._inflight.values(), return_exceptions=True)
            client, self._client = self._client, None
            if client is not None:
                await client.aclose()

    async def _next_wait(self) -> float:
        """Start what is due; seconds until it is time to look again. A database that cannot
        be read is said once, then retried ever less often (up to IDLE_WAIT), not every
        second for as long as it is away."""
        try:
            wait = await self._start_due()
        except Exception as exc:
            self._read_failures += 1
            if self._read_failures == 1:
                log.warning("could not read pending webhook deliveries: %s", exc)
            return float(min(STORE_ERROR_PAUSE * 2 ** min(self._read_failures - 1, 16), IDLE_WAIT))
        if self._read_failures:
            log.info("pending webhook deliveries read again after %d tries", self._read_failures)
            self._read_failures = 0
        return wait

    async def _start_due(self) -> float:
        """Start every due delivery a free slot can take; seconds until the next is due."""
        free = self._concurrency - len(self._inflight)
        if free <= 0:
            return IDLE_WAIT  # a finishing attempt wakes the loop
        limit = free + len(self._inflight)
        self._finished_during_read = set()
        try:
            pending, now = await self._store.read(_pending(limit))
        finally:
            finished, self._finished_during_read = self._finished_during_read, None
        due: list[DueDelivery] = []
        wait = IDLE_WAIT
        for delivery in pending:
            if delivery.id in self._inflight or delivery.id in finished:
                continue
            if delivery.next_attempt_at > now:
                wait = max(0.01, float((delivery.next_attempt_at - now).total_seconds()))
                break
            if len(due) >= free:
                break
            due.append(delivery)
        if not due:
            return wait
        if self._client is None:  # the first delivery of this run (core/outbound.py)
            self._client = await open_client(
                timeout=self._timeout, connect=CONNECT_TIMEOUT, max_connections=self._concurrency
            )
        client = self._client
        ids = [d.id for d in due]
        claimed = await self._store.write(
            lambda uow: WebhookRepository(uow.conn).claim(ids, self._sender, CLAIM_SECONDS)
        )
        for delivery in due:
            if delivery.id in claimed:
                self._inflight[delivery.id] = asyncio.create_task(
                    self._attempt(client, delivery), name=f"c2-webhook:{delivery.id}"
                )
        # Another sender took some: read again (they are due when its claim runs out).
        return wait if len(claimed) == len(due) else 0.0

    async def _attempt(self, client: httpx.AsyncClient, delivery: DueDelivery) -> None:
        try:
            try:
                async with asyncio.timeout(ATTEMPT_SECONDS):  # well inside the claim
                    status = await self._post(client, delivery)
            except TimeoutError:
                log.info(
                    "webhook delivery %s to %s timed out", delivery.id, shown_url(delivery.url)
                )
                status = None
            if status is not None and 200 <= status < 300:
                await self._store.write(
                    lambda uow: WebhookRepository(uow.conn).delivered(
                        delivery.id, delivery.webhook_id, status
                    )
                )
            else:
                await self._store.write(self._failure(delivery, status))
        except Exception as exc:
            # The outcome is not recorded: the delivery stays pending and is tried again.
            log.warning("could not record webhook delivery %s: %s", delivery.id, exc)
            await asyncio.sleep(STORE_ERROR_PAUSE)
        finally:
            self._inflight.pop(delivery.id, None)
            if self._finished_during_read is not None:
                self._finished_during_read.add(delivery.id)
            self._wake.set()

    async def _post(self, client: httpx.AsyncClient, delivery: DueDelivery) -> int | None:
        import httpx  # loaded with the client (core/outbound.py)

        body = delivery.body.encode("utf-8")
        stamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "c2-webhooks/1",
            "C2-Webhook-Id": delivery.id,
            "C2-Webhook-Timestamp": stamp,
            "C2-Webhook-Signature": sign(delivery.secret, stamp, body),
        }
        try:
            # Streamed and closed unread: a receiver's answer body is of no use and unbounded.
            async with client.stream("POST", delivery.url, content=body, headers=headers) as resp:
                return resp.status_code
        except httpx.HTTPError as exc:
            log.info(
                "webhook delivery %s to %s failed: %s", delivery.id, shown_url(delivery.url), exc
            )
            return None

    def _failure(self, delivery: DueDelivery, status: int | None) -> Callable[[UnitOfWork], None]:
        retry_in = retry_delay(delivery.attempts + 1, self._scale)

        def write(uow: UnitOfWork) -> None:
            disabled = WebhookRepository(uow.conn).failed(
                delivery.id, delivery.webhook_id, status, retry_in, self._sender
            )
            if disabled is not None:
                log.warning(
                    "webhook %s disabled after %d consecutive failures",
                    disabled.webhook_id,
                    disabled.failures,
                )
                uow.emit(
                    WebhookDisabled(
                        webhook=disabled.webhook_id,
                        url=shown_url(disabled.url),
                        failures=disabled.failures,
                        last_status=disabled.last_status,
                    )
                )

        return write


def _pending(limit: int) -> Callable[[ReadUnit], tuple[list[DueDelivery], datetime]]:
    """Read the pending deliveries and the senders' clock in one snapshot."""

    def read(r: ReadUnit) -> tuple[list[DueDelivery], datetime]:
        repo = WebhookRepository(r.conn)
        return repo.pending(limit), repo.now()

    return read
