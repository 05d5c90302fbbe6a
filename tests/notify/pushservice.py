"""A local fake Web Push service: it accepts pushes like a browser vendor's service, checks
the VAPID JWT (RFC 8292) against the server's public key, and DECRYPTS each message (RFC 8291,
aes128gcm) with the subscription's private key, as the browser would.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from tests.notify.receivers import Received, Receiver


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Browser:
    """One browser subscription: its key pair and auth secret, as `pushManager` makes them."""

    private_key: ec.EllipticCurvePrivateKey
    auth: bytes
    endpoint: str

    @classmethod
    def new(cls, endpoint: str) -> Browser:
        return cls(ec.generate_private_key(ec.SECP256R1()), os.urandom(16), endpoint)

    def to_json(self) -> dict[str, Any]:
        """`PushSubscription.toJSON()`."""
        point = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return {
            "endpoint": self.endpoint,
            "expirationTime": None,
            "keys": {"p256dh": b64url(point), "auth": b64url(self.auth)},
        }

    def decrypt(self, body: bytes) -> dict[str, Any]:
        plain = http_ece.decrypt(
            body, private_key=self.private_key, auth_secret=self.auth, version="aes128gcm"
        )
        message: dict[str, Any] = json.loads(plain)
        return message


class FakePushService(Receiver):
    """Answers 201 to pushes (or `gone` → 410 for an endpoint path listed there)."""

    def __init__(self) -> None:
        super().__init__()
        self.gone: set[str] = set()

    def endpoint(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/push/{name}"

    def status_for(self, headers: dict[str, str], body: bytes) -> int:
        return 201

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> int:
        if path in self.gone:
            with self._lock:
                self.requests.append(Received(path, headers, body, 410))
            return 410
        return super().answer(path, headers, body)


def check_vapid(req: Received, public_key: str, subject: str, audience: str) -> dict[str, Any]:
    """Verify the `Authorization: vapid t=<JWT>,k=<key>` of a push; returns the claims."""
    scheme, _, params = req.headers["Authorization"].partition(" ")
    assert scheme == "vapid"
    fields = dict(item.split("=", 1) for item in params.split(","))
    assert fields["k"] == public_key
    head, payload, signature = fields["t"].split(".")
    assert json.loads(unb64url(head)) == {"typ": "JWT", "alg": "ES256"}
    raw = unb64url(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(public_key))
    key.verify(der, f"{head}.{payload}".encode("ascii"), ec.ECDSA(hashes.SHA256()))
    claims: dict[str, Any] = json.loads(unb64url(payload))
    assert claims["sub"] == subject and claims["aud"] == audience
    assert time.time() < claims["exp"] <= time.time() + 24 * 3600
    return claims
