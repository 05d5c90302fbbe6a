"""Canonical prompt text, display preview, automatic titles and prompt compilation."""

from __future__ import annotations

from pathlib import Path

import pytest

from c2.core.prompts import (
    canonical_text,
    compile_prompt,
    derive_title,
    display_text,
    title_from_text,
)
from c2.core.protocol.ops import DocBlock, SessionRefBlock, SkillBlock, TextBlock
from c2.core.protocol.state import PromptPart
from c2.core.session import SessionRecord
from c2.core.skills import SkillLibrary
from c2.core.store.database import Store
from c2.core.transcript import OMISSION_MARKER, referenced_chat_context


def text(value: str) -> TextBlock:
    return TextBlock(type="text", text=value)


def skill(skill_id: str, **params: str) -> SkillBlock:
    return SkillBlock(type="skill", skill_id=skill_id, params=params)


def chat(session_id: str) -> SessionRefBlock:
    return SessionRefBlock(type="session", session_id=session_id)


def no_chat(_: str) -> str | None:
    return None


@pytest.fixture
def library(tmp_path: Path) -> SkillLibrary:
    home = tmp_path / "home" / "skills"
    (home / "commit").mkdir(parents=True)
    (home / "commit" / "SKILL.md").write_text(
        "---\nname: Commit\ndescription: Commit messages\n"
        "params:\n  scope: core\n  style: terse\n---\n\n"
        "Write a commit message for {{scope}} in {{style}} style.\n\n",
        encoding="utf-8",
    )
    return SkillLibrary(home)


# ---------------------------------------------------------------------------------------------
# Canonical text and display


def test_prompts_canonical_text_keeps_user_text_but_not_expanded_context() -> None:
    """Text is verbatim, skills and chats are markers, empties vanish, blocks join blank-line."""
    doc: list[DocBlock] = [
        text("First line\n  indented line\n"),
        text(""),
        skill("review"),
        chat("12345678-aaaa-bbbb"),
    ]
    assert canonical_text(doc) == (
        "First line\n  indented line\n\n\n[skill:review]\n\n[chat:12345678]"
    )


def test_prompts_canonical_text_of_an_empty_doc_is_empty() -> None:
    """No blocks, or only empty text, give an empty canonical text."""
    assert canonical_text([]) == "" and canonical_text([text("")]) == ""


def test_prompts_display_text_is_bounded_to_400_scalars() -> None:
    """Display is the canonical text up to 400 scalars, then an ellipsis."""
    assert display_text("界" * 400) == "界" * 400
    assert display_text("界" * 401) == "界" * 400 + "…"
    assert display_text("") == ""


# ---------------------------------------------------------------------------------------------
# Titles (docs/protocol.md §8.3)


@pytest.mark.parametrize(
    ("source", "title"),
    [
        (
            "# Implement conversation search with useful snippets and loading states. More detail",
            "Implement conversation search with",
        ),
        (
            "调研并吸纳 t3code 更早版本中的高价值功能，继续完善产品",
            "调研并吸纳 t3code 更早版本中的高价值功能",
        ),
        ("```rust\nfn main() {}\n```", "fn main() {}"),
        ("  \n```\n```", None),
        ("", None),
        ("> * `Fix` the flaky test? Please", "Fix` the flaky test"),
        ("Refactor", "Refactor"),
        ("a" * 60, "a" * 40),
        ("one two three four five six seven eight nine", "one two three four five six seven eight"),
        ("Summarise: the plan, ", "Summarise: the plan"),
        ("Hello, world；再见", "Hello, world"),
        ("...", None),
        ("\r\n  ## Deploy to prod.\r\n", "Deploy to prod"),
        ("x" * 50 + " tail", "x" * 40),
    ],
)
def test_prompts_title_from_text_follows_the_reference_rules(
    source: str, title: str | None
) -> None:
    """Titles: first real line, leading markup stripped, first sentence, compact budgets."""
    assert title_from_text(source) == title


def test_prompts_title_for_an_eight_word_sentence_stops_at_eight_words() -> None:
    """At most eight words even when more would fit in 40 scalars."""
    assert title_from_text("a b c d e f g h i j") == "a b c d e f g h"


def test_prompts_derive_title_prefers_the_first_text_block_with_a_title() -> None:
    """The first text block yielding a title wins over skills and later text."""
    doc: list[DocBlock] = [
        skill("review"),
        text("```\n```"),
        text("Ship it. Now"),
        text("Later words"),
    ]
    assert derive_title(doc, canonical_text(doc)) == "Ship it"


def test_prompts_derive_title_falls_back_to_the_canonical_text() -> None:
    """Without a titled text block, the canonical text (markers included) names the session."""
    doc: list[DocBlock] = [skill("review")]
    assert derive_title(doc, canonical_text(doc)) == "[skill:review]"
    assert derive_title([], "") is None


# ---------------------------------------------------------------------------------------------
# Compilation


def test_prompts_compile_joins_parts_in_document_order(library: SkillLibrary) -> None:
    """Text is trimmed at the end, skills expand, chats inline, all blank-line joined."""
    doc: list[DocBlock] = [
        text("  Intro keeps its indent  \n\n"),
        text("   "),
        skill("commit", scope="auth module", style="conventional"),
        chat("chat-1"),
        text("Outro"),
    ]
    compiled = compile_prompt(doc, skills=library, cwd=None, chat_context=lambda sid: f"CTX {sid}")
    assert compiled.text == (
        "  Intro keeps its indent\n\n"
        "Write a commit message for auth module in conventional style.\n\n"
        "CTX chat-1\n\nOutro"
    )
    assert compiled.unresolved == []


def test_prompts_compile_reports_unknown_skills_and_chats(library: SkillLibrary) -> None:
    """Unknown skills and empty or unknown chats are unresolved and contribute no text."""
    doc: list[DocBlock] = [
        skill("nope"),
        skill("../commit"),
        chat("ghost"),
        chat("blank"),
        text("go"),
    ]
    contexts = {"blank": "  \n"}
    compiled = compile_prompt(doc, skills=library, cwd=None, chat_context=contexts.get)
    assert compiled.text == "go"
    assert compiled.unresolved == ["nope", "../commit", "session:ghost", "session:blank"]


def test_prompts_compile_uses_skill_defaults(library: SkillLibrary) -> None:
    """Params absent from the block fall back to the skill's defaults."""
    compiled = compile_prompt(
        [skill("commit", style="conventional")], skills=library, cwd=None, chat_context=no_chat
    )
    assert compiled.text == "Write a commit message for core in conventional style."


def test_prompts_compile_inlines_a_referenced_chat_from_one_read(
    store: Store, library: SkillLibrary
) -> None:
    """A stored chat inlines its bounded context; the prompt row contributes canonical text."""
    sid = "0123456789abcdef"

    def seed(uow: object) -> None:
        from c2.core.store.database import UnitOfWork

        assert isinstance(uow, UnitOfWork)
        uow.sessions.insert(SessionRecord(id=sid, provider="codex", cwd="/", title="Auth work"))
        for n in range(21):
            uow.parts.append(sid, "user", PromptPart(text=f"ask {n}", display="shown"))
            uow.parts.append(sid, "agent", PromptPart(text=f"answer {n}", display="x"))

    store.write_sync(seed)
    doc: list[DocBlock] = [text("Continue from"), chat(sid)]
    compiled = store.read_sync(
        lambda r: compile_prompt(
            doc,
            skills=library,
            cwd=None,
            chat_context=lambda ref: referenced_chat_context(r, ref),
        )
    )
    assert compiled.unresolved == []
    assert compiled.text.startswith(
        f"Continue from\n\n**Referenced chat** — Auth work\n\n{OMISSION_MARKER}\n\n**User:**\nask 1"
    )
    assert compiled.text.endswith("**Agent:**\nanswer 20") and "ask 0\n" not in compiled.text
    assert canonical_text(doc) == "Continue from\n\n[chat:01234567]"
