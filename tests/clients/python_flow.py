"""A client developer's flow with the generated Python client (`c2_client`), against a live c2.

Run by tests/clients/test_generated_clients.py as `python python_flow.py BASE_URL PAIR_URL`
with the generated package importable; prints one JSON summary line. Pairs, creates a demo
session, prompts, reads typed frames until `turn_ended`, pages the transcript, gets typed
problems for a 404 and a 409, and calls the ops whose body is optional (`cancel`,
`resume_queue`, `remove_queued`) without one. The stream is read with httpx (the generated
client cannot stream) and each `data:` is parsed with the generated frame models.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any

import httpx
from c2_client import AuthenticatedClient, Client
from c2_client.api.devices import pair
from c2_client.api.sessions import (
    answer_permission,
    cancel,
    create_session,
    get_session,
    get_transcript,
    prompt,
    remove_queued,
    resume_queue,
)
from c2_client.models import (
    AnswerBody,
    AnswerPermissionProblem409,
    CancelResult,
    CustomProvider,
    EventFrame,
    GetSessionProblem404,
    NewSessionBody,
    PairRequest,
    PairResponse,
    PromptAccepted,
    PromptBody,
    QueueView,
    RemoveQueuedProblem404,
    ResyncFrame,
    SessionsErrorFrame,
    SessionsFrame,
    SessionSnapshot,
    TextBlock,
    TranscriptPage,
    TurnEnded,
)

FRAMES: dict[str, Any] = {
    "sessions": SessionsFrame,
    "event": EventFrame,
    "resync": ResyncFrame,
    "sessions_error": SessionsErrorFrame,
}


def frames(base_url: str, bearer: str, session: str) -> Any:
    """Typed frames of `GET /v1/events?session=` (an httpx SSE reader)."""
    headers = {"Authorization": f"Bearer {bearer}"}
    with httpx.stream(
        "GET", f"{base_url}/v1/events", params={"session": session}, headers=headers, timeout=30
    ) as resp:
        for line in resp.iter_lines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                yield FRAMES[data["kind"]].from_dict(data)


def bodiless(api: AuthenticatedClient, session: str) -> list[list[Any]]:
    """The ops whose body is optional, called without one (an idle session): a cancel that
    stopped nothing, a resume, the removal of an item that is not queued."""
    stopped = cancel.sync(session, client=api)
    assert isinstance(stopped, CancelResult), stopped
    resumed = resume_queue.sync(session, client=api)
    assert isinstance(resumed, QueueView), resumed
    missing = remove_queued.sync(session, "not-queued", client=api)
    assert isinstance(missing, RemoveQueuedProblem404), missing
    return [
        ["cancel", stopped.cancelled],
        ["resume_queue", resumed.paused],
        ["remove_queued", missing.code],
    ]


def main(base_url: str, pair_url: str) -> dict[str, Any]:
    token = pair_url.split("#token=", 1)[1]
    paired = pair.sync(client=Client(base_url=base_url), body=PairRequest(token=token))
    assert isinstance(paired, PairResponse), paired
    api = AuthenticatedClient(base_url=base_url, token=paired.bearer)
    body = NewSessionBody(
        provider=CustomProvider(custom="echo"), cwd=tempfile.gettempdir(), use_worktree=False
    )
    session = create_session.sync(client=api, body=body)
    assert isinstance(session, SessionSnapshot), session
    kinds: list[str] = []
    stream = frames(base_url, paired.bearer, session.id)
    first = next(stream)
    assert isinstance(first, SessionsFrame), first
    doc = [TextBlock(type_="text", text="hello from python")]
    accepted = prompt.sync(session.id, client=api, body=PromptBody(doc=doc))
    assert isinstance(accepted, PromptAccepted), accepted
    for frame in stream:
        assert isinstance(frame, EventFrame), frame
        kinds.append(frame.event.event)
        if isinstance(frame.event, TurnEnded):
            break
    stream.close()
    page = get_transcript.sync(session.id, client=api, limit=10)
    assert isinstance(page, TranscriptPage), page
    missing = get_session.sync("no-such-session", client=api)
    assert isinstance(missing, GetSessionProblem404), missing
    conflict = answer_permission.sync(
        session.id, "not-pending", client=api, body=AnswerBody(option_id=None)
    )
    assert isinstance(conflict, AnswerPermissionProblem409), conflict
    return {
        "bodiless": bodiless(api, session.id),
        "events": kinds,
        "stop_reason": str(frame.event.stop_reason),
        "transcript_roles": [str(e.role) for e in page.entries],
        "problems": [[missing.status, missing.code], [conflict.status, conflict.code]],
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
