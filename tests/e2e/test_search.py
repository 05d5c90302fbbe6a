"""Search across sessions through a real server and the scripted agent, on SQLite and on
PostgreSQL (the latter skipped without C2_TEST_DATABASE_URL): the query syntax, CJK, a word
split across two streamed chunks, a message still streaming, each hit's transcript page,
title hits, the session filter, cursor paging and the 422s (issue 15, part 1)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Client, EventReader


def _word() -> str:
    """A word no other test writes (letters only, so it is one token)."""
    return "w" + "".join(chr(ord("a") + int(c, 16) % 26) for c in uuid.uuid4().hex[:12])


async def _turn(client: Client, sid: str, script: str) -> None:
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        resp = await client.prompt(sid, script)
        assert resp.status_code == 202, resp.text
        await stream.until_event("turn_ended")


async def _search(client: Client, **params: Any) -> dict[str, Any]:
    resp = await client.http.get("/v1/search", params=params)
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    assert data["kind"] == "search"
    return data


async def _kinds(client: Client, q: str, sid: str) -> list[str]:
    """Kinds of the agent's hits (the scripts are prompts, the first prompt the title)."""
    hits = (await _search(client, q=q, session=sid))["hits"]
    return [h["kind"] for h in hits if h["kind"] not in ("prompt", "title")]


async def test_query_syntax(store_client: Client, workdir: Path) -> None:
    """Words, "phrase", OR, -word and prefix* mean the same on both stores."""
    sid = (await store_client.new_session(workdir))["id"]
    a, b, c = _word(), _word(), _word()
    await _turn(store_client, sid, f"/text Intro {a} {b} and then {c}.")
    assert await _kinds(store_client, a, sid) == ["text"]
    assert await _kinds(store_client, f"{c} {a}", sid) == ["text"]
    assert await _kinds(store_client, f'"{a} {b}"', sid) == ["text"]
    assert await _kinds(store_client, f'"{b} {a}"', sid) == []
    assert await _kinds(store_client, f"{_word()} OR {c}", sid) == ["text"]
    assert await _kinds(store_client, f"{_word()} {c}", sid) == []
    assert await _kinds(store_client, f"{a} -{b}", sid) == []
    assert await _kinds(store_client, f'{a} -"{c} {b}"', sid) == ["text"]
    assert await _kinds(store_client, f"{a[:6]}*", sid) == ["text"]
    assert await _kinds(store_client, a[:6], sid) == []
    hit = (await _search(store_client, q=f"{a}", session=sid))["hits"][0]
    assert f"<mark>{a}</mark>" in hit["snippet"]
    # The prompt is indexed too (its own words, as typed).
    hits = (await _search(store_client, q=f'"text intro {a}"', session=sid))["hits"]
    assert "prompt" in [h["kind"] for h in hits]


async def test_thoughts_and_a_word_split_across_chunks(store_client: Client, workdir: Path) -> None:
    sid = (await store_client.new_session(workdir))["id"]
    word, thought = _word(), _word()
    await _turn(
        store_client, sid, f"/think considering {thought}\n/text say {word[:5]}\n/text {word[5:]}!"
    )
    assert await _kinds(store_client, thought, sid) == ["thought"]
    hits = (await _search(store_client, q=word, session=sid))["hits"]
    assert [h["kind"] for h in hits] == ["text"]
    assert f"<mark>{word}</mark>" in hits[0]["snippet"]


async def test_cjk_text_is_found_with_two_character_queries(
    store_client: Client, workdir: Path
) -> None:
    sid = (await store_client.new_session(workdir))["id"]
    await _turn(
        store_client,
        sid,
        "/text 我们明天去东京都参观，然后吃寿司。\n/tool t1 read completed 読み込み",
    )
    for q in ("东京", "东京都参观", "寿司", "吃", '"明天去"'):
        assert await _kinds(store_client, q, sid) == ["text"], q
    assert await _kinds(store_client, "京都大学", sid) == []
    assert await _kinds(store_client, "読み", sid) == ["tool_call"]
    hit = (await _search(store_client, q="东京", session=sid))["hits"][0]
    assert "<mark>东京</mark>" in hit["snippet"]


async def _page(client: Client, sid: str, before: int | None) -> list[dict[str, Any]]:
    params = {} if before is None else {"before": before}
    resp = await client.http.get(f"/v1/sessions/{sid}/transcript", params=params)
    assert resp.status_code == 200, resp.text
    entries: list[dict[str, Any]] = resp.json()["entries"]
    return entries


async def test_each_hit_opens_the_page_that_holds_it(store_client: Client, workdir: Path) -> None:
    sid = (await store_client.new_session(workdir))["id"]
    old, tool, new = _word(), _word(), _word()
    await _turn(store_client, sid, f"/text first {old}")
    await _turn(
        store_client,
        sid,
        f"/tool c1 execute pending Run {tool}\n/tool c1 execute in_progress Run {tool}\n"
        "/tool c1 execute completed\n/text done",
    )
    for _ in range(21):  # more turns than one page holds
        await _turn(store_client, sid, "/text filler")
    await _turn(store_client, sid, f"/text last {new}")
    shown_kind = {"prompt": "prompt", "text": "text", "tool_call": "tool_call"}
    for q, kind in ((old, "text"), (tool, "tool_call"), (new, "text")):
        hits = (await _search(store_client, q=q, session=sid))["hits"]
        assert kind in [h["kind"] for h in hits], q
        for hit in hits:
            if hit["kind"] == "title":
                continue
            shown = {e["seq"]: e for e in await _page(store_client, sid, hit["before"])}
            assert hit["transcript_seq"] in shown, (q, hit)
            assert shown[hit["transcript_seq"]]["part"]["kind"] == shown_kind[hit["kind"]]

    async def agent_hit(q: str) -> dict[str, Any]:
        hits = (await _search(store_client, q=q, session=sid))["hits"]
        return next(h for h in hits if h["kind"] not in ("prompt", "title"))

    assert (await agent_hit(new))["before"] is None
    assert (await agent_hit(old))["before"] is not None
    # The tool call's hit is its terminal row, the one the page keeps after projection.
    hit = await agent_hit(tool)
    row = {e["seq"]: e for e in await _page(store_client, sid, hit["before"])}[
        hit["transcript_seq"]
    ]
    assert row["part"]["status"] == "completed" and tool in row["part"]["title"]


async def test_title_hits_and_the_session_filter(store_client: Client, workdir: Path) -> None:
    word = _word()
    one = (await store_client.new_session(workdir))["id"]
    two = (await store_client.new_session(workdir))["id"]
    await _turn(
        store_client, one, f"Plan the {word} migration"
    )  # the first prompt titles the session
    await _turn(store_client, two, f"/text about {word}")
    hits = (await _search(store_client, q=word))["hits"]
    assert {(h["session"], h["kind"]) for h in hits} == {
        (one, "title"),
        (one, "prompt"),
        (one, "text"),  # the echo
        (two, "title"),
        (two, "prompt"),
        (two, "text"),
    }
    title = next(h for h in hits if h["kind"] == "title")
    assert title["transcript_seq"] is None and title["before"] is None
    only = (await _search(store_client, q=word, session=two))["hits"]
    assert {h["session"] for h in only} == {two} and len(only) == 3
    resp = await store_client.http.get(
        "/v1/search", params={"q": word, "session": "no-such-session"}
    )
    assert resp.status_code == 404 and resp.json()["code"] == "no_such_session"
    # A deleted session's hits are gone with it.
    assert (await store_client.http.delete(f"/v1/sessions/{two}")).status_code in (200, 202, 204)
    assert {h["session"] for h in (await _search(store_client, q=word))["hits"]} == {one}


async def test_cursor_pages_through_every_hit_once(store_client: Client, workdir: Path) -> None:
    word = _word()
    sid = (await store_client.new_session(workdir))["id"]
    for i in range(3):
        await _turn(store_client, sid, f"/text {word} number {i}\n/think {word} thinking {i}")
    seen: list[tuple[str, int | None]] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"q": word, "session": sid, "limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        data = await _search(store_client, **params)
        assert len(data["hits"]) <= 2
        seen += [(h["kind"], h["transcript_seq"]) for h in data["hits"]]
        pages += 1
        cursor = data["next_cursor"]
        if cursor is None:
            break
    # Three prompts, the title (the first prompt), three messages and three thoughts.
    assert pages == 5 and len(seen) == len(set(seen)) == 10
    kinds = sorted(k for k, _ in seen)
    assert kinds == ["prompt"] * 3 + ["text"] * 3 + ["thought"] * 3 + ["title"]


async def test_a_message_is_found_while_it_streams(store_client: Client, workdir: Path) -> None:
    word = _word()
    sid = (await store_client.new_session(workdir))["id"]
    async with EventReader(store_client, session=sid) as stream:
        await stream.frame()
        assert (
            await store_client.prompt(sid, f"/text streaming {word[:4]}\n/text {word[4:]}\n/hang")
        ).status_code == 202
        await stream.until(lambda f: f.get("event") == "agent_text" and f["text"] == word[4:])
        hits = (await _search(store_client, q=f'"streaming {word}"', session=sid))["hits"]
        assert [h["kind"] for h in hits] == ["text"]
        assert (
            await store_client.http.post(f"/v1/sessions/{sid}/cancel", json={})
        ).status_code < 300
        await stream.until_event("turn_ended")
    # Once the turn is over the message is a document: still found, once.
    hits = (await _search(store_client, q=f'"streaming {word}"', session=sid))["hits"]
    assert [h["kind"] for h in hits] == ["text"]


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, "invalid_query"),
        ({"q": "   "}, "invalid_query"),
        ({"q": '"unbalanced'}, "invalid_query"),
        ({"q": "-only -negated"}, "invalid_query"),
        ({"q": "a OR"}, "invalid_query"),
        ({"q": "a OR -b"}, "invalid_query"),
        ({"q": "!!! ..."}, "invalid_query"),
        ({"q": "word", "cursor": "not-a-cursor"}, "invalid_cursor"),
    ],
)
async def test_bad_queries_are_422(store_client: Client, params: dict[str, str], code: str) -> None:
    resp = await store_client.http.get("/v1/search", params=params)
    assert resp.status_code == 422, resp.text
    assert resp.json()["code"] == code
