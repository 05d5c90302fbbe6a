"""The search query syntax: parsing, what each store receives, the in-memory matcher, tokens
and snippets (core/search/)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from c2.core.errors import InvalidQueryError
from c2.core.search.query import (
    Matcher,
    Term,
    parse,
    to_fts5,
    to_tsquery,
)
from c2.core.search.snippets import snippet
from c2.core.search.tokens import runs, tokenize, tokens_of


def test_words_are_anded_or_binds_tighter_and_negation_applies_last() -> None:
    query = parse("error OR failure timeout -flaky")
    assert query.all_of == (
        (Term(("error",), text="error"), Term(("failure",), text="failure")),
        (Term(("timeout",), text="timeout"),),
    )
    assert query.none_of == (Term(("flaky",), text="flaky"),)
    assert to_fts5(query) == (
        '((terms : "error" OR terms : "failure") AND (terms : "timeout")) NOT (terms : "flaky")'
    )
    assert to_tsquery(query) == "(('error') | ('failure')) & (('timeout')) & !('flaky')"


def test_phrases_prefixes_and_punctuation() -> None:
    assert parse('"Parse the QUERY"').all_of[0][0].tokens == ("parse", "the", "query")
    term = parse('"parse qu"*').all_of[0][0]
    assert term.prefix and term.tokens == ("parse", "qu")
    assert to_tsquery(parse("pars*")) == "(('pars':*))"
    assert to_fts5(parse("pars*")) == '((terms : "pars" *))'
    # A word with punctuation inside is the phrase of its words, as in the index.
    assert parse("core/search.py").all_of[0][0].tokens == ("core", "search", "py")
    assert parse("parse_query").all_of[0][0].tokens == ("parse", "query")
    # Punctuation alone is nothing to look for, and is skipped among words.
    assert parse("hello !!!").all_of == ((Term(("hello",), text="hello"),),)


def test_cjk_terms_are_bigram_phrases_and_one_character_is_a_gram() -> None:
    assert parse("東京都").all_of[0][0].tokens == ("東京", "京都")
    assert parse("東京").all_of[0][0].tokens == ("東京",)
    one = parse("東").all_of[0][0]
    assert one.gram and to_fts5(parse("東")) == '((grams : "東"))'
    # A star after an unspaced script is ignored: bigrams already match inside longer runs.
    assert not parse("東京*").all_of[0][0].prefix
    assert parse("東京tower").all_of[0][0].tokens == ("東京", "tower")


@pytest.mark.parametrize(
    "q",
    [
        None,
        "",
        "   ",
        '"open',
        'a "b" "c',
        "OR",
        "OR a",
        "a OR",
        "a OR OR b",
        "a OR -b",
        "-a OR b",
        "-a",
        "-a -b",
        "!!! ???",
        "x" * 501,
        " ".join(f"w{i}" for i in range(33)),
    ],
)
def test_unparsable_queries_are_invalid_query(q: str | None) -> None:
    with pytest.raises(InvalidQueryError) as caught:
        parse(q)
    assert caught.value.code == "invalid_query"


def test_lower_case_or_is_a_word() -> None:
    assert [t.tokens for g in parse("this or that").all_of for t in g] == [
        ("this",),
        ("or",),
        ("that",),
    ]


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("quick fox", True),
        ("quick cat", False),
        ('"brown fox"', True),
        ('"fox brown"', False),
        ("cat OR fox", True),
        ("fox -lazy", False),
        ("fox -cat", True),
        ("jum*", True),
        ('"quick bro"*', True),
        ("東京", True),
        ("京都", True),
        ("大阪", False),
        ("都", True),
        ("parse_query", True),
    ],
)
def test_the_in_memory_matcher(q: str, found: bool) -> None:
    text = "The Quick brown fox jumps over the lazy dog in 東京都; see parse_query()."
    assert Matcher(parse(q)).matches(text) is found


def test_tokens_and_the_tsvector_literal() -> None:
    tokens = tokenize("Hello, hello 東京都 Café x" + "y" * 100)
    assert tokens.terms == ["hello", "hello", "東京", "京都", "café"]
    assert tokens.grams == ["東", "京", "都"]
    assert tokens.tsvector() == "'hello':1,2 '東京':3 '京都':4 'café':5 '東' '京' '都'"


@settings(max_examples=300)
@given(st.text(max_size=200) | st.text("aZ09 ,_-é東京ไทยx" + "y" * 70, max_size=200))
def test_tokens_are_the_word_runs_tokens(text: str) -> None:
    """Text without unspaced scripts takes a shortcut past the runs: the same tokens."""
    assert tokenize(text) == tokens_of(runs(text))


def test_snippets_mark_what_matched() -> None:
    body = "intro " * 30 + "the Parser failed\non 東京都 input " + "tail " * 60
    text = snippet(body, parse("pars* 東京"))
    assert text.startswith("…") and text.endswith("…")
    assert "<mark>Parser</mark> failed on <mark>東京</mark>都" in text
    assert snippet("short text", parse("absent")) == "short text"
