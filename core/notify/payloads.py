"""What a notification says about an event: ids, titles and kinds, never transcript content
unless a webhook opted in (`include_content`).

Pure functions of an event's wire form, shared by the webhook outbox (which renders a body
once, in the event's own transaction, so every retry sends the same bytes) and Web Push.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from c2.core.store.events import CommittedEvent

# The events a webhook may subscribe to: the ones that say an agent needs someone or that a
# session changed. Per-chunk events (agent_text, tool_call, ...) are left out: they are the
# transcript itself and would turn every streamed word into an HTTP request.
WEBHOOK_EVENTS: frozenset[str] = frozenset(
    {
        "session_created",
        "session_deleted",
        "session_title_changed",
        "turn_started",
        "turn_ended",
        "permission_request",
        "permission_resolved",
        "budget_exceeded",
        "error",
        "webhook_disabled",
    }
)
# Fields of those events that are ids, titles, kinds or figures: what every payload may carry.
_SAFE_FIELDS: frozenset[str] = frozenset(
    {
        "session",
        "request_id",
        "title",
        "tool_kind",
        "stop_reason",
        "terminal",
        "code",
        "option_id",
        "answered_by",
        "transcript_seq",
        "action",
        "limit",
        "used",
        "webhook",
        "url",
        "failures",
        "last_status",
    }
)
# A turn's text in a content-carrying payload is cut past this many characters.
MAX_CONTENT_CHARS = 16_000


class KindTest:
    """Whether an encoded event is of one of some kinds, read without parsing: the `event`
    tag leads every payload, so it is one C-level prefix test, not a parse or a slice."""

    __slots__ = ("prefixes",)

    def __init__(self, kinds: frozenset[str]) -> None:
        self.prefixes = tuple(f'{{"event":"{kind}"' for kind in sorted(kinds))

    def __call__(self, payload: str) -> bool:
        """Whether `payload` is an event of one of the kinds."""
        return payload.startswith(self.prefixes)


# Streamed chunks: most events by far, and never a notification's (WEBHOOK_EVENTS and the
# pushed events leave them out).
_STREAMED = KindTest(frozenset({"agent_text", "agent_thought"}))


def notifiable(events: list[CommittedEvent]) -> list[CommittedEvent]:
    """Those of `events` a notifier may act on: all but the streamed chunks. One prefix test
    per event (inline: a call per event would cost more), made once per batch for every
    notifier."""
    prefixes = _STREAMED.prefixes
    return [ev for ev in events if not ev.payload.startswith(prefixes)]


def webhook_body(
    *,
    delivery_id: str,
    webhook_id: str,
    seq: int,
    created_at: str,
    wire: dict[str, Any],
    session_title: str | None,
    include_content: bool,
    content: str | None,
) -> str:
    """The JSON body of one delivery. Without `include_content` the event is reduced to its
    safe fields; with it the whole event is sent, plus the turn's agent text on turn_ended."""
    data = wire if include_content else {k: v for k, v in wire.items() if k in _SAFE_FIELDS}
    body: dict[str, Any] = {
        "delivery_id": delivery_id,
        "webhook_id": webhook_id,
        "event": wire["event"],
        "event_seq": seq,
        "created_at": created_at,
        "session": wire.get("session"),
        "session_title": session_title,
        "data": data,
    }
    if include_content and content is not None:
        truncated = len(content) > MAX_CONTENT_CHARS
        body["content"] = {"text": content[:MAX_CONTENT_CHARS], "truncated": truncated}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def push_topic(tag: str) -> str:
    """A Web Push `Topic` for `tag`: RFC 8030 allows at most 32 characters of the URL-safe
    base64 alphabet, so a uuid's dashes go (32 hex digits) and anything else is hashed."""
    plain = tag.replace("-", "")
    if len(plain) <= 32 and all(c.isalnum() or c in "_" for c in plain):
        return plain
    digest = hashlib.sha256(tag.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")[:32]
