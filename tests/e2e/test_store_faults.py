"""Database trouble on SQLite through a real `c2 serve`: one server per home, a locked or
failing database during a turn, start-up on an unusable home, home permissions (issue 16)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.e2e.harness import REPO, C2Process, Client, EventReader
from tests.ports import free_port

LOCK_SECONDS = 10.0


def serve_once(
    home: Path, env: dict[str, str] | None = None, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run `c2 serve` (with `args`) expecting it to refuse to start; its exit code and output.
    Only `env` chooses the database and clustering, never this process's environment."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if k not in ("C2_DATABASE_URL", "C2_CLUSTER")}
    full_env.update({"PYTHONPATH": str(REPO), **(env or {})})
    return subprocess.run(
        [
            *(sys.executable, "-m", "c2.api.cli", "serve", "--home", str(home)),
            *("--port", str(port), *args),
        ],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def exclusive_lock(db: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holding SQLite's write lock on `db` until the block ends."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=10)
    conn.execute("BEGIN EXCLUSIVE")
    try:
        yield conn
    finally:
        conn.execute("ROLLBACK")
        conn.close()


async def ready_status(server: C2Process) -> int:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as http:
        return (await http.get("/readyz")).status_code


async def wait_ready_status(server: C2Process, status: int, timeout: float = 15.0) -> None:
    with anyio.fail_after(timeout):
        while await ready_status(server) != status:  # noqa: ASYNC110 - another process's state
            await anyio.sleep(0.1)


async def transcript(client: Client, sid: str) -> list[dict[str, Any]]:
    resp = await client.http.get(f"/v1/sessions/{sid}/transcript", params={"limit": 50})
    assert resp.status_code == 200, resp.text
    entries: list[dict[str, Any]] = resp.json()["entries"]
    return entries


def row_seqs(entries: list[dict[str, Any]]) -> list[int]:
    """The stored rows a page's entries hold (a merged message holds seq..last_seq)."""
    return [n for e in entries for n in range(e["seq"], e["last_seq"] + 1)]


def seen_seqs(stream: EventReader, sid: str) -> list[int]:
    return [
        e["transcript_seq"]
        for e in stream.events
        if e.get("session") == sid and e.get("transcript_seq") is not None
    ]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[C2Process]:
    c2 = C2Process(tmp_path / "home")
    c2.start()
    yield c2
    c2.stop()


def test_serve_second_server_on_the_same_home_refuses_to_start(server: C2Process) -> None:
    """A second `c2 serve` on a served home exits at once with one line naming the owner."""
    assert server.proc is not None
    second = serve_once(server.home)
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert "another c2 serve owns home" in lines[0]
    assert f"pid {server.proc.pid} on {socket.gethostname()[:20]} since " in lines[0]
    assert "c2 listening" not in second.stdout


def test_serve_tightens_an_existing_home_and_its_database(tmp_path: Path) -> None:
    """A home made beforehand (0755, c2.db 0644) is 0700 with 0600 database files once served."""
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "c2.db").touch()
    (home / "c2.db").chmod(0o644)
    c2 = C2Process(home)
    c2.start()
    try:
        assert mode(home) == 0o700
        files = [home / n for n in ("c2.db", "c2.db-wal", "c2.db-shm", "c2.lock")]
        assert mode(home / "c2.db") == 0o600
        assert all(mode(f) == 0o600 for f in files if f.exists())
    finally:
        c2.stop()
    fresh = tmp_path / "fresh"
    c2 = C2Process(fresh)  # the harness creates the folder with the umask's mode
    c2.start()
    try:
        assert mode(fresh) == 0o700 and mode(fresh / "c2.db") == 0o600
    finally:
        c2.stop()


def test_serve_on_an_unwritable_home_fails_with_one_line(tmp_path: Path) -> None:
    """A home that cannot be written (immutable, so even root cannot) gives one clear line."""
    home = tmp_path / "home"
    home.mkdir()
    if subprocess.run(["chattr", "+i", str(home)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        result = serve_once(home)
    finally:
        subprocess.run(["chattr", "-i", str(home)], check=True)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"c2: cannot use home {home}: ")
    assert "Traceback" not in result.stderr


async def test_sqlite_lock_held_during_a_turn_loses_nothing(
    server: C2Process, tmp_path: Path
) -> None:
    """A write lock held elsewhere for 10 s mid-turn: /readyz is 503 meanwhile, then every
    chunk is committed and seen once, in order, the turn ends normally, c2 serves on."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    client = Client(server)
    try:
        sid = (await client.new_session(workdir))["id"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            assert (await client.prompt(sid, "/stamped 150 10")).status_code == 202
            await stream.until(lambda e: e["event"] == "agent_text" and e["transcript_seq"] >= 5)
            with exclusive_lock(server.home / "c2.db"):
                held = time.monotonic()
                await wait_ready_status(server, 503)
                await anyio.sleep(max(0.0, LOCK_SECONDS - (time.monotonic() - held)))
            await wait_ready_status(server, 200)
            ended = await stream.until_event("turn_ended", timeout=60)
            assert ended["stop_reason"] == "end_turn"
        rows = [e for e in await transcript(client, sid) if e["role"] == "agent"]
        assert row_seqs(rows) == list(range(1, 151))
        assert seen_seqs(stream, sid) == [0, *range(1, 151)]
        async with EventReader(client, session=sid) as again:
            await again.frame()
            assert (await client.prompt(sid, "/text still here")).status_code == 202
            await again.until_event("turn_ended")
    finally:
        await client.aclose()


async def test_sqlite_lock_outlasting_the_retry_fails_the_turn(tmp_path: Path) -> None:
    """Updates that cannot be committed in time end the turn failed with a terminal error
    naming the cause; no seq is seen twice; the store recovers without a restart."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    server = C2Process(tmp_path / "home", env={"C2_STORE_RETRY_SECONDS": "1"})
    server.start()
    client = Client(server)
    try:
        sid = (await client.new_session(workdir))["id"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            assert (await client.prompt(sid, "/stamped 60 20")).status_code == 202
            await stream.until(lambda e: e["event"] == "agent_text")
            with exclusive_lock(server.home / "c2.db"):
                await wait_ready_status(server, 503)
                await anyio.sleep(4.0)  # the fault: longer than the 1 s a write may wait
            error = await stream.until_event("error", timeout=30)
            activity = [e for e in stream.events if e["event"] == "session_activity_changed"]
            await wait_ready_status(server, 200)
            assert error["terminal"] is True
            assert "could not be saved" in error["message"]
            assert "database is locked" in error["message"]
            assert activity[-1]["activity"]["state"]["kind"] == "failed"
            assert activity[-1]["activity"]["state"]["reason"] == "provider_error"
            assert "turn_ended" not in stream.names(sid)
            accepted = await client.prompt(sid, "/text after recovery")
            assert accepted.status_code == 202, accepted.text
            await stream.until_event("turn_ended")
        seqs = seen_seqs(stream, sid)
        assert seqs == sorted(set(seqs))  # strictly increasing: no seq handed out twice
        rows = await transcript(client, sid)
        assert row_seqs(rows) == seqs  # everything seen is stored, nothing more
        assert rows[-1]["part"]["text"] == "after recovery"
    finally:
        await client.aclose()
        server.stop()


async def test_failed_update_write_ends_the_turn_and_its_seq_is_never_reused(
    server: C2Process, tmp_path: Path
) -> None:
    """An update the database rejects fails the turn with a terminal error; the next row
    does not take the rejected row's seq."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    with contextlib.closing(sqlite3.connect(server.home / "c2.db", timeout=10)) as db:
        db.execute(
            "CREATE TRIGGER test_poison BEFORE INSERT ON parts "
            "WHEN NEW.part_json LIKE '%chunk-1 %' "
            "BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END"
        )
    client = Client(server)
    try:
        sid = (await client.new_session(workdir))["id"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            await client.prompt(sid, "/chunks 3")
            error = await stream.until_event("error", timeout=30)
            assert error["terminal"] is True
            assert "simulated write failure" in error["message"]
            texts = [e for e in stream.events if e["event"] == "agent_text"]
            await client.prompt(sid, "/text next")
            started = await stream.until_event("turn_started")
        # The prompt is seq 0, "chunk-0 " 1; the rejected "chunk-1 " took 2 and keeps it.
        assert [(e["text"], e["transcript_seq"]) for e in texts][:1] == [("chunk-0 ", 1)]
        assert all(e["text"] != "chunk-1 " and e["transcript_seq"] != 2 for e in texts)
        assert started["transcript_seq"] > max(2, *(e["transcript_seq"] for e in texts))
        rows = await transcript(client, sid)
        assert 2 not in row_seqs(rows)
    finally:
        await client.aclose()


async def test_a_chunk_json_cannot_carry_fails_the_turn_and_keeps_the_chunks_before_it(
    server: C2Process, tmp_path: Path
) -> None:
    """A chunk whose text holds a lone surrogate (an agent's JSON may escape one; UTF-8
    cannot carry it) is not stored: the turn fails with a terminal error naming the cause,
    and the chunks read with it, before it, are kept."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    bad = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "bad \ud800"},
    }
    client = Client(server)
    try:
        sid = (await client.new_session(workdir))["id"]
        async with EventReader(client, session=sid) as stream:
            await stream.frame()
            # json.dumps escapes the surrogate: the agent's /raw reads it back into its text.
            await client.prompt(sid, f"/chunks 2\n/raw {json.dumps(bad)}")
            error = await stream.until_event("error", timeout=30)
            assert error["terminal"] is True
            assert "could not be saved (1 update(s) lost)" in error["message"]
            assert "surrogates not allowed" in error["message"]
            activity = [e for e in stream.events if e["event"] == "session_activity_changed"]
            assert activity[-1]["activity"]["state"]["kind"] == "failed"
        rows = await transcript(client, sid)
        assert [r["part"]["text"] for r in rows[1:]] == ["chunk-0 chunk-1 "]
        assert row_seqs(rows) == [0, 1, 2]
    finally:
        await client.aclose()


@contextlib.contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (needs root; skips otherwise)."""
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(disk: Path) -> Path:
    """Write a file until `disk` is full; returns it (delete it to free the space)."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    return filler


def test_serve_on_a_full_home_fails_with_one_line(tmp_path: Path) -> None:
    """A home on a full disk gives one clear line, not a traceback."""
    with small_disk(tmp_path / "disk", "256k") as disk:
        home = disk / "home"
        home.mkdir()
        fill(disk)
        result = serve_once(home)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("c2: ") and "No space left on device" in lines[0]


async def test_full_disk_during_a_turn_loses_nothing(tmp_path: Path) -> None:
    """The home's disk full for a few seconds mid-turn: /readyz is 503 meanwhile, then every
    chunk is committed and seen once, and the turn ends normally once space is back."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    with small_disk(tmp_path / "disk", "16m") as disk:
        server = C2Process(disk / "home")
        server.start()
        client = Client(server)
        try:
            sid = (await client.new_session(workdir))["id"]
            async with EventReader(client, session=sid) as stream:
                await stream.frame()
                assert (await client.prompt(sid, "/stamped 150 15")).status_code == 202
                await stream.until(
                    lambda e: e["event"] == "agent_text" and e["transcript_seq"] >= 5
                )
                filler = fill(disk)
                await wait_ready_status(server, 503)
                await anyio.sleep(3.0)  # the fault: a full disk for a while
                filler.unlink()
                await wait_ready_status(server, 200)
                ended = await stream.until_event("turn_ended", timeout=60)
                assert ended["stop_reason"] == "end_turn"
            rows = [e for e in await transcript(client, sid) if e["role"] == "agent"]
            assert row_seqs(rows) == list(range(1, 151))
            assert seen_seqs(stream, sid) == list(range(151))
        finally:
            await client.aclose()
            server.stop()
