"""SSE frame building (api/stream.py) and the resume decision (core/event_feed.py), without a
server."""

from __future__ import annotations

import json

from c2.api.stream import data_frame, event_frame
from c2.core.event_feed import resync_reason
from c2.core.store.events import CommittedEvent, LogBounds


def test_event_frame_wraps_the_stored_payload_verbatim():
    """`id: SEQ` then the stored wire JSON inside an `event` frame, byte for byte."""
    payload = '{"event":"error","session":null,"message":"é\\n","terminal":false}'
    frame = event_frame(CommittedEvent(seq=42, session=None, payload=payload))
    head, data, end = frame.split(b"\n", 2)
    assert head == b"id: 42" and end == b"\n"
    assert data == b'data: {"kind":"event","event":' + payload.encode() + b"}"
    assert json.loads(data[6:])["event"] == json.loads(payload)


def test_data_frame_optionally_carries_an_id():
    """Non-event frames have no id, except the welcome frame which carries `through`."""
    assert data_frame('{"kind":"resync"}') == b'data: {"kind":"resync"}\n\n'
    assert data_frame("{}", 7) == b"id: 7\ndata: {}\n\n"


def test_resync_reason_only_outside_the_retained_log():
    """Replayable: first-1 ≤ after ≤ last; older or ahead positions need a resync."""
    bounds = LogBounds(first=10, last=20)
    assert resync_reason(9, bounds) is None and resync_reason(20, bounds) is None
    assert "older" in (resync_reason(8, bounds) or "")
    assert "ahead" in (resync_reason(21, bounds) or "")
    assert resync_reason(0, LogBounds(first=None, last=0)) is None
    assert resync_reason(5, LogBounds(first=None, last=0)) is not None
