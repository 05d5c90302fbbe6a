"""Op endpoints (API.md §3): `POST /v1/ops` with a bare Op, and one resource endpoint per op.

Both build the same protocol Op and hand it to the one dispatcher, so behaviour and responses
are identical. `request_id` travels in the body; ops whose protocol model has no such field
still get idempotent retry from the body's `request_id`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Request, Response
from pydantic import TypeAdapter

from api.authn import DeviceDep, ServicesDep
from api.openapi import Responses
from api.schemas import (
    AnswerBody,
    ConfigValueBody,
    CorrelatedBody,
    ForkBody,
    ModeBody,
    ModelBody,
    NewSessionBody,
    PermissionModeBody,
    PolicyBody,
    PromptBody,
    QueueBody,
    RewindBody,
    SandboxBody,
    WireOp,
)
from api.scopes import PER_OP, needs
from core.checkpoints import RewindResult
from core.outcomes import (
    AnswerResult,
    CancelResult,
    ConfigResult,
    ModelResult,
    ModeResult,
    PolicyResult,
    PromptAccepted,
)
from core.protocol import (
    AnswerPermissionOp,
    CancelOp,
    EditQueuedOp,
    ForkOp,
    Op,
    PromptOp,
    QueueItem,
    QueuePromptOp,
    RemoveQueuedOp,
    RequestId,
    ResumeQueueOp,
    RewindOp,
    SessionSnapshot,
    SetConfigOptionOp,
    SetExecutionPolicyOp,
    SetModelOp,
    SetModeOp,
    SetPermissionModeOp,
    SetSandboxOp,
)
from core.queue import QueueView
from core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["ops"])
SessionPath = Annotated[str, Path(min_length=1, max_length=128, description="Session id")]
ItemPath = Annotated[str, Path(min_length=1, max_length=64, description="Queued prompt id")]
_REQUEST_ID: TypeAdapter[str] = TypeAdapter(RequestId)


class OpCall:
    """What every op route does with its op: hand it to the one dispatcher as the calling
    device (whose name records a permission answer)."""

    def __init__(self, device: DeviceDep, services: ServicesDep) -> None:
        self._device = device
        self._dispatcher = services.dispatcher

    async def __call__(self, op: Op, request_id: str | None) -> Response:
        device = self._device
        return await self._dispatcher.dispatch(
            op, device_id=device.id, request_id=request_id, device_name=device.name
        )


OpCallDep = Annotated[OpCall, Depends()]


def _ok(model: type[Any], status: int = 200) -> Responses:
    return {status: {"model": model, "description": "Op outcome"}}


_ANY_OUTCOME: Responses = {
    200: {"description": "Outcome of answer_permission / set_* / rewind / queue edits"},
    201: {"description": "new_session / fork: the session snapshot; queue_prompt: the item"},
    202: {"description": "prompt / cancel accepted"},
}


@router.post("/ops", responses=_ANY_OUTCOME, status_code=200, openapi_extra=needs(PER_OP))
async def submit_op(op: Annotated[WireOp, Body()], request: Request, call: OpCallDep) -> Response:
    """Submit a bare protocol Op (`{"op":"prompt",…}`); same outcome as its resource route."""
    request_id = getattr(op, "request_id", None)
    if request_id is None and not isinstance(op, AnswerPermissionOp):
        raw = await request.json()
        if isinstance(raw, dict) and raw.get("request_id") is not None:
            request_id = _REQUEST_ID.validate_python(raw["request_id"])
    return await call(op, request_id)


@router.post(
    "/sessions",
    status_code=201,
    responses=_ok(SessionSnapshot, 201),
    openapi_extra=needs(Scope.OPERATE),
)
async def new_session(body: NewSessionBody, call: OpCallDep) -> Response:
    """Create a session; 201 with its snapshot (the durable creation receipt)."""
    return await call(body, body.request_id)


@router.post(
    "/sessions/{session_id}/prompt",
    status_code=202,
    responses=_ok(PromptAccepted, 202),
    openapi_extra=needs(Scope.OPERATE),
)
async def prompt(session_id: SessionPath, body: PromptBody, call: OpCallDep) -> Response:
    """Start a turn; 202 once `turn_started` was emitted."""
    op = PromptOp(session=session_id, doc=body.doc, request_id=body.request_id)
    return await call(op, body.request_id)


@router.post(
    "/sessions/{session_id}/cancel",
    status_code=202,
    responses=_ok(CancelResult, 202),
    openapi_extra=needs(Scope.OPERATE),
)
async def cancel(
    session_id: SessionPath,
    call: OpCallDep,
    body: Annotated[CorrelatedBody | None, Body()] = None,
) -> Response:
    """Interrupt the running turn; `cancelled` is false when none was running."""
    request_id = body.request_id if body else None
    op = CancelOp(session=session_id)
    return await call(op, request_id)


@router.post(
    "/sessions/{session_id}/permissions/{input_id}",
    responses=_ok(AnswerResult),
    openapi_extra=needs(Scope.APPROVE),
)
async def answer_permission(
    session_id: SessionPath,
    input_id: Annotated[str, Path(min_length=1, max_length=128)],
    body: AnswerBody,
    call: OpCallDep,
) -> Response:
    """Answer a parked permission request (`option_id: null` cancels it)."""
    op = AnswerPermissionOp(session=session_id, request_id=input_id, option_id=body.option_id)
    return await call(op, None)


@router.put(
    "/sessions/{session_id}/execution-policy",
    responses=_ok(PolicyResult),
    openapi_extra=needs(Scope.OPERATE),
)
async def set_execution_policy(
    session_id: SessionPath, body: PolicyBody, call: OpCallDep
) -> Response:
    """Persist and apply both execution-policy axes atomically."""
    op = SetExecutionPolicyOp(
        session=session_id, mode=body.mode, sandbox=body.sandbox, request_id=body.request_id
    )
    return await call(op, body.request_id)


@router.put(
    "/sessions/{session_id}/permission-mode",
    responses=_ok(PolicyResult),
    openapi_extra=needs(Scope.OPERATE),
)
async def set_permission_mode(
    session_id: SessionPath, body: PermissionModeBody, call: OpCallDep
) -> Response:
    """Legacy single-axis update, folded into the two-axis write."""
    op = SetPermissionModeOp(session=session_id, mode=body.mode)
    return await call(op, body.request_id)


@router.put(
    "/sessions/{session_id}/sandbox",
    responses=_ok(PolicyResult),
    openapi_extra=needs(Scope.OPERATE),
)
async def set_sandbox(session_id: SessionPath, body: SandboxBody, call: OpCallDep) -> Response:
    """Legacy single-axis update, folded into the two-axis write."""
    op = SetSandboxOp(session=session_id, sandbox=body.sandbox)
    return await call(op, body.request_id)


@router.put(
    "/sessions/{session_id}/model", responses=_ok(ModelResult), openapi_extra=needs(Scope.OPERATE)
)
async def set_model(session_id: SessionPath, body: ModelBody, call: OpCallDep) -> Response:
    """Set the session model (one of the snapshot's `models.available`)."""
    op = SetModelOp(session=session_id, model=body.model)
    return await call(op, body.request_id)


@router.put(
    "/sessions/{session_id}/mode", responses=_ok(ModeResult), openapi_extra=needs(Scope.OPERATE)
)
async def set_mode(session_id: SessionPath, body: ModeBody, call: OpCallDep) -> Response:
    """Switch the agent's ACP session mode (one of the snapshot's `modes.available`)."""
    op = SetModeOp(session=session_id, mode_id=body.mode_id, request_id=body.request_id)
    return await call(op, body.request_id)


@router.put(
    "/sessions/{session_id}/config-options/{config_id}",
    responses=_ok(ConfigResult),
    openapi_extra=needs(Scope.OPERATE),
)
async def set_config_option(
    session_id: SessionPath,
    config_id: Annotated[str, Path(min_length=1, max_length=256)],
    body: ConfigValueBody,
    call: OpCallDep,
) -> Response:
    """Set an agent-reported session config option."""
    op = SetConfigOptionOp(session=session_id, config_id=config_id, value=body.value)
    return await call(op, body.request_id)


# -- issue 14: rewind, fork, the follow-up queue --------------------------------------------------


@router.post(
    "/sessions/{session_id}/rewind",
    responses=_ok(RewindResult),
    openapi_extra=needs(Scope.OPERATE),
)
async def rewind(session_id: SessionPath, body: RewindBody, call: OpCallDep) -> Response:
    """Restore the working tree to the state after a turn, or to any session checkpoint."""
    op = RewindOp(
        session=session_id,
        to_turn=body.to_turn,
        to_checkpoint=body.to_checkpoint,
        force=body.force,
        request_id=body.request_id,
    )
    return await call(op, body.request_id)


@router.post(
    "/sessions/{session_id}/fork",
    status_code=201,
    responses=_ok(SessionSnapshot, 201),
    openapi_extra=needs(Scope.OPERATE),
)
async def fork_session(session_id: SessionPath, body: ForkBody, call: OpCallDep) -> Response:
    """A new session continuing this one from a turn; 201 with the child's snapshot."""
    op = ForkOp(
        session=session_id,
        at_turn=body.at_turn,
        use_worktree=body.use_worktree,
        request_id=body.request_id,
    )
    return await call(op, body.request_id)


@router.post(
    "/sessions/{session_id}/queue",
    status_code=201,
    responses=_ok(QueueItem, 201),
    openapi_extra=needs(Scope.OPERATE),
)
async def queue_prompt(session_id: SessionPath, body: QueueBody, call: OpCallDep) -> Response:
    """Append a prompt to the queue; it starts at once when the session is idle and the
    queue is not paused, else after the turns before it end with `end_turn`."""
    op = QueuePromptOp(session=session_id, doc=body.doc, request_id=body.request_id)
    return await call(op, body.request_id)


@router.patch(
    "/sessions/{session_id}/queue/{item}",
    responses=_ok(QueueItem),
    openapi_extra=needs(Scope.OPERATE),
)
async def edit_queued(
    session_id: SessionPath,
    item: ItemPath,
    body: QueueBody,
    call: OpCallDep,
) -> Response:
    """Replace a waiting prompt's doc (its id and request_id are kept)."""
    op = EditQueuedOp(session=session_id, item=item, doc=body.doc, request_id=body.request_id)
    return await call(op, body.request_id)


@router.delete(
    "/sessions/{session_id}/queue/{item}",
    responses=_ok(QueueView),
    openapi_extra=needs(Scope.OPERATE),
)
async def remove_queued(
    session_id: SessionPath,
    item: ItemPath,
    call: OpCallDep,
    body: Annotated[CorrelatedBody | None, Body()] = None,
) -> Response:
    """Remove a waiting prompt; answers the queue as it now is."""
    request_id = body.request_id if body else None
    op = RemoveQueuedOp(session=session_id, item=item, request_id=request_id)
    return await call(op, request_id)


@router.post(
    "/sessions/{session_id}/queue/resume",
    responses=_ok(QueueView),
    openapi_extra=needs(Scope.OPERATE),
)
async def resume_queue(
    session_id: SessionPath,
    call: OpCallDep,
    body: Annotated[CorrelatedBody | None, Body()] = None,
) -> Response:
    """Unpause the queue; its next prompt starts when the session is idle."""
    request_id = body.request_id if body else None
    op = ResumeQueueOp(session=session_id, request_id=request_id)
    return await call(op, request_id)
