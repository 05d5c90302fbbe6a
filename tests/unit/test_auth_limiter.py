"""The pairing attempt limiter and secret handling of core/auth.py, without a store."""

from __future__ import annotations

from c2.core.auth import AttemptLimiter, digest, new_secret


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


def test_attempt_limiter_memory_is_bounded_by_evicting_the_oldest_address():
    """A full table forgets the address that failed least recently, not every counter."""
    clock = Clock()
    limiter = AttemptLimiter(1, 60.0, clock=clock, max_keys=3)
    for key in ("a", "b", "c"):
        limiter.fail(key)
        clock.now += 1
    limiter.fail("a")  # a failed again: now b is the oldest
    limiter.fail("d")
    assert len(limiter._seen) == 3
    assert limiter.check("b") is None  # evicted
    assert all(limiter.check(k) is not None for k in ("a", "c", "d"))


def test_attempt_limiter_counts_only_failures():
    """Checking is free: only `fail` spends the budget."""
    limiter = AttemptLimiter(2, 60.0, clock=Clock())
    assert [limiter.check("a") for _ in range(10)] == [None] * 10
    limiter.fail("a")
    assert limiter.check("a") is None
    limiter.fail("a")
    assert limiter.check("a") == 60


def test_secrets_are_high_entropy_and_stored_as_digests():
    """Secrets are 256-bit URL-safe strings; the stored form is a sha256 hex digest."""
    secret = new_secret()
    assert len(secret) >= 43 and secret != new_secret()
    assert len(digest(secret)) == 64 and digest(secret) == digest(secret)
    assert secret not in digest(secret)
