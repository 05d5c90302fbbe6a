"""What each op returns to its initiating client besides the broadcast events (docs/api.md §3, §4).

The api layer maps each outcome type to a status code; the engine never sees HTTP.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from c2.core.protocol.state import ConfigOption, TranscriptEntry, part_wire
from c2.core.protocol.values import ExecutionPolicy, WorktreeBaseline


class PromptAccepted(BaseModel):
    session: str
    request_id: str | None
    turn_id: str
    transcript_seq: int | None


class CancelResult(BaseModel):
    session: str
    cancelled: bool


class AnswerResult(BaseModel):
    applied: bool


class PolicyResult(BaseModel):
    session: str
    policy: ExecutionPolicy
    request_id: str | None


class ModelResult(BaseModel):
    session: str
    current: str


class ModeResult(BaseModel):
    session: str
    current: str


class ConfigResult(BaseModel):
    session: str
    options: list[ConfigOption]


class TranscriptPage(BaseModel):
    kind: str = "transcript"
    session: str
    request_id: str | None
    entries: list[TranscriptEntry]
    next_before: int | None
    snapshot_through: int | None

    def wire(self) -> dict[str, Any]:
        """The page as sent: each entry's part in its wire form."""
        data = self.model_dump(mode="json", exclude={"entries"})
        data["entries"] = [
            {
                "seq": e.seq,
                "last_seq": e.last_seq,
                "role": e.role,
                "part": part_wire(e.part),
            }
            for e in self.entries
        ]
        return data


class PromptPreview(BaseModel):
    prompt: str
    unresolved: list[str]


class WorktreeDiscarded(BaseModel):
    session: str
    worktree_path: str | None
    removed_checkout: bool
    deleted_branch: str | None


class BaselineChoice(BaseModel):
    kind: str
    resolved: WorktreeBaseline | None
    unavailable_reason: str | None
