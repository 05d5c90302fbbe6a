"""The one prompt compiler behind both a real prompt and its preview (docs/api.md §4): it reads the
@chat context of referenced sessions from the store, then compiles off the event loop."""

from __future__ import annotations

import asyncio

from c2.core.outcomes import PromptPreview
from c2.core.prompts import compile_prompt
from c2.core.protocol.ops import Doc, SessionRefBlock
from c2.core.skills import SkillLibrary
from c2.core.store.database import Store
from c2.core.transcript import referenced_chat_context


class PromptCompiler:
    """Compiles a prompt document for a session folder (skills, @chat references)."""

    def __init__(self, store: Store, skills: SkillLibrary) -> None:
        self._store = store
        self.skills = skills

    async def compile(self, cwd: str, doc: Doc) -> PromptPreview:
        """The provider prompt of `doc` in `cwd` and what could not be resolved."""
        refs = {b.session_id for b in doc if isinstance(b, SessionRefBlock)}
        contexts: dict[str, str | None] = {}
        for ref in refs:
            contexts[ref] = await self._store.read(
                lambda r, ref=ref: referenced_chat_context(r, ref)  # type: ignore[misc]
            )
        compiled = await asyncio.to_thread(
            compile_prompt, doc, skills=self.skills, cwd=cwd, chat_context=contexts.get
        )
        return PromptPreview(prompt=compiled.text, unresolved=compiled.unresolved)
