"""The wire JSON of a streamed text or thought chunk, built without its models.

Every chunk an agent streams is one transcript row (`TextPart` / `ReasoningPart`) and one
event (`AgentText` / `AgentThought`). Building and dumping those two models costs ~7 µs a chunk
on the store's writer thread, a quarter of its CPU when one agent streams flat out
(bench/fleet.py), and that thread shares the GIL with the event loop. Here the text is encoded
once (orjson escapes strings exactly as pydantic does) and both documents are put together
around it. tests/unit/test_chunk_json.py holds them equal to the models' own `encode()` and
`model_dump_json`, so a field added to either model fails there, not on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson


def json_string(value: str) -> str:
    """`value` as a JSON string. Like pydantic, it raises on a lone surrogate (TypeError)."""
    return orjson.dumps(value).decode()


@dataclass(slots=True)
class ChunkJson:
    """One chunk's transcript row (`part_json`) and its event up to the row's seq."""

    part_json: str
    _event_head: str

    def event(self, transcript_seq: int) -> str:
        """The chunk's event payload, numbered by its row."""
        return f"{self._event_head}{transcript_seq}}}"


def agent_text_json(session: str, message_id: str, text: str) -> ChunkJson:
    """`TextPart(text)` and `AgentText(session, message_id, text, transcript_seq)`."""
    body = json_string(text)
    return ChunkJson(
        f'{{"kind":"text","text":{body}}}',
        f'{{"event":"agent_text","session":{json_string(session)},'
        f'"message_id":{json_string(message_id)},"text":{body},"transcript_seq":',
    )


def agent_thought_json(session: str, text: str) -> ChunkJson:
    """`ReasoningPart(text)` and `AgentThought(session, text, transcript_seq)`."""
    body = json_string(text)
    return ChunkJson(
        f'{{"kind":"reasoning","text":{body}}}',
        f'{{"event":"agent_thought","session":{json_string(session)},"text":{body},'
        '"transcript_seq":',
    )
