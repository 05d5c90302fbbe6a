"""Search tokens: the one definition of what a searchable word is, on every store.

Both stores index exactly the tokens this module produces (SQLite FTS5 reads them as
space-separated text with its pass-through `ascii` tokenizer; PostgreSQL gets a `tsvector`
literal), and queries are cut by the same function, so SQLite, PostgreSQL and the in-memory
matcher of a message still being streamed agree on every match.

- A word is a maximal run of letters and digits (Unicode L* and N*), lower-cased; anything
  else separates words (`parse_query` is the two words `parse query`). Words longer than
  `MAX_WORD` characters (hashes, base64) are not indexed.
- Scripts written without spaces (CJK, Thai, Lao, Khmer, Myanmar) have no word boundaries a
  tokenizer can see, so a run of them becomes overlapping character bigrams (`東京都` →
  `東京 京都`): any query of two or more such characters is a phrase of bigrams. Every such
  character is also indexed alone (`grams`), so a one-character query is found through the
  index as well (no substring scan at any length).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_WORD = 64
# PostgreSQL keeps positions up to 16383 and at most 256 per lexeme.
_PG_MAX_POS = 16383
_PG_MAX_POSITIONS = 255

_NGRAM_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility jamo
    (0x31F0, 0x31FF),  # Katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul jamo extended A
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3134F),  # CJK extensions B-G
)


_NGRAM_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _NGRAM_RANGES)
# Letters and digits (Python's \w without the underscore), and the unspaced scripts within.
_WORD = re.compile(r"[^\W_]+")
_NGRAM_RUN = re.compile(f"([{_NGRAM_CLASS}]+)")
_NGRAM_ANY = re.compile(f"[{_NGRAM_CLASS}]")


@dataclass(frozen=True, slots=True)
class Run:
    """One run of word characters: a word, or a run of an unspaced script."""

    text: str
    ngram: bool


def runs(text: str) -> list[Run]:
    """The word runs of `text` in order, lower-cased."""
    out: list[Run] = []
    for word in _WORD.findall(text.lower()):
        if word.isascii() or _NGRAM_ANY.search(word) is None:
            out.append(Run(word, False))
            continue
        for index, piece in enumerate(_NGRAM_RUN.split(word)):
            if piece:
                out.append(Run(piece, index % 2 == 1))
    return out


def run_tokens(run: Run) -> list[str]:
    """A run's tokens at consecutive positions: the word, or its bigrams (a lone character
    of an unspaced script stands for itself)."""
    if not run.ngram:
        return [run.text] if len(run.text) <= MAX_WORD else []
    if len(run.text) == 1:
        return [run.text]
    return [run.text[i : i + 2] for i in range(len(run.text) - 1)]


@dataclass(frozen=True, slots=True)
class Tokens:
    """What one document contributes to the index."""

    terms: list[str]  # words and bigrams, at consecutive positions (phrases)
    grams: list[str]  # each character of an unspaced script, alone (one-character queries)

    def fts_terms(self) -> str:
        """The word terms as an FTS5 column value."""
        return " ".join(self.terms)

    def fts_grams(self) -> str:
        """The CJK bigrams as an FTS5 column value."""
        return " ".join(self.grams)

    def tsvector(self) -> str:
        """A PostgreSQL `tsvector` literal of these tokens (positions from 1)."""
        positions: dict[str, list[int]] = {}
        for index, term in enumerate(self.terms):
            found = positions.setdefault(term, [])
            if len(found) < _PG_MAX_POSITIONS:
                found.append(min(index + 1, _PG_MAX_POS))
        parts = [f"'{term}':{','.join(map(str, pos))}" for term, pos in positions.items()]
        parts.extend(f"'{gram}'" for gram in dict.fromkeys(self.grams) if gram not in positions)
        return " ".join(parts)


def tokenize(text: str) -> Tokens:
    """The index tokens of a document's text."""
    lowered = text.lower()
    if _NGRAM_ANY.search(lowered) is None:
        # No unspaced script (most text): every run is a word, as `runs` would find, at a
        # third of the cost of a Run per word (an agent message is tokenized as it streams).
        return Tokens([w for w in _WORD.findall(lowered) if len(w) <= MAX_WORD], [])
    return tokens_of(runs(text))


def tokens_of(found: list[Run]) -> Tokens:
    """The index tokens of word runs, in order."""
    terms: list[str] = []
    grams: list[str] = []
    for run in found:
        terms.extend(run_tokens(run))
        if run.ngram:
            grams.extend(run.text)
    return Tokens(terms, grams)
