"""Webhook signing, retry delays, URL and event checks, and payload redaction (issue 15)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from c2.core.errors import InvalidWebhookUrlError, UnknownEventError
from c2.core.notify.payloads import WEBHOOK_EVENTS, KindTest, notifiable, push_topic, webhook_body
from c2.core.notify.push import PUSHED_EVENTS
from c2.core.notify.webhooks import (
    check_events,
    check_url,
    retry_delay,
    sign,
)
from c2.core.protocol.events import AgentText, AgentThought, PermissionRequest, TurnEnded
from c2.core.store.events import CommittedEvent


def test_signature_is_hmac_sha256_of_timestamp_dot_body():
    body = b'{"a":1}'
    expected = hmac.new(b"k", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert sign("k", "1700000000", body) == f"v1={expected}"
    assert sign("other", "1700000000", body) != sign("k", "1700000000", body)


@pytest.mark.parametrize(("attempts", "base"), [(1, 1), (2, 2), (3, 4), (4, 8), (8, 128)])
def test_retry_delay_doubles_with_twenty_percent_jitter(attempts: int, base: float):
    assert retry_delay(attempts, rand=lambda: 0.0) == pytest.approx(base * 0.8)
    assert retry_delay(attempts, rand=lambda: 1.0) == pytest.approx(base * 1.2)
    assert retry_delay(attempts, rand=lambda: 0.5) == pytest.approx(base)


def test_retry_delay_is_capped_at_five_minutes_and_scaled():
    assert retry_delay(10, rand=lambda: 1.0) == 300.0
    assert retry_delay(60, rand=lambda: 1.0) == 300.0
    assert retry_delay(3, scale=0.01, rand=lambda: 0.5) == pytest.approx(0.04)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/x", "https://hooks.example.com/c2?x=1", "http://192.168.1.20/h"],
)
def test_http_urls_on_any_host_are_accepted(url: str):
    assert check_url(url) == url


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "file:///etc/passwd", "http:///x", "http://a b/", "x", ""]
)
def test_other_urls_are_refused(url: str):
    with pytest.raises(InvalidWebhookUrlError):
        check_url(url)


def test_event_names_are_checked_and_deduplicated():
    assert check_events(["turn_ended", "error", "turn_ended"]) == ["turn_ended", "error"]
    with pytest.raises(UnknownEventError, match="agent_text"):
        check_events(["turn_ended", "agent_text"])
    with pytest.raises(UnknownEventError):
        check_events([])


def test_payload_carries_ids_titles_and_kinds_only_unless_content_is_included():
    ev = PermissionRequest(
        session="s1", request_id="r1", title="Run it", options=[("a", "Allow")], tool_kind="execute"
    )
    assert KindTest(frozenset({"turn_ended", "permission_request"}))(ev.encode())
    assert not KindTest(frozenset({"permission_resolved", "permission"}))(ev.encode())
    common: dict[str, Any] = {
        "delivery_id": "d",
        "webhook_id": "w",
        "seq": 7,
        "created_at": "t",
        "wire": ev.wire(),
        "session_title": "My session",
        "content": None,
    }
    plain = json.loads(webhook_body(include_content=False, **common))
    assert plain["data"] == {
        "session": "s1",
        "request_id": "r1",
        "title": "Run it",
        "tool_kind": "execute",
    }
    assert plain["session_title"] == "My session" and plain["event_seq"] == 7
    full = json.loads(webhook_body(include_content=True, **common))
    assert full["data"]["options"] == [["a", "Allow"]]
    ended = TurnEnded(session="s1", stop_reason="end_turn").wire()
    with_text = json.loads(
        webhook_body(include_content=True, **{**common, "wire": ended, "content": "x" * 20_000})
    )
    assert with_text["content"]["truncated"] is True
    assert len(with_text["content"]["text"]) == 16_000
    without = json.loads(
        webhook_body(include_content=False, **{**common, "wire": ended, "content": "secret"})
    )
    assert "content" not in without


def test_push_topic_fits_rfc_8030():
    uuid_tag = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert push_topic(uuid_tag) == "0f8fad5bd9cb469fa16570867728950e"
    long = push_topic("turn:" + "x" * 80)
    assert len(long) <= 32 and all(c.isalnum() or c in "-_" for c in long)


def test_notifiers_are_given_every_event_but_the_streamed_chunks():
    """Chunks are dropped before the notifiers look (most of a batch); no notification is
    ever about one, so nothing they act on is dropped."""
    session = "s1"
    events = [
        CommittedEvent(1, session, AgentText(session=session, message_id="m", text="t").encode()),
        CommittedEvent(2, session, AgentThought(session=session, text="t").encode()),
        CommittedEvent(3, session, TurnEnded(session=session, stop_reason="end_turn").encode()),
    ]
    assert [ev.seq for ev in notifiable(events)] == [3]
    assert not {"agent_text", "agent_thought"} & (WEBHOOK_EVENTS | PUSHED_EVENTS)
