"""The pairing attempt limiter and secret handling of core/auth.py, without a store."""

from __future__ import annotations

from core.auth import AttemptLimiter, digest, new_secret


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_attempt_limiter_counts_a_sliding_window():
    """N attempts pass per window; the next gets the seconds until the oldest expires."""
    clock = Clock()
    limiter = AttemptLimiter(3, 60.0, clock=clock)
    assert [limiter.hit("a") for _ in range(3)] == [None, None, None]
    assert limiter.hit("a") == 60
    assert limiter.hit("b") is None  # per client
    clock.now += 30
    assert limiter.hit("a") == 30
    clock.now += 30
    assert limiter.hit("a") is None


def test_attempt_limiter_memory_is_bounded():
    """Idle keys are forgotten once the table is full."""
    clock = Clock()
    limiter = AttemptLimiter(1, 1.0, clock=clock, max_keys=10)
    for i in range(10):
        limiter.hit(f"k{i}")
    clock.now += 2
    limiter.hit("new")
    assert len(limiter._seen) == 1


def test_secrets_are_high_entropy_and_stored_as_digests():
    """Secrets are 256-bit URL-safe strings; the stored form is a sha256 hex digest."""
    secret = new_secret()
    assert len(secret) >= 43 and secret != new_secret()
    assert len(digest(secret)) == 64 and digest(secret) == digest(secret)
    assert secret not in digest(secret)
