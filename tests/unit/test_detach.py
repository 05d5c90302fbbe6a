"""A response detached from the request's machinery (api/detach.py), over plain ASGI apps."""

from __future__ import annotations

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from c2.api.detach import DETACH, Detacher


class Recorder:
    """The server's side: what was sent, and the order things happened in."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.steps: list[str] = []

    async def receive(self) -> Message:
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)


def with_header(app: ASGIApp, recorder: Recorder) -> ASGIApp:
    """A middleware between the two whose send wrapper adds a header to the response start,
    and that notes when its own call returns."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message["headers"], (b"x-wrapped", b"yes")]
            await send(message)

        scope["added.by.middleware"] = object()
        await app(scope, receive, wrapped)
        recorder.steps.append("chain returned")

    return middleware


def detaching_endpoint(recorder: Recorder, seen: list[Scope]) -> ASGIApp:
    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        async def respond() -> None:
            recorder.steps.append("job ran")
            seen.append(dict(scope))
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"late", "more_body": False})

        scope[DETACH](respond)

    return endpoint


def http_scope() -> Scope:
    return {"type": "http", "method": "GET", "path": "/v1/events", "headers": []}


async def test_a_detached_job_runs_after_the_chain_returned_through_its_send_wrappers():
    """The job runs once every middleware below the detacher has returned, and still sends
    through their wrappers; the scope it sees holds only what the server gave."""
    recorder, seen = Recorder(), list[Scope]()
    app = Detacher(with_header(detaching_endpoint(recorder, seen), recorder))
    scope = http_scope()
    await app(scope, recorder.receive, recorder.send)
    assert recorder.steps == ["chain returned", "job ran"]
    start, body = recorder.sent
    assert (b"x-wrapped", b"yes") in start["headers"]
    assert body["body"] == b"late"
    assert set(seen[0]) == {"type", "method", "path", "headers"}
    assert scope == http_scope()  # the server's own scope, as it gave it


async def test_a_request_that_fails_runs_no_detached_job():
    """An exception after a job was handed over propagates, and the job never runs."""
    recorder, seen = Recorder(), list[Scope]()
    endpoint = detaching_endpoint(recorder, seen)

    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        await endpoint(scope, receive, send)
        raise RuntimeError("failed after detaching")

    scope = http_scope()
    with pytest.raises(RuntimeError):
        await Detacher(failing)(scope, recorder.receive, recorder.send)
    assert recorder.steps == [] and recorder.sent == []
    assert DETACH not in scope


async def test_requests_that_detach_nothing_pass_through_untouched():
    """A plain response is served in place; the scope keeps what the app added to it."""
    recorder = Recorder()

    async def plain(scope: Scope, receive: Receive, send: Send) -> None:
        scope["added"] = True
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    scope = http_scope()
    await Detacher(plain)(scope, recorder.receive, recorder.send)
    assert [m["type"] for m in recorder.sent] == ["http.response.start", "http.response.body"]
    assert scope["added"] is True and DETACH not in scope
