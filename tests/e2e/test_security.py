"""Hardening through a real uvicorn (docs/security.md): revocation races, bounded requests and
connections, secrets kept out of logs and agents, and strict validation of client input."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any
from unittest.mock import patch

import anyio
import httpx
import pytest

from tests.conftest import LiveServer, OpenStream, ServerFactory


class _Recording(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _problem(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = resp.json()
    assert body["code"] == code and body["status"] == status
    return body


class HeldWriter:
    """The store's single writer, occupied until `release` is set; `queued` names the function
    of every write submitted meanwhile (the server's own periodic writes, e.g. its first
    sweep, may queue there too, so a test waits for the writes it made by name)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.queued: list[str] = []

    async def queued_write(self, name: str) -> None:
        """Wait until a write made in a function called `name` waits behind the writer."""
        with anyio.fail_after(10):
            while not any(name in queued for queued in self.queued):  # noqa: ASYNC110
                await anyio.sleep(0.01)


@contextmanager
def writer_held(live: LiveServer) -> Iterator[HeldWriter]:
    """Occupy the store's single writer until the yielded writer's `release` is set (or
    10 s pass)."""
    store = live.services.store
    writer = HeldWriter()
    held = asyncio.run_coroutine_threadsafe(
        store.write(lambda _uow: writer.release.wait(10)), live.loop
    )
    submit = store.submit

    def recording(fn: Callable[..., Any], **options: Any) -> Any:
        writer.queued.append(fn.__qualname__)
        return submit(fn, **options)

    try:
        with patch.object(store, "submit", recording):
            yield writer
    finally:
        writer.release.set()
        held.result(15)


# -- 6: revocation -------------------------------------------------------------------------------


async def test_revoke_closes_a_stream_that_subscribes_after_the_revocation(
    servers: ServerFactory, open_stream: OpenStream
):
    """A stream authenticated before DELETE /v1/devices/{id} but subscribed after it ends."""
    live = servers.start()
    phone = live.pair("phone")
    async with httpx.AsyncClient(base_url=live.base_url) as client:
        ticket = (
            await client.post(
                "/v1/stream-tickets", headers={"Authorization": f"Bearer {phone.bearer}"}
            )
        ).json()["ticket"]
        assert (await client.get("/v1/devices", headers=live.headers)).status_code == 200
        with writer_held(live) as writer:
            # The ticket's redemption queues first, the revocation after it: both commit in
            # one batch, so the stream authenticates and subscribes only after the revocation.
            opening = asyncio.create_task(
                open_stream(live, headers={}, params={"ticket": ticket}, expect=200)
            )
            await writer.queued_write("redeem_ticket")
            revoking = asyncio.create_task(
                client.delete(f"/v1/devices/{phone.device_id}", headers=live.headers)
            )
            await writer.queued_write("revoke")
            writer.release.set()
            assert (await revoking).status_code == 204
        stream = await opening
        with anyio.fail_after(10):
            while (frame := await stream.next()) is not None:
                assert frame.kind in ("sessions", "event")
        assert live.services.bus.subscriber_count == 0


# -- 7: hostile repositories ---------------------------------------------------------------------


def test_skills_of_a_hostile_project_are_listed_safely(live_server: LiveServer, tmp_path):
    """A project whose skills are /dev/zero, a FIFO and an escaping symlink lists only its
    good skill, promptly, and the server keeps answering."""
    skills = tmp_path / "project" / ".agents" / "skills"
    for name in ("zero", "pipe", "escape", "good"):
        (skills / name).mkdir(parents=True)
    (skills / "zero" / "SKILL.md").symlink_to("/dev/zero")
    os.mkfifo(skills / "pipe" / "SKILL.md")
    secret = tmp_path / "secret.md"
    secret.write_text("---\nname: secret\n---\nleaked", encoding="utf-8")
    (skills / "escape" / "SKILL.md").symlink_to(secret)
    (skills / "good" / "SKILL.md").write_text("---\nname: Good\n---\nbody", encoding="utf-8")
    with httpx.Client(base_url=live_server.base_url, headers=live_server.headers) as client:
        for _ in range(3):  # a FIFO would pin one worker thread per request
            listed = client.get("/v1/skills", params={"cwd": str(tmp_path / "project")})
            assert listed.status_code == 200
            assert [s["id"] for s in listed.json()] == ["good"]
        assert client.get("/healthz").status_code == 200


# -- 8: bounded requests -------------------------------------------------------------------------


def test_body_of_an_unauthenticated_request_is_never_read(servers: ServerFactory):
    """A request without a valid bearer is answered 401 before its body is read."""
    live = servers.start()
    with httpx.Client(base_url=live.base_url) as client:
        sent: list[int] = []

        def body() -> Iterator[bytes]:
            for _ in range(64):
                sent.append(1)
                yield b"x" * 65536

        resp = client.post(
            "/v1/sessions", content=body(), headers={"Content-Type": "application/json"}
        )
        _problem(resp, 401, "unauthorized")
        garbage = client.post(
            "/v1/ops", content=b"{" * 4096, headers={"Authorization": "Bearer nope"}
        )
        _problem(garbage, 401, "unauthorized")


def test_body_over_the_limit_is_413_declared_or_streamed(servers: ServerFactory):
    """Bodies above max_body_bytes are 413 payload_too_large, by length or as they arrive."""
    live = servers.start(max_body_bytes=4096)
    big = json.dumps({"doc": [{"type": "text", "text": "x" * 5000}]}).encode()
    with httpx.Client(base_url=live.base_url, headers=live.headers) as client:
        _problem(client.post("/v1/sessions/s/prompt", content=big), 413, "payload_too_large")

        def chunked() -> Iterator[bytes]:
            for i in range(0, len(big), 1000):
                yield big[i : i + 1000]

        _problem(client.post("/v1/sessions/s/prompt", content=chunked()), 413, "payload_too_large")
        small = client.post("/v1/sessions/s/prompt", json={"doc": [{"type": "text", "text": "hi"}]})
        _problem(small, 404, "no_such_session")  # under the limit the request goes through


def test_prompt_document_size_is_bounded(servers: ServerFactory):
    """A document whose text exceeds the prompt budget is a 422, even under the body limit."""
    live = servers.start(max_body_bytes=8 * 1024 * 1024)
    doc = [{"type": "text", "text": "y" * 900_000} for _ in range(3)]
    with httpx.Client(base_url=live.base_url, headers=live.headers, timeout=30) as client:
        for path in ("/v1/sessions/s/prompt", "/v1/sessions/s/prompt-preview"):
            _problem(client.post(path, json={"doc": doc}), 422, "validation_error")
        wire = client.post("/v1/ops", json={"op": "prompt", "session": "s", "doc": doc})
        _problem(wire, 422, "validation_error")


# -- 9: bounded connections ----------------------------------------------------------------------


def test_connection_without_a_request_head_is_closed(servers: ServerFactory):
    """A connection that never completes its request head is closed after the header timeout."""
    live = servers.start(header_timeout_seconds=0.5)
    host, port = live.server.bound
    with closing(socket.create_connection((host, port), timeout=10)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")  # never finished
        assert sock.recv(1024) == b""  # closed by the server (a hang fails on the timeout)
    with closing(socket.create_connection((host, port), timeout=10)) as idle:
        assert idle.recv(1024) == b""  # silent from the start: closed too


def test_connections_past_the_limit_get_503(servers: ServerFactory):
    """Past max_connections, a new request is refused with 503 instead of exhausting fds."""
    live = servers.start(max_connections=8, header_timeout_seconds=30)
    host, port = live.server.bound
    idle = [socket.create_connection((host, port), timeout=10) for _ in range(8)]
    try:
        with httpx.Client(base_url=live.base_url) as client:
            assert client.get("/healthz").status_code == 503
    finally:
        for sock in idle:
            sock.close()


def test_fd_soft_limit_is_raised_to_the_hard_limit(servers: ServerFactory):
    """Starting a server raises RLIMIT_NOFILE's soft limit to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, 512)
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        servers.start()
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_failed_authentications_are_rate_limited_per_address(servers: ServerFactory):
    """Past the failure budget an address gets 429 + Retry-After; a bearer verified before
    still works, one never seen waits like any other credential."""
    live = servers.start(auth_failures_per_minute=3)
    unseen = live.pair("unseen")
    with httpx.Client(base_url=live.base_url) as client:
        assert client.get("/v1/sessions", headers=live.headers).status_code == 200
        for _ in range(3):
            _problem(
                client.get("/v1/sessions", headers={"Authorization": "Bearer bad"}),
                401,
                "unauthorized",
            )
        limited = client.get("/v1/sessions", headers={"Authorization": "Bearer bad"})
        _problem(limited, 429, "rate_limited")
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert client.get("/v1/sessions", headers=live.headers).status_code == 200
        fresh = client.get("/v1/sessions", headers={"Authorization": f"Bearer {unseen.bearer}"})
        _problem(fresh, 429, "rate_limited")


def test_failed_authentications_are_rate_limited_globally(servers: ServerFactory):
    """The global failure budget holds whatever the per-address budget allows."""
    live = servers.start(auth_failures_per_minute=1000, auth_failures_per_minute_total=2)
    with httpx.Client(base_url=live.base_url) as client:
        bad = {"Authorization": "Bearer bad"}
        statuses = [client.get("/v1/devices", headers=bad).status_code for _ in range(3)]
    assert statuses == [401, 401, 429]


async def test_streams_per_device_are_capped(servers: ServerFactory, open_stream: OpenStream):
    """A device holds at most max_streams_per_device streams; the next is a 429 problem."""
    live = servers.start(max_streams_per_device=2)
    streams = [await open_stream(live) for _ in range(2)]  # referenced: they stay open
    for stream in streams:
        assert (await stream.next()) is not None
    async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers) as client:
        _problem(await client.get("/v1/events"), 429, "too_many_streams")
    other = live.pair("other")
    stream = await open_stream(live, headers={"Authorization": f"Bearer {other.bearer}"})
    assert (await stream.next()) is not None  # the cap is per device


def test_repeated_errors_are_logged_once_per_interval(servers: ServerFactory):
    """Fifty malformed requests leave one warning line, not fifty."""
    live = servers.start()
    records: list[logging.LogRecord] = []
    handler = _Recording(records)
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        host, port = live.server.bound
        for _ in range(50):
            with closing(socket.create_connection((host, port), timeout=10)) as sock:
                sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                while sock.recv(4096):
                    pass
    finally:
        logger.removeHandler(handler)
    invalid = [r for r in records if "Invalid HTTP request" in r.getMessage()]
    assert len(invalid) == 1


# -- 10: secrets ---------------------------------------------------------------------------------


def test_ticket_presented_on_a_failing_request_is_spent(live_server: LiveServer):
    """A ticket sent with a request that fails validation cannot be redeemed afterwards."""
    with httpx.Client(base_url=live_server.base_url) as client:
        ticket = client.post("/v1/stream-tickets", headers=live_server.headers).json()["ticket"]
        first = client.get("/v1/events", params={"ticket": ticket, "after": "-1"})
        _problem(first, 422, "validation_error")
        again = client.get("/v1/events", params={"ticket": ticket})
        _problem(again, 401, "invalid_ticket")


@contextmanager
def access_log_lines(live: LiveServer) -> Iterator[list[str]]:
    """The server's access log turned on; the lines it wrote in the block (filled on exit)."""
    records: list[logging.LogRecord] = []
    handler = _Recording(records)
    logger = logging.getLogger("uvicorn.access")
    live.server.config.access_log = True
    for protocol in list(live.server.server_state.connections):
        protocol.access_log = True  # type: ignore[union-attr]  # HTTP connections only, here
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    lines: list[str] = []
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        lines.extend(r.getMessage() for r in records)


def test_access_log_redacts_credentials(servers: ServerFactory):
    """The access log line of `?ticket=` shows the parameter, never the ticket itself."""
    live = servers.start()
    with access_log_lines(live) as lines, httpx.Client(base_url=live.base_url) as client:
        ticket = client.post("/v1/stream-tickets", headers=live.headers).json()["ticket"]
        client.get("/v1/sessions", params={"ticket": ticket, "x": "1"}, headers=live.headers)
    assert any("/v1/sessions?ticket=" in line for line in lines), lines
    assert not any(ticket in line for line in lines)


def test_responses_carrying_secrets_are_not_cached(live_server: LiveServer):
    """Pairing and ticket responses (and every /v1 answer) say Cache-Control: no-store."""
    token = live_server.call(live_server.services.auth.mint_pairing_token)
    with httpx.Client(base_url=live_server.base_url) as client:
        paired = client.post("/v1/pair", json={"token": token})
        assert paired.status_code == 200 and paired.headers["cache-control"] == "no-store"
        ticket = client.post("/v1/stream-tickets", headers=live_server.headers)
        assert ticket.headers["cache-control"] == "no-store"
        assert client.get("/v1/sessions").headers["cache-control"] == "no-store"


def test_html_responses_carry_security_headers(live_server: LiveServer):
    """The pairing page is sent with CSP, nosniff, no-referrer and frame denial."""
    with httpx.Client(base_url=live_server.base_url) as client:
        page = client.get("/pair")
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert "unsafe-inline" not in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["x-frame-options"] == "DENY"


def test_wildcard_origin_is_refused_at_start(servers: ServerFactory):
    """`--allow-origin '*'` stops the start with a clear error."""
    with pytest.raises(ValueError, match="allow-origin"):
        servers.start(allow_origins=("*",))


def test_any_host_is_never_reflected_into_a_redirect(servers: ServerFactory):
    """Under `--allow-host '*'` no response sends the client to the Host it named."""
    live = servers.start(allow_hosts=("*",))
    with httpx.Client(base_url=live.base_url, headers=live.headers) as client:
        for path in ("/v1/sessions/", "/healthz/", "/pair/"):
            resp = client.get(path, headers={"Host": "evil.example"})
            assert "location" not in resp.headers, (path, resp.status_code)
            assert resp.status_code == 404


# -- 11: small ones ------------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [" lead", "trail ", "tab\tinside", "nl\n", "\x7f"])
def test_request_id_that_cannot_be_echoed_is_a_422(live_server: LiveServer, request_id: str):
    """A request_id with edge whitespace or control characters is refused, and answered."""
    with httpx.Client(base_url=live_server.base_url, headers=live_server.headers) as client:
        resp = client.put(
            "/v1/sessions/s/execution-policy",
            json={"mode": "yolo", "sandbox": "read_only", "request_id": request_id},
        )
        _problem(resp, 422, "validation_error")
        ok = client.put(
            "/v1/sessions/s/execution-policy",
            json={"mode": "yolo", "sandbox": "read_only", "request_id": "inner space ok é"},
        )
        _problem(ok, 404, "no_such_session")
        assert ok.headers["request-id"] == "inner space ok %C3%A9"


def test_skills_cwd_must_be_an_existing_folder(live_server: LiveServer, tmp_path):
    """A NUL byte or a missing folder in ?cwd= is 422 invalid_cwd, not a 500 or []."""
    with httpx.Client(base_url=live_server.base_url, headers=live_server.headers) as client:
        _problem(client.get("/v1/skills", params={"cwd": "a\x00b"}), 422, "invalid_cwd")
        missing = client.get("/v1/skills", params={"cwd": str(tmp_path / "gone")})
        _problem(missing, 422, "invalid_cwd")
        assert client.get("/v1/skills", params={"cwd": str(tmp_path)}).json() == []


def test_pairing_limiter_counts_only_failures(servers: ServerFactory):
    """Successful pairings never use up the failure budget."""
    live = servers.start(pair_attempts_per_minute=2)
    with httpx.Client(base_url=live.base_url) as client:
        for _ in range(4):
            token = live.call(live.services.auth.mint_pairing_token)
            assert client.post("/v1/pair", json={"token": token}).status_code == 200


@pytest.mark.parametrize("value", ["yes", "true", 1, "1", None])
def test_op_booleans_are_strict(live_server: LiveServer, tmp_path, value: Any):
    """`use_worktree` must be a JSON boolean: a string or a number is a 422, never coerced."""
    body = {"provider": {"custom": "echo"}, "cwd": str(tmp_path), "use_worktree": value}
    with httpx.Client(base_url=live_server.base_url, headers=live_server.headers) as client:
        _problem(client.post("/v1/sessions", json=body), 422, "validation_error")
        _problem(
            client.post("/v1/ops", json={"op": "new_session", **body}), 422, "validation_error"
        )


async def test_deleted_session_is_404_and_announced(
    live_server: LiveServer, open_stream: OpenStream, tmp_path
):
    """DELETE emits `session_deleted` to every stream; the snapshot then reads 404."""
    body = {"provider": {"custom": "echo"}, "cwd": str(tmp_path), "use_worktree": False}
    async with httpx.AsyncClient(
        base_url=live_server.base_url, headers=live_server.headers, timeout=30
    ) as c:
        created = await c.post("/v1/sessions", json=body)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        stream = await open_stream(live_server)
        assert (await stream.next()) is not None  # the welcome frame
        assert (await c.delete(f"/v1/sessions/{sid}")).status_code == 204
        with anyio.fail_after(10):
            while True:
                frame = await stream.next()
                assert frame is not None
                if frame.data["event"]["event"] == "session_deleted":
                    break
        assert frame.data["event"] == {"event": "session_deleted", "session": sid}
        _problem(await c.get(f"/v1/sessions/{sid}"), 404, "no_such_session")
        assert (await c.get(f"/v1/sessions/{sid}/transcript")).status_code == 200
