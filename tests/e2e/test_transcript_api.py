"""Transcript pages, @chat references, skills and prompt preview over HTTP (issue: transcript)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import Client, EventReader


async def run_turn(client: Client, stream: EventReader, sid: str, text: str) -> None:
    resp = await client.prompt(sid, text)
    assert resp.status_code == 202, resp.text
    await stream.until(lambda e: e["event"] in ("turn_ended", "error") and e["session"] == sid)


async def session_with_turns(client: Client, workdir: Path, turns: int) -> str:
    sid: str = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        for i in range(turns):
            await run_turn(
                client, stream, sid, f"TURN_{i:03d}_USER_ONLY\n/text TURN_{i:03d}_AGENT_ONLY"
            )
    return sid


def received_prompts(client: Client, acp_text_marker: str) -> list[str]:
    return [
        e["text"]
        for e in client.server.agent_log_lines()
        if e.get("method") == "session/prompt" and acp_text_marker in e.get("text", "")
    ]


async def test_transcript_pages_stitch_and_reject_bad_cursors(
    client: Client, workdir: Path
) -> None:
    """25 turns page as 20 + 5 with contiguous seqs; bad cursors are transcript_error."""
    sid = await session_with_turns(client, workdir, 25)
    first = (await client.http.get(f"/v1/sessions/{sid}/transcript")).json()
    assert first["kind"] == "transcript" and first["session"] == sid
    users = [e for e in first["entries"] if e["role"] == "user"]
    assert len(users) == 20 and users[0]["part"]["text"].startswith("TURN_005_USER_ONLY")
    older = (
        await client.http.get(
            f"/v1/sessions/{sid}/transcript", params={"before": first["next_before"]}
        )
    ).json()
    assert older["next_before"] is None
    seqs = [e["seq"] for e in older["entries"] + first["entries"]]
    assert seqs == list(range(len(seqs)))
    assert older["snapshot_through"] == first["snapshot_through"] == seqs[-1]
    for before in (-1, 99_999):  # no row of the session
        resp = await client.http.get(
            f"/v1/sessions/{sid}/transcript", params={"before": before, "request_id": "pg-1"}
        )
        assert resp.status_code == 400
        body = resp.json()
        assert body["kind"] == "transcript_error" and body["request_id"] == "pg-1"
        assert body["session"] == sid
    missing = await client.http.get("/v1/sessions/nope/transcript", params={"request_id": "r"})
    assert missing.status_code == 404 and missing.json()["kind"] == "transcript_error"


async def test_chat_reference_preview_equals_what_the_agent_receives(
    client: Client, workdir: Path
) -> None:
    """A 25-turn @chat: the preview is byte for byte the prompt the agent gets."""
    ref = await session_with_turns(client, workdir, 25)
    sid = (await client.new_session(workdir))["id"]
    doc = [
        {"type": "text", "text": "Summarise PREVIEW_MARKER_1"},
        {"type": "session", "session_id": ref},
    ]
    preview = await client.http.post(f"/v1/sessions/{sid}/prompt-preview", json={"doc": doc})
    assert preview.status_code == 200, preview.text
    compiled = preview.json()
    assert compiled["unresolved"] == []
    text = compiled["prompt"]
    assert "TURN_004_USER_ONLY" not in text and "TURN_005_USER_ONLY" in text
    assert "TURN_024_AGENT_ONLY" in text and "_(earlier messages omitted)_" in text
    assert len(text) <= 16_000 + len("Summarise PREVIEW_MARKER_1\n\n")
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        resp = await client.http.post(f"/v1/sessions/{sid}/prompt", json={"doc": doc})
        assert resp.status_code == 202
        await stream.until_event("turn_ended")
    assert received_prompts(client, "PREVIEW_MARKER_1") == [text]
    # The stored prompt is canonical: the reference is a marker, not the inlined chat.
    page = (await client.http.get(f"/v1/sessions/{sid}/transcript")).json()
    assert page["entries"][0]["part"]["text"] == f"Summarise PREVIEW_MARKER_1\n\n[chat:{ref[:8]}]"


async def test_oversized_latest_turn_keeps_its_tail(client: Client, workdir: Path) -> None:
    """A 24,000-CJK latest turn is cut to its tail within 16,000 scalars, preview == received."""
    ref = (await client.new_session(workdir))["id"]
    async with EventReader(client, session=ref) as stream:
        await stream.frame()
        await run_turn(client, stream, ref, "First question\nOLD_CONTEXT\n/text old answer")
        await run_turn(client, stream, ref, "界" * 24_000 + "LATEST_CONTEXT_END")
    sid = (await client.new_session(workdir))["id"]
    doc = [{"type": "text", "text": "PREVIEW_MARKER_2"}, {"type": "session", "session_id": ref}]
    compiled = (
        await client.http.post(f"/v1/sessions/{sid}/prompt-preview", json={"doc": doc})
    ).json()
    context = compiled["prompt"].split("\n\n", 1)[1]
    assert len(context) <= 16_000 and context.endswith("LATEST_CONTEXT_END")
    assert "_(earlier messages omitted)_" in context and "OLD_CONTEXT" not in context
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.http.post(f"/v1/sessions/{sid}/prompt", json={"doc": doc})
        await stream.until_event("turn_ended")
    assert received_prompts(client, "PREVIEW_MARKER_2") == [compiled["prompt"]]


async def test_unknown_references_warn_after_turn_started(client: Client, workdir: Path) -> None:
    """Unknown skill and chat: non-terminal correlated `unresolved:` errors; the turn runs."""
    sid = (await client.new_session(workdir))["id"]
    doc = [
        {"type": "skill", "skill_id": "no-such-skill", "params": {}},
        {"type": "session", "session_id": "ghost"},
        {"type": "text", "text": "carry on"},
    ]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        resp = await client.http.post(
            f"/v1/sessions/{sid}/prompt", json={"doc": doc, "request_id": "unres"}
        )
        assert resp.status_code == 202
        await stream.until_event("turn_ended")
    names = stream.names()
    errors = [e for e in stream.events if e["event"] == "error"]
    assert names.index("turn_started") < names.index("error")
    assert [e["message"] for e in errors] == [
        "unresolved: no-such-skill",
        "unresolved: session:ghost",
    ]
    assert all(e["terminal"] is False and e["request_id"] == "unres" for e in errors)


async def test_skill_block_compiles_with_params(client: Client, workdir: Path) -> None:
    """A project skill is listed and compiles with block params over its defaults."""
    skill = workdir / ".agents" / "skills" / "commit-msg"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: Commit message\ndescription: Writes one\nparams:\n  scope: core\n"
        "  style: conventional\n---\nWrite a commit message for {{scope}} in {{style}} style."
        " {{unknown}} SKILL_MARKER\n",
        encoding="utf-8",
    )
    listed = (await client.http.get("/v1/skills", params={"cwd": str(workdir)})).json()
    entry = next(s for s in listed if s["id"] == "commit-msg")
    assert entry["params"] == {"scope": "core", "style": "conventional"}
    sid = (await client.new_session(workdir))["id"]
    doc = [{"type": "skill", "skill_id": "commit-msg", "params": {"scope": "auth module"}}]
    async with EventReader(client, session=sid) as stream:
        await stream.frame()
        await client.http.post(f"/v1/sessions/{sid}/prompt", json={"doc": doc})
        await stream.until_event("turn_ended")
    assert received_prompts(client, "SKILL_MARKER") == [
        "Write a commit message for auth module in conventional style. {{unknown}} SKILL_MARKER"
    ]
