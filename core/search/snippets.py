"""Highlighted snippets: a window of a hit's text around its first match.

A snippet is plain text (never escaped) in which each matched word is wrapped in
`<mark>`…`</mark>`; a cut end is marked with `…`. Words are compared as core/search/tokens.py
cuts them, so what is highlighted is what matched.
"""

from __future__ import annotations

import re

from core.search.query import Query
from core.search.tokens import runs

WINDOW = 200  # characters of text in a snippet
LEAD = 60  # characters kept before the first match
OPEN, CLOSE = "<mark>", "</mark>"
_WORD = re.compile(r"[^\W_]+")


def _spans(body: str, query: Query) -> list[tuple[int, int]]:
    words: set[str] = set()
    prefixes: list[str] = []
    unspaced: set[str] = set()
    for term in query.positive_terms():
        for run in runs(term.text):
            if run.ngram:
                unspaced.add(run.text)
            else:
                words.add(run.text)
        if term.prefix:
            last = runs(term.text)[-1].text
            words.discard(last)
            prefixes.append(last)
    spans: list[tuple[int, int]] = []
    for match in _WORD.finditer(body):
        for run in runs(match.group()):
            if not run.ngram and (run.text in words or run.text.startswith(tuple(prefixes))):
                spans.append(match.span())
                break
    lowered = body.lower() if len(body.lower()) == len(body) else body
    for piece in unspaced:
        start = lowered.find(piece)
        while start >= 0:
            spans.append((start, start + len(piece)))
            start = lowered.find(piece, start + len(piece))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


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
