"""The first ten minutes of a new user: one clear line instead of a traceback, timestamped
logs, and an agent crash that says why (issue 11). Real `c2` subprocesses and a real agent.
"""

from __future__ import annotations

import logging
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import run_app
from tests.e2e.harness import REPO, poll_until, write_providers

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} ")


def _c2(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "c2.api.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_unusable_home_is_one_line_for_every_command(tmp_path: Path):
    """A home that is a file: serve, pair and pair-url each exit 1 with one line saying so."""
    home = tmp_path / "home"
    home.write_text("not a folder", encoding="utf-8")
    for args in (
        ("serve", "--home", str(home), "--port", "0"),
        ("pair", "--name", "laptop", "--home", str(home)),
        ("pair-url", "--home", str(home)),
    ):
        done = _c2(*args)
        assert done.returncode == 1, (args, done.stderr)
        line = _one_line(done)
        assert line == f"c2: cannot use home {home}: Not a directory", args


def test_taken_port_is_one_line(tmp_path: Path):
    """A port another program listens on: one line naming it and --port, exit 1."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _c2("serve", "--home", str(tmp_path / "home"), "--port", str(port))
    assert done.returncode == 1
    line = _one_line(done)
    assert f"cannot listen on 127.0.0.1:{port}" in line
    assert "already in use" in line and "--port" in line


def test_server_log_lines_carry_timestamps(tmp_path: Path):
    """Every line `c2 serve` logs (uvicorn's, the access log, c2's own) starts with a time."""
    server = subprocess.Popen(
        [sys.executable, "-m", "c2.api.cli", "serve", "--home", str(tmp_path), "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()  # "c2 listening on http://127.0.0.1:PORT"
        assert first.startswith("c2 listening on "), first
        assert httpx.get(first.split()[-1] + "/healthz", timeout=10).status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=30)
    logged = [line for line in (out + err).splitlines() if re.match(r"^\S+ (INFO|WARN)", line)]
    assert any("GET /healthz" in line for line in logged), out
    assert any("Application startup complete" in line for line in logged), err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and all(TIMESTAMP.match(line) for line in lines), err


def _crash_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "exited unexpectedly" in r.getMessage()]


async def test_agent_crash_is_logged_at_warning_with_its_stderr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """An agent that dies on its own is a WARNING naming its exit status and stderr tail."""
    home = tmp_path / "home"
    home.mkdir()
    write_providers(home)
    caplog.set_level(logging.WARNING, logger="c2.core.agents.client")
    async for client in run_app(home):
        body = {"provider": {"custom": "scripted"}, "cwd": str(tmp_path), "use_worktree": False}
        created = await client.http.post("/v1/sessions", json=body)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        doc = [{"type": "text", "text": "/crash out of memory: model weights"}]
        accepted = await client.http.post(f"/v1/sessions/{sid}/prompt", json={"doc": doc})
        assert accepted.status_code == 202, accepted.text
        await poll_until(lambda: bool(_crash_records(caplog)), timeout=15)
    [record] = _crash_records(caplog)
    assert record.levelno == logging.WARNING
    assert "with 3" in record.getMessage()
    assert "out of memory: model weights" in record.getMessage()
