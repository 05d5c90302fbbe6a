"""The search query syntax, parsed once and compiled for each store.

Syntax (one for SQLite and PostgreSQL, documented in README "Search"):
- `word word` — every word must occur (AND); words are cut as core/search/tokens.py cuts text,
  so `parse_query` or `file.py` is a phrase of its words;
- `"a phrase"` — the words adjacent, in order;
- `a OR b` — either (upper-case `OR`; binds tighter than the implicit AND, so
  `error OR failure timeout` is `(error OR failure) AND timeout`);
- `-word`, `-"a phrase"` — must not occur (at least one term must not be negated);
- `pre*` — a word starting with `pre` (also at the end of a phrase: `"parse qu"*`).

Anything else is an InvalidQueryError (HTTP 422 `invalid_query`): unbalanced quotes, a
dangling `OR`, `OR` next to a negated term, nothing to look for, too many terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from c2.core.errors import InvalidQueryError
from c2.core.search.tokens import run_tokens, runs, tokenize

MAX_QUERY_CHARS = 500
MAX_TERMS = 32
_OR = "OR"
# A query item: optional "-", then a quoted phrase or a bare word, then an optional "*".
_ITEM = re.compile(r'\s*(-?)(?:"([^"]*)"(\*?)|([^\s"]+))')


@dataclass(frozen=True, slots=True)
class Term:
    """Tokens that must occur adjacent and in order (one token: a word)."""

    tokens: tuple[str, ...]
    prefix: bool = False  # the last token is a prefix
    gram: bool = False  # one character of an unspaced script, looked up alone
    text: str = ""  # the words as typed, lower-cased (for highlighting)


@dataclass(frozen=True, slots=True)
class Query:
    """AND of `all_of` (each an OR of terms) and NOT of each of `none_of`."""

    all_of: tuple[tuple[Term, ...], ...]
    none_of: tuple[Term, ...]

    def positive_terms(self) -> list[Term]:
        """Every term a match must contain."""
        return [term for group in self.all_of for term in group]


def _term(text: str, star: bool) -> Term | None:
    found = runs(text)
    if not found:
        return None
    if len(found) == 1 and found[0].ngram and len(found[0].text) == 1:
        return Term(tokens=(found[0].text,), gram=True, text=found[0].text)
    tokens: list[str] = []
    for run in found:
        # A query word too long to be indexed stays as typed: it then matches nothing.
        tokens.extend(run_tokens(run) or [run.text])
    # Bigrams already match inside longer runs; a prefix applies to words only.
    prefix = star and not found[-1].ngram
    return Term(tokens=tuple(tokens), prefix=prefix, text=" ".join(r.text for r in found))


def parse(q: str | None) -> Query:
    """Parse `q`; InvalidQueryError says what is wrong."""
    if q is None or not q.strip():
        raise InvalidQueryError("q is required: the words to search for")
    if len(q) > MAX_QUERY_CHARS:
        raise InvalidQueryError(f"q is longer than {MAX_QUERY_CHARS} characters")
    if q.count('"') % 2:
        raise InvalidQueryError('unbalanced quote in q: close every "phrase"')
    items: list[tuple[bool, bool, str | None, bool]] = []  # negated, is_or, text, star
    pos = 0
    while pos < len(q):
        if not q[pos:].strip():
            break
        match = _ITEM.match(q, pos)
        if match is None:  # pragma: no cover - every non-blank rest matches _ITEM
            raise InvalidQueryError("q cannot be parsed")
        pos = match.end()
        negated, quoted, bare, star = match.group(1), match.group(2), match.group(4), match.group(3)
        if quoted is None and bare == _OR and not negated:
            items.append((False, True, None, False))
        elif quoted is not None:
            items.append((bool(negated), False, quoted, bool(star)))
        else:
            stripped = bare.rstrip("*")
            items.append((bool(negated), False, stripped, stripped != bare))
    return _build(items)


def _build(items: list[tuple[bool, bool, str | None, bool]]) -> Query:
    groups: list[list[Term]] = []
    negated: list[Term] = []
    join_next = False  # the previous item was OR
    last_negated = False
    for index, (neg, is_or, text, star) in enumerate(items):
        if is_or:
            if index == 0 or index == len(items) - 1 or join_next:
                raise InvalidQueryError("OR must stand between two terms")
            if last_negated:
                raise InvalidQueryError("OR cannot join a negated term")
            join_next = True
            continue
        assert text is not None
        if neg and join_next:
            raise InvalidQueryError("OR cannot join a negated term")
        term = _term(text, star)
        if neg:
            if term is not None:
                negated.append(term)
        elif term is None:
            pass  # punctuation only: nothing to look for
        elif join_next and groups:
            groups[-1].append(term)
        else:
            groups.append([term])
        join_next = False
        last_negated = neg
    if not groups:
        raise InvalidQueryError("q has no word to look for (a query cannot be only -words)")
    if sum(map(len, groups)) + len(negated) > MAX_TERMS:
        raise InvalidQueryError(f"q has more than {MAX_TERMS} terms")
    return Query(tuple(tuple(g) for g in groups), tuple(negated))


# -- SQLite FTS5 ----------------------------------------------------------------------------


def _fts_term(term: Term) -> str:
    column = "grams" if term.gram else "terms"
    star = " *" if term.prefix else ""
    return f'{column} : "{" ".join(term.tokens)}"{star}'


def to_fts5(query: Query) -> str:
    """An FTS5 MATCH expression over the `terms` and `grams` columns."""
    groups = ["(" + " OR ".join(map(_fts_term, group)) + ")" for group in query.all_of]
    expression = "(" + " AND ".join(groups) + ")"
    for term in query.none_of:
        expression += f" NOT ({_fts_term(term)})"
    return expression


# -- PostgreSQL tsquery ---------------------------------------------------------------------


def _ts_term(term: Term) -> str:
    lexemes = [f"'{token}'" for token in term.tokens]
    if term.prefix:
        lexemes[-1] += ":*"
    return "(" + " <-> ".join(lexemes) + ")"


def to_tsquery(query: Query) -> str:
    """A `tsquery` literal (cast, never parsed by a text search configuration)."""
    groups = ["(" + " | ".join(map(_ts_term, group)) + ")" for group in query.all_of]
    expression = " & ".join(groups)
    for term in query.none_of:
        expression += f" & !{_ts_term(term)}"
    return expression


# -- in memory (a message still being streamed) ---------------------------------------------


class Matcher:
    """Evaluates a query against one text exactly as the stores would."""

    def __init__(self, query: Query) -> None:
        self._query = query

    def matches(self, text: str) -> bool:
        """Whether `text` satisfies the query (snippets and the in-memory check)."""
        tokens = tokenize(text)
        positions: dict[str, list[int]] = {}
        for index, token in enumerate(tokens.terms):
            positions.setdefault(token, []).append(index)
        grams = set(tokens.grams)

        def found(term: Term) -> bool:
            if term.gram:
                return term.tokens[0] in grams
            return _phrase_at(term, tokens.terms, positions)

        return all(any(map(found, group)) for group in self._query.all_of) and not any(
            map(found, self._query.none_of)
        )


def _phrase_at(term: Term, terms: list[str], positions: dict[str, list[int]]) -> bool:
    first, last = term.tokens[0], len(term.tokens) - 1

    def at(index: int, offset: int) -> bool:
        if index >= len(terms):
            return False
        token = term.tokens[offset]
        if offset == last and term.prefix:
            return terms[index].startswith(token)
        return terms[index] == token

    if last == 0 and term.prefix:
        return any(t.startswith(first) for t in positions)
    return any(
        all(at(start + offset, offset) for offset in range(1, last + 1))
        for start in positions.get(first, ())
    )
