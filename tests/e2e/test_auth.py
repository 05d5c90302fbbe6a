"""Auth through a real uvicorn (docs/api.md §2): bearers, pairing, rate limit, Host, devices,
CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from c2.core.scopes import Scope
from tests.conftest import LiveServer, ServerFactory

REPO = Path(__file__).resolve().parents[2]


def _problem(resp: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = resp.json()
    assert body["code"] == code and body["status"] == status
    assert {"type", "title", "detail"} <= body.keys()
    return body


def test_auth_requires_bearer(live_server: LiveServer):
    """Every /v1 route but pairing answers 401 problem+json with WWW-Authenticate."""
    with httpx.Client(base_url=live_server.base_url) as client:
        for resp in (
            client.get("/v1/sessions"),
            client.get("/v1/devices"),
            client.post("/v1/ops", json={"op": "cancel", "session": "x"}),
            client.get("/v1/sessions", headers={"Authorization": "Bearer not-a-bearer"}),
            client.get("/v1/sessions", headers={"Authorization": "Basic dXNlcjpwdw=="}),
        ):
            _problem(resp, 401, "unauthorized")
            assert resp.headers["www-authenticate"].startswith("Bearer")
        assert client.get("/v1/sessions", headers=live_server.headers).status_code == 200
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json() == {"status": "ready"}


def test_auth_pairing_token_works_once(live_server: LiveServer):
    """A pairing token yields a working bearer once; reuse and garbage are 401."""
    token = live_server.call(live_server.services.auth.mint_pairing_token)
    with httpx.Client(base_url=live_server.base_url) as client:
        resp = client.post("/v1/pair", json={"token": token, "device_name": "laptop"})
        assert resp.status_code == 200, resp.text
        paired = resp.json()
        assert set(paired) == {"device_id", "bearer"}
        assert len(paired["bearer"]) >= 43
        headers = {"Authorization": f"Bearer {paired['bearer']}"}
        assert client.get("/v1/sessions", headers=headers).status_code == 200
        _problem(client.post("/v1/pair", json={"token": token}), 401, "invalid_pairing_token")
        _problem(client.post("/v1/pair", json={"token": "nope"}), 401, "invalid_pairing_token")
        _problem(client.post("/v1/pair", json={}), 422, "validation_error")
        names = {d["name"] for d in client.get("/v1/devices", headers=headers).json()}
    assert names == {"tests", "laptop"}


def test_auth_pairing_token_carries_its_scopes(live_server: LiveServer):
    """A token minted with scopes pairs a device holding exactly those; outside them it is
    403 `insufficient_scope`."""
    scopes = frozenset({Scope.READ, Scope.APPROVE})
    token = live_server.call(lambda: live_server.services.auth.mint_pairing_token(scopes))
    with httpx.Client(base_url=live_server.base_url) as client:
        resp = client.post("/v1/pair", json={"token": token, "device_name": "phone"})
        assert resp.status_code == 200, resp.text
        headers = {"Authorization": f"Bearer {resp.json()['bearer']}"}
        assert client.get("/v1/sessions", headers=headers).status_code == 200
        _problem(client.post("/v1/sessions", headers=headers, json={}), 403, "insufficient_scope")
        listed = client.get("/v1/devices", headers=live_server.headers).json()
    assert {d["name"]: d["scopes"] for d in listed}["phone"] == ["read", "approve"]


def test_auth_pairing_token_expires(servers: ServerFactory):
    """A pairing token past its TTL is refused."""
    live = servers.start(pairing_ttl_seconds=0.2)
    token = live.call(live.services.auth.mint_pairing_token)
    time.sleep(0.4)
    with httpx.Client(base_url=live.base_url) as client:
        _problem(client.post("/v1/pair", json={"token": token}), 401, "invalid_pairing_token")


def test_auth_pairing_is_rate_limited(servers: ServerFactory):
    """Pairing attempts past the per-minute budget are 429 with Retry-After."""
    live = servers.start(pair_attempts_per_minute=3)
    token = live.call(live.services.auth.mint_pairing_token)
    with httpx.Client(base_url=live.base_url) as client:
        for _ in range(3):
            _problem(client.post("/v1/pair", json={"token": "guess"}), 401, "invalid_pairing_token")
        limited = client.post("/v1/pair", json={"token": token})
        _problem(limited, 429, "rate_limited")
        assert 1 <= int(limited.headers["retry-after"]) <= 60


def test_auth_pairing_budget_is_per_client_behind_a_trusted_proxy(servers: ServerFactory):
    """Behind a configured reverse proxy each client (its X-Forwarded-For) has its own pairing
    budget, so one guesser cannot lock everyone out; without one, the header is ignored and
    the peer address is the client (a client cannot pick a fresh budget by naming one)."""
    trusted = servers.start(pair_attempts_per_minute=3, trusted_proxies=("127.0.0.0/8",))
    plain = servers.start(pair_attempts_per_minute=3)
    guesser, other = {"X-Forwarded-For": "203.0.113.5"}, {"X-Forwarded-For": "198.51.100.7"}
    for live, other_limited in ((trusted, False), (plain, True)):
        token = live.call(live.services.auth.mint_pairing_token)
        with httpx.Client(base_url=live.base_url) as client:
            for _ in range(3):
                guess = client.post("/v1/pair", json={"token": "guess"}, headers=guesser)
                _problem(guess, 401, "invalid_pairing_token")
            _problem(
                client.post("/v1/pair", json={"token": token}, headers=guesser), 429, "rate_limited"
            )
            paired = client.post("/v1/pair", json={"token": token}, headers=other)
            if other_limited:
                _problem(paired, 429, "rate_limited")
            else:
                assert paired.status_code == 200, paired.text


def test_auth_host_allowlist(servers: ServerFactory):
    """Only loopback names (any port) and --allow-host names are answered; others get 421."""
    live = servers.start(allow_hosts=("c2.example",))
    with httpx.Client(base_url=live.base_url) as client:
        for host in ("localhost", "127.0.0.1:9", "[::1]:4599", "LOCALHOST:1", "c2.example:80"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "127.0.0.1.nip.io", "c2.example.evil"):
            _problem(client.get("/healthz", headers={"Host": host}), 421, "host_not_allowed")
        _problem(client.get("/healthz", headers={"Host": "a b"}), 400, "invalid_host")


def test_auth_cors_closed_unless_origin_allowed(servers: ServerFactory):
    """Without --allow-origin no CORS headers are sent; with it, that origin is allowed."""
    preflight = {
        "Origin": "http://app.example",
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization",
    }
    closed = servers.start()
    with httpx.Client(base_url=closed.base_url) as client:
        resp = client.options("/v1/sessions", headers=preflight)
        assert "access-control-allow-origin" not in resp.headers
    opened = servers.start(allow_origins=("http://app.example",))
    with httpx.Client(base_url=opened.base_url) as client:
        resp = client.options("/v1/sessions", headers=preflight)
        assert resp.headers["access-control-allow-origin"] == "http://app.example"
        other = client.options("/v1/sessions", headers={**preflight, "Origin": "http://x.example"})
        assert other.headers.get("access-control-allow-origin") != "http://x.example"


def test_auth_devices_list_and_revoke(live_server: LiveServer):
    """Devices are listed with last_seen; revoking one kills its bearer; unknown is 404."""
    other = live_server.pair("phone")
    other_headers = {"Authorization": f"Bearer {other.bearer}"}
    with httpx.Client(base_url=live_server.base_url) as client:
        assert client.get("/v1/sessions", headers=other_headers).status_code == 200
        devices = client.get("/v1/devices", headers=live_server.headers).json()
        by_name = {d["name"]: d for d in devices}
        assert set(by_name) == {"tests", "phone"}
        assert set(by_name["phone"]) == {"id", "name", "created_at", "last_seen", "scopes"}
        assert by_name["phone"]["scopes"] == ["read", "approve", "operate", "admin"]
        assert by_name["phone"]["last_seen"] is not None
        assert by_name["phone"]["created_at"].endswith("Z")
        resp = client.delete(f"/v1/devices/{other.device_id}", headers=live_server.headers)
        assert resp.status_code == 204
        _problem(client.get("/v1/sessions", headers=other_headers), 401, "unauthorized")
        gone = client.delete(f"/v1/devices/{other.device_id}", headers=live_server.headers)
        _problem(gone, 404, "no_such_device")
        remaining = client.get("/v1/devices", headers=live_server.headers).json()
    assert [d["name"] for d in remaining] == ["tests"]


def test_auth_last_seen_is_flushed_in_batches(live_server: LiveServer):
    """Requests only mark a device seen in memory; the periodic flush persists it once."""
    auth = live_server.services.auth
    with httpx.Client(base_url=live_server.base_url, headers=live_server.headers) as client:
        for _ in range(5):
            assert client.get("/v1/sessions").status_code == 200
    assert live_server.call(auth.flush_last_seen) == 1
    assert live_server.call(auth.flush_last_seen) == 0
    (device,) = live_server.call(auth.list_devices)
    assert device.last_seen is not None


def _cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "c2.api.cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def test_auth_cli_serve_prints_pairing_url_and_pair_mints(tmp_path: Path):
    """`c2 serve` prints a one-time /pair#token= URL; `c2 pair` mints a bearer that works."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("C2_")}
    env["C2_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = str(REPO)
    proc = _cli("serve", "--port", "0", env=env)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any("#token=" in line for line in lines):
            lines.append(proc.stdout.readline())
        listen = next(line for line in lines if "listening on" in line).split()[-1]
        pair_url = next(line for line in lines if "#token=" in line).split()[-1]
        assert pair_url.startswith(f"{listen}/pair#token=")
        token = pair_url.split("#token=", 1)[1]
        assert (tmp_path / "home").stat().st_mode & 0o777 == 0o700
        with httpx.Client(base_url=listen) as client:
            assert "?" not in pair_url and client.get("/pair").status_code == 200
            assert client.post("/v1/pair", json={"token": token}).status_code == 200
            minted = subprocess.run(
                [sys.executable, "-m", "c2.api.cli", "pair", "--name", "ci"],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
            paired = json.loads(minted.stdout.strip())
            headers = {"Authorization": f"Bearer {paired['bearer']}"}
            assert client.get("/v1/sessions", headers=headers).status_code == 200
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) is not None


@pytest.mark.parametrize("concurrency", [8])
async def test_auth_pairing_token_single_use_under_race(live_server: LiveServer, concurrency: int):
    """Concurrent redemptions of one token mint exactly one device."""
    token = await live_server.acall(live_server.services.auth.mint_pairing_token)
    async with httpx.AsyncClient(base_url=live_server.base_url) as client:
        replies = await asyncio.gather(
            *(client.post("/v1/pair", json={"token": token}) for _ in range(concurrency))
        )
    assert sorted(r.status_code for r in replies) == [200] + [401] * (concurrency - 1)


def test_a_wildcard_bind_says_how_other_devices_reach_it(tmp_path: Path):
    """`--host 0.0.0.0` listens on every address: the announcement adds this machine's own
    (the address its route out uses), and the --allow-host that makes c2 answer it."""
    from c2.api.settings import outward_host

    env = {k: v for k, v in os.environ.items() if not k.startswith("C2_")}
    env["C2_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = str(REPO)
    outward = outward_host("0.0.0.0")
    if outward == "127.0.0.1":
        pytest.skip("this machine has no route out")
    proc = _cli("serve", "--host", "0.0.0.0", "--port", "0", env=env)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert lines[0].startswith("c2 listening on http://127.0.0.1:")
    port = lines[0].strip().rsplit(":", 1)[1]
    assert lines[1].strip() == (
        f"from other devices: http://{outward}:{port} "
        f"(answered once started with --allow-host {outward})"
    )
