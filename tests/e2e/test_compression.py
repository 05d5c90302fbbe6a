"""Compressed answers through a real server (api/app.py, GZipMiddleware): a large JSON answer
goes gzipped to a client that accepts it and plain to one that does not; small answers and
the event stream never are."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.harness import Client
from tests.e2e.test_transcript_api import session_with_turns


async def test_a_transcript_page_goes_gzipped_only_to_a_client_that_accepts_it(
    client: Client, workdir: Path
) -> None:
    sid = await session_with_turns(client, workdir, 10)
    url = f"/v1/sessions/{sid}/transcript"
    plain = await client.http.get(url, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "content-encoding" not in plain.headers
    assert len(plain.content) > 2048
    zipped = await client.http.get(url, headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert "accept-encoding" in zipped.headers["vary"].lower()
    assert int(zipped.headers["content-length"]) < len(plain.content) / 2
    assert zipped.json() == plain.json()  # httpx decoded it
    # Coding names are case-insensitive and a weight of 0 refuses one (RFC 9110 §12.5.3).
    for accept, gzipped in (
        ("gzip;q=0", False),
        ("br, gzip; q=0.0", False),
        ("*;q=0", False),
        ("GZIP", True),
        ("*", True),
        ("identity;q=1, gzip;q=0.5", True),
        ("gzip;q=0, *", False),
    ):
        answer = await client.http.get(url, headers={"Accept-Encoding": accept})
        assert ("content-encoding" in answer.headers) == gzipped, accept
        assert "accept-encoding" in answer.headers["vary"].lower(), accept


async def test_small_answers_and_the_event_stream_are_never_compressed(client: Client) -> None:
    health = await client.http.get("/healthz", headers={"Accept-Encoding": "gzip"})
    assert health.status_code == 200 and "content-encoding" not in health.headers
    headers = {"Accept-Encoding": "gzip"}
    async with client.http.stream("GET", "/v1/events", headers=headers) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in stream.headers
        welcome = b""
        async for raw in stream.aiter_raw():  # the bytes as sent, not decoded
            welcome += raw
            if b"\n\n" in welcome:
                break
    assert b'"kind":"sessions"' in welcome.replace(b" ", b"")


async def test_a_gzipped_file_carries_a_weak_etag_of_its_own(client: Client) -> None:
    """The web client's script goes gzipped with a weak ETag, plain with the strong one: two
    representations never share a strong validator (RFC 9110 section 8.8.1)."""
    index = (await client.http.get("/")).text
    script = re.search(r'src="(/assets/[^"]+[.]js)"', index)
    assert script is not None, index
    plain = await client.http.get(script[1], headers={"Accept-Encoding": "identity"})
    zipped = await client.http.get(script[1], headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    strong = plain.headers["etag"]
    assert strong.startswith('"') and zipped.headers["etag"] == f"W/{strong}"
