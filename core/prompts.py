"""Prompt documents: canonical stored text, bubble display, automatic title, provider prompt.

Owns doc → text projections (docs/protocol.md §1.4, §3.1 step 5, §8.3). Reads no database:
@chat bodies arrive through the `chat_context` callable, skills through a SkillLibrary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from c2.core.protocol.ops import DocBlock, SessionRefBlock, SkillBlock, TextBlock
from c2.core.skills import SkillLibrary

DISPLAY_LIMIT = 400
_TITLE_LEAD = frozenset("#>*-+`\"'")
_SENTENCE_ENDS = ".?!。？！;；"
_TITLE_TRAIL = frozenset(",:，：")
# Scripts written without spaces between words get a scalar budget instead (docs/protocol.md §8.3).
_UNSPACED_RANGES = (
    (0x2E80, 0x2FDF),
    (0x3040, 0x30FF),
    (0x3400, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xAC00, 0xD7AF),
)


@dataclass(frozen=True)
class CompiledPrompt:
    """What the provider receives for one document, and the references that did not resolve."""

    text: str
    unresolved: list[str] = field(default_factory=list)


def _block_canonical(block: DocBlock) -> str:
    if isinstance(block, TextBlock):
        return block.text  # verbatim: the user's own words are never trimmed in storage
    if isinstance(block, SkillBlock):
        return f"[skill:{block.skill_id}]"
    return f"[chat:{block.session_id[:8]}]"


def canonical_text(doc: Sequence[DocBlock]) -> str:
    """Stored prompt text: each block's canonical string, empties dropped, blank-line joined."""
    return "\n\n".join(text for text in map(_block_canonical, doc) if text)


def display_text(canonical: str) -> str:
    """Bubble preview: the first 400 Unicode scalars, plus "…" when the text is longer."""
    if len(canonical) <= DISPLAY_LIMIT:
        return canonical
    return canonical[:DISPLAY_LIMIT] + "…"


def _unspaced(text: str) -> bool:
    return any(lo <= ord(c) <= hi for c in text for lo, hi in _UNSPACED_RANGES)


def title_from_text(text: str) -> str | None:
    """Compact title from the first meaningful sentence of `text` (docs/protocol.md §8.3);
    None if there is none."""
    line = next(
        (
            stripped
            for stripped in (raw.strip() for raw in text.split("\n"))
            if stripped and not stripped.startswith("```")
        ),
        None,
    )
    if line is None:
        return None
    lead = 0
    while lead < len(line) and (line[lead].isspace() or line[lead] in _TITLE_LEAD):
        lead += 1
    line = line[lead:]
    cut = next((i for i, c in enumerate(line) if c in _SENTENCE_ENDS), len(line))
    sentence = line[:cut].strip()
    if not sentence:
        return None
    unspaced = _unspaced(sentence)
    limit = 24 if unspaced else 40
    words = sentence.split()
    if not unspaced and len(words) > 1:
        title = ""
        for word in words[:8]:
            if title and len(title) + 1 + len(word) > limit:
                break
            # The original keeps an over-long first word whole; bound it so a title is never
            # longer than the budget (a pasted URL or hash would otherwise become the title).
            title = f"{title} {word}" if title else word[:limit]
    else:
        title = sentence[:limit]
    title = title.strip()
    end = len(title)
    while end > 0 and (title[end - 1].isspace() or title[end - 1] in _TITLE_TRAIL):
        end -= 1
    return title[:end] or None


def derive_title(doc: Sequence[DocBlock], canonical_text: str) -> str | None:
    """Automatic session title: the first text block yielding one, else the canonical text."""
    for block in doc:
        if isinstance(block, TextBlock):
            title = title_from_text(block.text)
            if title is not None:
                return title
    return title_from_text(canonical_text)


def compile_prompt(
    doc: Sequence[DocBlock],
    *,
    skills: SkillLibrary,
    cwd: str | None,
    chat_context: Callable[[str], str | None],
) -> CompiledPrompt:
    """Provider prompt text for `doc` (document order, blank-line joined) plus unresolved ids."""
    parts: list[str] = []
    unresolved: list[str] = []
    for block in doc:
        if isinstance(block, TextBlock):
            text = block.text.rstrip()
            if text:
                parts.append(text)
        elif isinstance(block, SkillBlock):
            skill = skills.get(block.skill_id, cwd)
            if skill is None:
                unresolved.append(block.skill_id)  # reported after turn_started (docs/api.md §3)
                continue
            body = skill.compile(block.params)
            if body:
                parts.append(body)
        elif isinstance(block, SessionRefBlock):
            context = chat_context(block.session_id)
            if context is None or not context.strip():
                unresolved.append(f"session:{block.session_id}")
                continue
            parts.append(context)
    return CompiledPrompt(text="\n\n".join(parts), unresolved=unresolved)
