"""The ring of recent events (core/event_ring.py): what it can answer, and when it must say
"read the log" instead."""

from __future__ import annotations

from c2.core.event_ring import EventRing, event_frame
from c2.core.store.events import CommittedEvent


def _events(first: int, count: int, session: str | None = "a") -> list[CommittedEvent]:
    return [
        CommittedEvent(seq=s, session=session, payload="{}") for s in range(first, first + count)
    ]


def test_ring_answers_only_from_its_floor():
    """Before any batch, and for positions older than what it holds, the ring defers to the log."""
    ring = EventRing(max_events=5)
    assert ring.after(0, None, 10) is None
    ring.extend(_events(11, 8))  # holds 14..18 after evicting 11..13
    assert len(ring) == 5
    assert ring.after(12, None, 10) is None  # 13 was evicted
    held = ring.after(13, None, 10)
    assert held is not None and [e.seq for e in held] == [14, 15, 16, 17, 18]
    assert ring.after(18, None, 10) == []  # caught up


def test_ring_filters_by_session_and_limits():
    ring = EventRing()
    ring.extend(_events(1, 4, "a") + _events(5, 4, "b") + _events(9, 4, "a"))
    held = ring.after(0, "a", 6)
    assert held is not None and [e.seq for e in held] == [1, 2, 3, 4, 9, 10]
    held = ring.after(3, None, 3)
    assert held is not None and [e.seq for e in held] == [4, 5, 6]


def test_ring_reads_from_either_end_alike():
    """Positions near the newest end (read from that end) and near the oldest (read forward)
    give the same events, filters and limits as a plain list would."""
    ring = EventRing(max_events=10)
    ring.extend(_events(1, 6, "a") + _events(7, 4, "b") + _events(11, 4, "a"))  # holds 5..14
    everything = list(range(5, 15))
    for seq in range(4, 15):
        newer = [s for s in everything if s > seq]
        held = ring.after(seq, None, 3)
        assert held is not None and [e.seq for e in held] == newer[:3], seq
        mine = ring.after(seq, "a", 3)
        of_a = [s for s in newer if s <= 6 or s >= 11]
        assert mine is not None and [e.seq for e in mine] == of_a[:3], seq


def test_ring_is_bounded_by_bytes_and_shares_frames():
    """Frames are encoded once and shared while held; evicted ones are encoded on demand."""
    big = [CommittedEvent(seq=s, session=None, payload='"' + "x" * 1000 + '"') for s in (1, 2, 3)]
    ring = EventRing(max_bytes=2500)
    ring.extend(big)
    assert len(ring) == 2 and ring.size_bytes <= 2500
    assert ring.frame(big[2]) is ring.frame(big[2])
    assert ring.frame(big[0]) == event_frame(big[0])
    assert ring.frames(big) == b"".join(map(event_frame, big))  # evicted or held alike
    assert ring.after(0, None, 10) is None and ring.after(1, None, 10) == big[1:]


def test_frames_of_one_batch_are_joined_once_and_a_cut_batch_gets_its_own():
    """Every stream on all sessions is given the batch's own list: the second stream gets the
    first one's bytes; a stream that had sent a prefix gets only the rest."""
    ring = EventRing()
    batch = _events(1, 3)
    ring.extend(batch)
    whole = ring.frames(batch)
    assert whole == b"".join(event_frame(ev) for ev in batch)
    assert ring.frames(batch) is whole
    assert ring.frames(batch[1:]) == b"".join(event_frame(ev) for ev in batch[1:])
    assert ring.frames(list(batch)) == whole  # the same events in another list: joined anew


def test_a_seeded_ring_answers_resumes_from_its_first_event():
    """Seeded with the log's newest events at start, the ring answers positions from the one
    before them on, as if it had taken them live; before them it defers to the log."""
    ring = EventRing()
    ring.seed(_events(41, 10))  # the log's newest: 41..50
    assert ring.newest == 50
    assert ring.after(39, None, 100) is None
    held = ring.after(40, None, 100)
    assert held is not None and [e.seq for e in held] == list(range(41, 51))
    ring.extend(_events(51, 2))
    held = ring.after(48, None, 100)
    assert held is not None and [e.seq for e in held] == [49, 50, 51, 52]


def test_a_seed_never_goes_behind_what_the_ring_took_live():
    """A seed into a ring that already took a batch is ignored (it would open a gap below the
    live events); a batch committed before the seed's read, published after it, is not taken
    twice."""
    live = EventRing()
    live.extend(_events(51, 2))
    live.seed(_events(41, 12))
    assert live.after(49, None, 100) is None  # still only from 50 on
    held = live.after(50, None, 100)
    assert held is not None and [e.seq for e in held] == [51, 52]
    seeded = EventRing()
    seeded.seed(_events(41, 10))
    seeded.extend(_events(49, 4))  # 49 and 50 were in the seed already
    held = seeded.after(40, None, 100)
    assert held is not None and [e.seq for e in held] == list(range(41, 53))
    assert len(seeded) == 12
