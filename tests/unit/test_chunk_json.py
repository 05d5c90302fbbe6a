"""A streamed chunk's row and event, encoded without their models (core/protocol/chunks.py),
are byte for byte what the models encode: clients, the transcript and replay read one shape."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from c2.core.protocol.chunks import ChunkKind, ChunkRun, json_string
from c2.core.protocol.events import AgentText, AgentThought
from c2.core.protocol.state import ReasoningPart, TextPart

# Every code point a str can carry except lone surrogates (tested below), so escapes,
# control characters, U+2028 and astral characters are all drawn.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)
TRICKY = ['"', "\\", "/", "\x00", "\x1f", "\x7f", "\u2028", "é", "😀", "</script>", ""]


def run_of(kind: ChunkKind, session: str, message_id: str | None, texts: list[str]) -> ChunkRun:
    run = ChunkRun(kind, session, message_id)
    for text in texts:
        run.add(text, json_string(text))
    return run


@settings(max_examples=300)
@given(
    session=TEXT,
    message_id=TEXT,
    texts=st.lists(TEXT, min_size=1, max_size=4),
    seq=st.integers(0, 2**53),
)
def test_a_text_run_matches_its_models(
    session: str, message_id: str, texts: list[str], seq: int
) -> None:
    run = run_of("text", session, message_id, texts)
    assert run.part_jsons() == [TextPart(text=t).model_dump_json(exclude_none=True) for t in texts]
    assert run.events(seq) == [
        AgentText(session=session, message_id=message_id, text=t, transcript_seq=seq + i).encode()
        for i, t in enumerate(texts)
    ]


@settings(max_examples=300)
@given(session=TEXT, texts=st.lists(TEXT, min_size=1, max_size=4), seq=st.integers(0, 2**53))
def test_a_thought_run_matches_its_models(session: str, texts: list[str], seq: int) -> None:
    run = run_of("reasoning", session, None, texts)
    assert run.part_jsons() == [
        ReasoningPart(text=t).model_dump_json(exclude_none=True) for t in texts
    ]
    assert run.events(seq) == [
        AgentThought(session=session, text=t, transcript_seq=seq + i).encode()
        for i, t in enumerate(texts)
    ]


@pytest.mark.parametrize("text", TRICKY)
def test_characters_json_escapes_match(text: str) -> None:
    event = AgentText(session="s", message_id="m", text=text, transcript_seq=7)
    assert run_of("text", "s", "m", [text]).events(7) == [event.encode()]


def test_a_run_holds_one_message_of_one_kind() -> None:
    run = run_of("text", "s", "m", ["a"])
    assert run.continues("text", "m")
    assert not run.continues("text", "m2")
    assert not run.continues("reasoning", None)


def test_a_lone_surrogate_fails_as_the_model_does() -> None:
    # An agent's JSON may carry "\ud800"; neither encoding can write it as UTF-8, so the
    # chunk's write fails (and its turn with a terminal error) rather than store junk.
    with pytest.raises(Exception, match="surrogates not allowed"):
        TextPart(text="a\ud800").model_dump_json()
    with pytest.raises(TypeError, match="surrogates not allowed"):
        json_string("a\ud800")
