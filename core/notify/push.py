"""Web Push (issue 15, part 3): VAPID keys, subscriptions, and the notifier that pushes a
parked permission, a finished turn, and the withdrawal of an answered permission.

The VAPID key pair is generated once into the home (`vapid_private.pem`, 0600). Encryption
(RFC 8291, `aes128gcm`) and the VAPID JWT (RFC 8292) come from pywebpush / py_vapid; the
request itself goes out on `httpx.AsyncClient`, and the CPU work (an ECDH and a signature per
message) runs on a worker thread, so nothing blocks the event loop. The notifier observes
committed events through the store's publish hook; a push is best effort (TTL-bound by
nature), so it is not kept in the outbox: a push lost in a crash is not retried.

The notifications for one input share `Topic` (RFC 8030; at most 32 URL-safe characters, the
input id without its dashes) and the payload's `tag` (the input id), so the push service and
the web client's service worker replace one with the next: answering the input sends a
`withdrawn` notification with the same Topic and tag, which the service worker closes.

Over 300 lines: keys, subscriptions and the notifier are one feature behind one route module;
each part is short and none is used without the others.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import ipaddress
import json
import logging
import os
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from c2.core.errors import InvalidPushSubscriptionError, PushSubscriptionNotFoundError
from c2.core.notify.payloads import KindTest, push_topic
from c2.core.outbound import open_client
from c2.core.store.database import Store
from c2.core.store.events import CommittedEvent
from c2.core.store.webhooks import PushSubscription, WebhookRepository, session_title

if TYPE_CHECKING:
    import httpx
    from py_vapid import Vapid02

log = logging.getLogger(__name__)
KEY_FILE = "vapid_private.pem"
# Seconds a push service keeps an undelivered message (a parked permission is still worth
# showing an hour later; a stale one is replaced by its withdrawal anyway).
TTL_SECONDS = 3600
JWT_SECONDS = 12 * 3600
CONCURRENCY = 8
REQUEST_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0
MAX_QUEUED = 1000
PAYLOAD_KEYS = ("type", "session", "session_title", "title", "tool_kind", "tag")
PUSHED_EVENTS = frozenset({"permission_request", "permission_resolved", "turn_ended"})
_PUSHED = KindTest(PUSHED_EVENTS)


def default_subject() -> str:
    """`mailto:` of this host, the VAPID subject when none is configured."""
    return f"mailto:c2@{socket.getfqdn() or socket.gethostname() or 'localhost'}"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_vapid(home: Path) -> Vapid02:
    """The home's VAPID key pair, generated (0600) on first use."""
    # py_vapid (with cryptography's EC keys) is imported here, on the first push-related call:
    # about 7 MB of memory that a server nobody subscribes to never needs.
    from py_vapid import Vapid02

    path = home / KEY_FILE
    if not path.exists():
        vapid = Vapid02()
        vapid.generate_keys()
        pem = vapid.private_pem()
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        os.replace(tmp, path)
    path.chmod(0o600)
    vapid = Vapid02.from_pem(path.read_bytes())
    # The subject is checked here (mailto: or https:); py_vapid's own check refuses a
    # mailto: of a host name without a dot.
    vapid.conf["no-strict"] = True
    return vapid


def check_subscription(body: dict[str, Any]) -> tuple[str, str, str]:
    """(endpoint, p256dh, auth) of a `PushSubscription.toJSON()`; 422 unless usable."""
    endpoint = body.get("endpoint")
    keys = body.get("keys")
    if not isinstance(endpoint, str) or not isinstance(keys, dict):
        raise InvalidPushSubscriptionError("expected PushSubscription.toJSON(): endpoint, keys")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(endpoint) > 2048:
        raise InvalidPushSubscriptionError("the endpoint must be an http(s) URL")
    p256dh, auth = keys.get("p256dh"), keys.get("auth")
    try:
        point = _unb64url(p256dh) if isinstance(p256dh, str) else b""
        secret = _unb64url(auth) if isinstance(auth, str) else b""
    except (binascii.Error, ValueError):
        point, secret = b"", b""
    if len(point) != 65 or point[0] != 4 or len(secret) != 16:
        raise InvalidPushSubscriptionError(
            "keys.p256dh must be a P-256 public key and keys.auth 16 bytes (base64url)"
        )
    assert isinstance(p256dh, str) and isinstance(auth, str)
    return endpoint, p256dh, auth


def endpoint_refusal(endpoint: str) -> str | None:
    """Why c2 does not push to `endpoint` by default, or None. Any paired device, a read-only
    one too, registers the endpoints c2 then POSTs to; browsers' push services are https on
    public addresses, so anything else would let such a device aim c2's requests inside the
    network. Resolves the host (blocking: call it on a worker thread)."""
    parts = urlsplit(endpoint)
    if parts.scheme != "https" or not parts.hostname:
        return "the endpoint must be an https URL (a browser's push service)"
    try:
        addresses = {
            info[4][0]
            for info in socket.getaddrinfo(
                parts.hostname, parts.port or 443, type=socket.SOCK_STREAM
            )
        }
    except (OSError, UnicodeError) as exc:
        return f"the endpoint's host {parts.hostname} does not resolve: {exc}"
    for address in sorted(addresses):
        if not is_public(ipaddress.ip_address(str(address).split("%", 1)[0])):
            return f"the endpoint's host {parts.hostname} is not a public address ({address})"
    return None


NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: an IPv4 address in its low 32 bits


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Global, and so is any IPv4 address it wraps: Python counts NAT64 (`64:ff9b::7f00:1`)
    and 6to4 (`2002:7f00:1::`) addresses global whatever they carry, and a network that
    routes them reaches the wrapped (loopback, private) address."""
    if not address.is_global:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address in NAT64:
            return is_public(ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF))
        for wrapped in (
            address.sixtofour,
            address.ipv4_mapped,
            address.teredo and address.teredo[1],
        ):
            if wrapped and not wrapped.is_global:
                return False
    return True


@dataclass(frozen=True, slots=True)
class Notification:
    """One push to send: its payload, its topic (a newer push replaces it) and urgency."""

    payload: dict[str, Any]
    topic: str
    urgency: str


class PushService:
    """The VAPID public key, subscriptions per device, and the pushing worker."""

    def __init__(
        self, store: Store, home: Path, subject: str = "", *, private_endpoints: bool = False
    ) -> None:
        self._store = store
        self._home = home
        # Endpoints anywhere (C2_PUSH_PRIVATE_ENDPOINTS), else only endpoint_refusal's.
        self._private_endpoints = private_endpoints
        self.subject = subject or default_subject()
        if not self.subject.startswith(("mailto:", "https:")):
            raise ValueError(f"the VAPID subject must be a mailto: or https: URI: {subject!r}")
        self._vapid: Vapid02 | None = None
        self._vapid_lock = threading.Lock()  # one key pair, however many threads ask first
        self._queue: deque[CommittedEvent] = deque(maxlen=MAX_QUEUED)
        self._wake = asyncio.Event()
        self._jwts: dict[str, tuple[float, dict[str, str]]] = {}

    # -- keys and subscriptions ----------------------------------------------------------------

    @property
    def vapid(self) -> Vapid02:
        """The server's VAPID key pair, loaded (or created in the home) on first use; file I/O,
        so callers on the event loop go through a worker thread (`public_key`)."""
        with self._vapid_lock:
            if self._vapid is None:
                self._vapid = load_vapid(self._home)
            return self._vapid

    async def public_key(self) -> str:
        """The application server key for `pushManager.subscribe`, base64url."""
        return await asyncio.to_thread(self._public_key)

    def _public_key(self) -> str:
        # On the worker thread with the key's loading: the first call imports cryptography
        # (~0.1 s), which on the event loop held every stream and request that long.
        from cryptography.hazmat.primitives import serialization

        raw = self.vapid.public_key.public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return _b64url(raw)

    async def subscribe(self, device_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Record a browser's push subscription for `device_id`; its wire form."""
        endpoint, p256dh, auth = check_subscription(body)
        refusal = await self._refusal(endpoint)
        if refusal is not None:
            raise InvalidPushSubscriptionError(refusal)
        sub = PushSubscription(
            id=hashlib.sha256(endpoint.encode("utf-8")).hexdigest()[:32],
            device_id=device_id,
            endpoint=endpoint,
            p256dh=p256dh,
            auth=auth,
        )
        await self._store.write(lambda uow: WebhookRepository(uow.conn).subscribe_push(sub))
        return {"id": sub.id, "endpoint": endpoint, "device_id": device_id}

    async def _refusal(self, endpoint: str) -> str | None:
        if self._private_endpoints:
            return None
        return await asyncio.to_thread(endpoint_refusal, endpoint)

    async def subscriptions(self, device_id: str) -> list[dict[str, Any]]:
        """The push subscriptions of `device_id`."""
        subs = await self._store.read(lambda r: WebhookRepository(r.conn).push_subscriptions())
        return [
            {"id": s.id, "endpoint": s.endpoint, "device_id": s.device_id}
            for s in subs
            if s.device_id == device_id
        ]

    async def unsubscribe(self, sub_id: str, device_id: str | None) -> None:
        """Remove a subscription (`device_id`: only if it is that device's)."""
        removed = await self._store.write(
            lambda uow: WebhookRepository(uow.conn).unsubscribe_push(sub_id, device_id)
        )
        if not removed:
            raise PushSubscriptionNotFoundError(f"no push subscription {sub_id!r}")

    # -- pushing -------------------------------------------------------------------------------

    def notice(self, events: list[CommittedEvent]) -> None:
        """The store's publish hook: queue what is pushed (oldest dropped past MAX_QUEUED)."""
        for ev in events:
            if _PUSHED(ev.payload):
                self._queue.append(ev)
                self._wake.set()

    async def run(self) -> None:
        """Send pushes as events ask for them, until cancelled."""
        # The client only once there is a push (core/outbound.py).
        await self._wake.wait()
        client = await open_client(
            timeout=REQUEST_TIMEOUT, connect=CONNECT_TIMEOUT, max_connections=CONCURRENCY
        )
        async with client:
            gate = asyncio.Semaphore(CONCURRENCY)
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    ev = self._queue.popleft()
                    try:
                        await self._push_event(client, gate, ev)
                    except Exception:
                        log.exception("could not push event %d", ev.seq)

    async def _push_event(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, ev: CommittedEvent
    ) -> None:
        wire = json.loads(ev.payload)
        session = str(wire.get("session"))

        def read(r: Any) -> tuple[str | None, list[PushSubscription]]:
            return session_title(r.conn, session), WebhookRepository(r.conn).push_subscriptions()

        title, subs = await self._store.read(read)
        if not subs:
            return
        note = notification(wire, title)

        async def one(sub: PushSubscription) -> None:
            async with gate:
                await self._send(client, sub, note)

        await asyncio.gather(*(one(sub) for sub in subs))

    async def _send(
        self, client: httpx.AsyncClient, sub: PushSubscription, note: Notification
    ) -> None:
        import httpx  # loaded with the client (core/outbound.py)

        # Checked again before each push: the host's addresses may have changed since (a name
        # that resolved to a public address at subscription, and no longer does).
        refusal = await self._refusal(sub.endpoint)
        if refusal is not None:
            log.warning("push to subscription %s not sent: %s", sub.id, refusal)
            return
        data = json.dumps(note.payload, separators=(",", ":")).encode("utf-8")
        info = {"endpoint": sub.endpoint, "keys": {"p256dh": sub.p256dh, "auth": sub.auth}}
        try:
            body, auth = await asyncio.to_thread(self._seal, info, data, sub.endpoint)
        except Exception as exc:
            log.warning("could not encrypt a push for subscription %s: %s", sub.id, exc)
            return
        headers = {
            **auth,
            "TTL": str(TTL_SECONDS),
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "Topic": note.topic,
            "Urgency": note.urgency,
        }
        try:
            async with client.stream("POST", sub.endpoint, content=body, headers=headers) as resp:
                status = resp.status_code
        except httpx.HTTPError as exc:
            log.info("push to subscription %s failed: %s", sub.id, exc)
            return
        if status in (404, 410):
            # The browser dropped the subscription: forget it (RFC 8030 §7.3).
            await self._store.write(
                lambda uow: WebhookRepository(uow.conn).unsubscribe_push(sub.id)
            )
        elif not 200 <= status < 300:
            log.info("push service answered %d for subscription %s", status, sub.id)

    def _seal(
        self, info: dict[str, Any], data: bytes, endpoint: str
    ) -> tuple[bytes, dict[str, str]]:
        """The encrypted body and the VAPID Authorization header (on a worker thread)."""
        # Imported on the first push, not at start: pywebpush brings requests and aiohttp
        # (about 0.4 s of import) that c2 uses nowhere else.
        from pywebpush import WebPusher

        sealed = WebPusher(info).encode(data, "aes128gcm")
        parts = urlsplit(endpoint)
        audience = f"{parts.scheme}://{parts.netloc}"
        now = time.time()
        cached = self._jwts.get(audience)
        if cached is None or cached[0] - now < JWT_SECONDS / 2:
            expires = int(now) + JWT_SECONDS
            claims = {"sub": self.subject, "aud": audience, "exp": expires}
            cached = (float(expires), dict(self.vapid.sign(claims)))
            self._jwts[audience] = cached
        return bytes(sealed["body"]), cached[1]


def notification(wire: dict[str, Any], session_title: str | None) -> Notification:
    """The payload `{"type","session","session_title","title","tool_kind","tag"}` of an event:
    titles and kinds only, never content."""
    kind = wire["event"]
    session = wire.get("session")
    if kind == "permission_request":
        tag = str(wire["request_id"])
        payload = {
            "type": "permission_request",
            "title": wire.get("title"),
            "tool_kind": wire.get("tool_kind"),
        }
        urgency = "high"
    elif kind == "permission_resolved":
        tag = str(wire["request_id"])
        payload = {"type": "withdrawn", "title": None, "tool_kind": None}
        urgency = "normal"
    else:  # turn_ended
        tag = f"turn-{session}"
        payload = {"type": "turn_ended", "title": wire.get("stop_reason"), "tool_kind": None}
        urgency = "normal"
    full = {"session": session, "session_title": session_title, **payload, "tag": tag}
    ordered = {
        k: full[k] for k in ("type", "session", "session_title", "title", "tool_kind", "tag")
    }
    return Notification(payload=ordered, topic=push_topic(tag), urgency=urgency)
