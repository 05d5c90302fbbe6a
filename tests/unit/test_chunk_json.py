"""A streamed chunk's row and event, encoded without their models (core/protocol/chunks.py),
are byte for byte what the models encode: clients, the transcript and replay read one shape."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from c2.core.protocol.chunks import agent_text_json, agent_thought_json
from c2.core.protocol.events import AgentText, AgentThought
from c2.core.protocol.state import ReasoningPart, TextPart

# Every code point a str can carry except lone surrogates (tested below), so escapes,
# control characters, U+2028 and astral characters are all drawn.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)
TRICKY = ['"', "\\", "/", "\x00", "\x1f", "\x7f", "\u2028", "é", "😀", "</script>", ""]


@settings(max_examples=300)
@given(session=TEXT, message_id=TEXT, text=TEXT, seq=st.integers(0, 2**53))
def test_agent_text_matches_its_models(session: str, message_id: str, text: str, seq: int) -> None:
    encoded = agent_text_json(session, message_id, text)
    assert encoded.part_json == TextPart(text=text).model_dump_json(exclude_none=True)
    event = AgentText(session=session, message_id=message_id, text=text, transcript_seq=seq)
    assert encoded.event(seq) == event.encode()


@settings(max_examples=300)
@given(session=TEXT, text=TEXT, seq=st.integers(0, 2**53))
def test_agent_thought_matches_its_models(session: str, text: str, seq: int) -> None:
    encoded = agent_thought_json(session, text)
    assert encoded.part_json == ReasoningPart(text=text).model_dump_json(exclude_none=True)
    event = AgentThought(session=session, text=text, transcript_seq=seq)
    assert encoded.event(seq) == event.encode()


@pytest.mark.parametrize("text", TRICKY)
def test_characters_json_escapes_match(text: str) -> None:
    event = AgentText(session="s", message_id="m", text=text, transcript_seq=7)
    assert agent_text_json("s", "m", text).event(7) == event.encode()


def test_a_lone_surrogate_fails_as_the_model_does() -> None:
    # An agent's JSON may carry "\ud800"; neither encoding can write it as UTF-8, so the
    # chunk's write fails (and its turn with a terminal error) rather than store junk.
    with pytest.raises(Exception, match="surrogates not allowed"):
        TextPart(text="a\ud800").model_dump_json()
    with pytest.raises(TypeError, match="surrogates not allowed"):
        agent_text_json("s", "m", "a\ud800")
