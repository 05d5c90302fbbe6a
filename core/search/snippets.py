"""Highlighted snippets: a window of a hit's text around its first match.

A snippet is plain text (never escaped) in which each matched word is wrapped in
`<mark>`…`</mark>`; a cut end is marked with `…`. Words are compared as core/search/tokens.py
cuts them, so what is highlighted is what matched.
"""

from __future__ import annotations

import re

from c2.core.search.query import Query
from c2.core.search.tokens import runs

WINDOW = 200  # characters of text in a snippet
LEAD = 60  # characters kept before the first match
OPEN, CLOSE = "<mark>", "</mark>"


def _pattern(query: Query) -> re.Pattern[str] | None:
    """One regex finding every matched word (whole words, prefixes) and unspaced-script text."""
    words: set[str] = set()
    prefixes: set[str] = set()
    unspaced: set[str] = set()
    for term in query.positive_terms():
        found = runs(term.text)
        for index, run in enumerate(found):
            if run.ngram:
                unspaced.add(run.text)
            elif term.prefix and index == len(found) - 1:
                prefixes.add(run.text)
            else:
                words.add(run.text)
    alternatives = [re.escape(w) + r"(?![^\W_])" for w in sorted(words, key=len, reverse=True)]
    alternatives += [re.escape(p) + r"[^\W_]*" for p in sorted(prefixes, key=len, reverse=True)]
    bounded = f"(?<![^\\W_])(?:{'|'.join(alternatives)})" if alternatives else ""
    loose = "|".join(re.escape(u) for u in sorted(unspaced, key=len, reverse=True))
    joined = "|".join(part for part in (bounded, loose) if part)
    return re.compile(joined, re.IGNORECASE) if joined else None


def _spans(body: str, query: Query) -> list[tuple[int, int]]:
    pattern = _pattern(query)
    return [] if pattern is None else [m.span() for m in pattern.finditer(body)]


def snippet(body: str, query: Query) -> str:
    """Up to WINDOW characters of `body` around its first match, matches marked."""
    text = " ".join(body.split())  # one line: newlines and runs of spaces read as one space
    spans = _spans(text, query)
    first = spans[0][0] if spans else 0
    start = max(0, first - LEAD)
    if start > 0:
        space = text.find(" ", start, first)
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + WINDOW)
    out: list[str] = ["…"] if start > 0 else []
    cursor = start
    for s, e in spans:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        out.append(text[cursor:s])
        out.append(OPEN + text[s:e] + CLOSE)
        cursor = e
    out.append(text[cursor:end])
    if end < len(text):
        out.append("…")
    return "".join(out)
