"""Device scopes and the answer audit through a real `c2 serve` (issue 15, part 4).

The 403 checks are generated from the server's own OpenAPI document: every /v1 operation
must declare its scope (`x-c2-scope`), and a device outside it is refused with
`insufficient_scope` before the body or the path is looked at, so a route added later
cannot forget its scope.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.harness import REPO, C2Process, Client, EventReader

SCOPES = ("read", "approve", "operate", "admin")
METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Device:
    device_id: str
    bearer: str
    scopes: list[str]


def c2_pair(server: C2Process, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "c2.api.cli",
            "pair",
            "--name",
            name,
            "--home",
            str(server.home),
            *extra,
        ],
        cwd=REPO,
        env=server._env(),
        capture_output=True,
        text=True,
        timeout=30,
    )


def pair(server: C2Process, name: str, scopes: str) -> Device:
    out = c2_pair(server, name, "--scopes", scopes)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return Device(data["device_id"], data["bearer"], data["scopes"])


@pytest.fixture(scope="module")
def devices(c2: C2Process) -> dict[str, Device]:
    return {
        "read": pair(c2, "reader", "read"),
        "approve": pair(c2, "phone", "approve"),
        "read,approve": pair(c2, "watcher", "read,approve"),
    }


@pytest.fixture(scope="module")
def openapi(c2: C2Process) -> dict[str, Any]:
    doc: dict[str, Any] = httpx.get(f"{c2.base_url}/openapi.json", timeout=10).json()
    return doc


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every authenticated /v1 operation of the document: (method, path, operation)."""
    for path, item in sorted(doc["paths"].items()):
        for method in METHODS:
            op = item.get(method)
            if op is None or not path.startswith("/v1/"):
                continue
            if op.get("security") == []:
                continue  # POST /v1/pair: unauthenticated by design
            yield method, path, op


def concrete(path: str, *, device_id: str = "someone-else") -> str:
    """The path with every parameter filled (device ids name another device)."""
    path = path.replace("{device_id}", device_id)
    return re.sub(r"\{[^}]+\}", "no-such-thing", path)


async def as_device(c2: C2Process, device: Device) -> Client:
    client = Client(c2)
    client.http.headers["Authorization"] = f"Bearer {device.bearer}"
    return client


@pytest.fixture
async def clients(c2: C2Process, devices: dict[str, Device]) -> AsyncIterator[dict[str, Client]]:
    made = {name: await as_device(c2, device) for name, device in devices.items()}
    yield made
    for client in made.values():
        await client.aclose()


def refused(resp: httpx.Response) -> None:
    assert resp.status_code == 403, (resp.request.method, resp.request.url, resp.text)
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert resp.json()["code"] == "insufficient_scope"


def test_scopes_every_route_declares_a_scope(openapi: dict[str, Any]) -> None:
    """Each authenticated /v1 operation of the OpenAPI document declares a known scope."""
    undeclared = [
        f"{m.upper()} {p}"
        for m, p, op in operations(openapi)
        if op.get("x-c2-scope") not in (*SCOPES, "self_or_admin", "per_op")
    ]
    assert not undeclared, f"routes without a scope declaration: {undeclared}"
    ops = openapi["paths"]["/v1/ops"]["post"]
    tags = ops["requestBody"]["content"]["application/json"]["schema"]["discriminator"]
    assert set(ops["x-c2-op-scopes"]) == set(tags["mapping"])  # every op has its scope


@pytest.mark.parametrize("held", ["read", "approve"])
async def test_scopes_every_route_outside_a_device_scopes_is_403(
    openapi: dict[str, Any], clients: dict[str, Client], held: str
) -> None:
    """A read-only and an approve-only device get 403 `insufficient_scope` on every route
    (and every op of POST /v1/ops) outside their scope, with a body that would not even
    validate, naming things that do not exist: the scope is checked first."""
    client = clients[held].http
    checked = 0
    for method, path, op in operations(openapi):
        need = op["x-c2-scope"]
        if need == "per_op":
            for tag, op_scope in op["x-c2-op-scopes"].items():
                if op_scope != held:
                    refused(await client.post(path, json={"op": tag, "bogus": [1]}))
                    checked += 1
            refused(await client.post(path, content=b"{not json"))  # no op to name: operate
            continue
        if need == held:
            continue
        # self_or_admin: another device's id (revoking oneself is allowed, tested below).
        url = concrete(path)
        refused(await client.request(method.upper(), url, content=b"{not json"))
        checked += 1
    assert checked >= 20  # the document really was walked


async def test_scopes_a_route_inside_the_scope_passes_the_check(
    clients: dict[str, Client],
) -> None:
    """Within its scope a device reaches validation and lookup (no 403): the check is not a
    blanket refusal."""
    read, approve = clients["read"].http, clients["approve"].http
    assert (await read.get("/v1/sessions")).status_code == 200
    assert (await read.get("/v1/sessions/no-such-thing")).status_code == 404
    assert (await read.post("/v1/stream-tickets")).status_code == 200
    resp = await approve.post("/v1/sessions/no-such/permissions/nope", json={"option_id": None})
    assert resp.json()["code"] == "no_such_session"  # looked up, not refused
    bad = await approve.post("/v1/ops", json={"op": "answer_permission"})
    assert bad.status_code == 422  # its own op: validated, not refused


def test_scopes_pair_cli_mints_the_given_scopes_and_rejects_unknown(c2: C2Process) -> None:
    """`c2 pair --scopes` mints those scopes (all four without it); an unknown name is an
    error naming it, and no device is created."""
    assert pair(c2, "both", "approve, read").scopes == ["read", "approve"]
    full = c2_pair(c2, "full")
    assert json.loads(full.stdout.strip().splitlines()[-1])["scopes"] == list(SCOPES)
    bad = c2_pair(c2, "bad", "--scopes", "read,sudo")
    assert bad.returncode == 2 and "'sudo'" in bad.stderr and bad.stdout == ""
    listed = httpx.get(
        f"{c2.base_url}/v1/devices", headers={"Authorization": f"Bearer {c2.bearer}"}
    ).json()
    by_name = {d["name"]: d["scopes"] for d in listed}
    assert by_name["both"] == ["read", "approve"] and by_name["full"] == list(SCOPES)
    assert "bad" not in by_name


async def test_scopes_a_device_without_admin_revokes_only_itself(c2: C2Process) -> None:
    """Without `admin` a device cannot revoke another (403) but can revoke itself."""
    mine, other = pair(c2, "mine", "read"), pair(c2, "other", "read")
    client = await as_device(c2, mine)
    try:
        refused(await client.http.delete(f"/v1/devices/{other.device_id}"))
        assert (await client.http.delete(f"/v1/devices/{mine.device_id}")).status_code == 204
        assert (await client.http.get("/v1/sessions")).status_code == 401
    finally:
        await client.aclose()
    admin = Client(c2)
    try:
        assert (await admin.http.delete(f"/v1/devices/{other.device_id}")).status_code == 204
    finally:
        await admin.aclose()


async def test_scopes_permission_answers_record_the_answering_device(
    c2: C2Process,
    client: Client,
    clients: dict[str, Client],
    devices: dict[str, Device],
    workdir: Path,
) -> None:
    """An answer from an approve-only device (over POST /v1/ops) is recorded as that device
    in `permission_resolved` and the transcript; one drained by a cancel has answered_by null."""
    phone, watcher = clients["approve"], clients["read,approve"]
    sid = (await client.new_session(workdir))["id"]
    async with EventReader(watcher, session=sid) as stream:  # a read,approve device watches
        await stream.frame()
        assert (await client.prompt(sid, "/permission edit Edit the file")).status_code == 202
        req = await stream.until_event("permission_request")
        answer = {"op": "answer_permission", "session": sid, "request_id": req["request_id"]}
        resp = await phone.http.post("/v1/ops", json={**answer, "option_id": "allow"})
        assert resp.status_code == 200, resp.text
        resolved = await stream.until_event("permission_resolved")
        assert resolved == {
            "event": "permission_resolved",
            "session": sid,
            "request_id": req["request_id"],
            "option_id": "allow",
            "answered_by": {"device_id": devices["approve"].device_id, "name": "phone"},
            "transcript_seq": resolved["transcript_seq"],
        }
        await stream.until_event("turn_ended")

        assert (await client.prompt(sid, "/permission edit Second")).status_code == 202
        second = await stream.until_event("permission_request")
        assert (await client.http.post(f"/v1/sessions/{sid}/cancel")).status_code == 202
        drained = await stream.until_event("permission_resolved")
        assert drained["request_id"] == second["request_id"]
        assert drained["option_id"] is None and drained["answered_by"] is None
        await stream.until_event("turn_ended")
    page = (await watcher.http.get(f"/v1/sessions/{sid}/transcript")).json()
    parts = [e["part"] for e in page["entries"] if e["part"]["kind"] == "permission"]
    assert parts == [
        {
            "kind": "permission",
            "input_id": req["request_id"],
            "title": "Edit the file",
            "option_id": "allow",
            "answered_by": {"device_id": devices["approve"].device_id, "name": "phone"},
        },
        {
            "kind": "permission",
            "input_id": second["request_id"],
            "title": "Second",
            "option_id": None,
            "answered_by": None,
        },
    ]
