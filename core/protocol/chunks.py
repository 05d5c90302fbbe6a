"""The wire JSON of streamed text and thought chunks, built without their models.

Every chunk an agent streams is one transcript row (`TextPart` / `ReasoningPart`) and one
event (`AgentText` / `AgentThought`). Building and dumping those two models costs ~7 µs a chunk,
a quarter of the store writer's CPU when one agent streams flat out (bench/fleet.py). Here
each text is encoded once (orjson escapes strings exactly as pydantic does) and both documents
are put together around it. Consecutive chunks of one message travel as one `ChunkRun`: the
event's head (session, message id) is encoded once per run, not per chunk.
tests/unit/test_chunk_json.py holds them equal to the models' own `encode()` and
`model_dump_json`, so a field added to either model fails there, not on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import orjson

# A run's rows: the part's `kind`, and the search document kind it joins.
ChunkKind = Literal["text", "reasoning"]
SEARCH_KIND: dict[ChunkKind, str] = {"text": "text", "reasoning": "thought"}


def json_string(value: str) -> str:
    """`value` as a JSON string. Like pydantic, it raises on a lone surrogate (TypeError)."""
    return orjson.dumps(value).decode()


@dataclass(slots=True)
class ChunkRun:
    """Consecutive streamed chunks of one message of one session (a text message, or the
    agent's thoughts), with each text already a JSON string (`json_string`)."""

    kind: ChunkKind
    session: str
    message_id: str | None  # a text message's id; thoughts carry none
    texts: list[str] = field(default_factory=list)
    bodies: list[str] = field(default_factory=list)  # json_string of each text

    def continues(self, kind: ChunkKind, message_id: str | None) -> bool:
        """Whether a chunk of `kind` and `message_id` belongs to this run."""
        return self.kind == kind and self.message_id == message_id

    def add(self, text: str, body: str) -> None:
        """Append one chunk: its text and that text as `json_string` encodes it."""
        self.texts.append(text)
        self.bodies.append(body)

    def singles(self) -> list[ChunkRun]:
        """This run as runs of one chunk each."""
        return [
            ChunkRun(self.kind, self.session, self.message_id, [text], [body])
            for text, body in zip(self.texts, self.bodies, strict=True)
        ]

    def part_jsons(self) -> list[str]:
        """The chunks' transcript rows (`part_json`)."""
        kind = self.kind
        return [f'{{"kind":"{kind}","text":{body}}}' for body in self.bodies]

    def events(self, first_seq: int) -> list[str]:
        """The chunks' event payloads, their rows numbered from `first_seq`."""
        if self.kind == "text":
            assert self.message_id is not None
            head = (
                f'{{"event":"agent_text","session":{json_string(self.session)},'
                f'"message_id":{json_string(self.message_id)},"text":'
            )
        else:
            head = f'{{"event":"agent_thought","session":{json_string(self.session)},"text":'
        return [
            f'{head}{body},"transcript_seq":{seq}}}'
            for seq, body in enumerate(self.bodies, first_seq)
        ]
