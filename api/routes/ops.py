"""Op endpoints (docs/api.md §3): `POST /v1/ops` with a bare Op, and one resource endpoint per op.

Both build the same protocol Op and hand it to the one dispatcher, so behaviour and responses
are identical. `request_id` travels in the body; ops whose protocol model has no such field
still get idempotent retry from the body's `request_id`.

Over 300 lines: one short route per op of the protocol's union, plus `POST /v1/ops`; the
shared work is `OpCall` and the dispatcher.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Depends, Path, Request, Response
from pydantic import BaseModel, TypeAdapter

from c2.api.authn import DeviceDep, ServicesDep
from c2.api.dispatch import OpJSONResponse
from c2.api.openapi import Responses
from c2.api.schemas import (
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
from c2.api.scopes import PER_OP, needs
from c2.core.checkpoints import RewindResult
from c2.core.outcomes import (
    AnswerResult,
    CancelResult,
    ConfigResult,
    ModelResult,
    ModeResult,
    PolicyResult,
    PromptAccepted,
)
from c2.core.protocol.events import QueueItem
from c2.core.protocol.ops import (
    OP_TYPES,
    AnswerPermissionOp,
    CancelOp,
    EditQueuedOp,
    ForkOp,
    NewSessionOp,
    Op,
    PromptOp,
    QueuePromptOp,
    RemoveQueuedOp,
    ResumeQueueOp,
    RewindOp,
    SetConfigOptionOp,
    SetExecutionPolicyOp,
    SetModelOp,
    SetModeOp,
    SetPermissionModeOp,
    SetSandboxOp,
    op_tag,
)
from c2.core.protocol.state import SessionSnapshot
from c2.core.protocol.values import RequestId
from c2.core.queue import QueueView
from c2.core.scopes import Scope

router = APIRouter(prefix="/v1", tags=["ops"])
SessionPath = Annotated[str, Path(min_length=1, max_length=128, description="Session id")]
ItemPath = Annotated[str, Path(min_length=1, max_length=64, description="Queued prompt id")]
_REQUEST_ID: TypeAdapter[str] = TypeAdapter(RequestId)
# A route function; its return type is the op's outcome (its response_model).
Route = Callable[..., Awaitable[Any]]


T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class OpRoute:
    """What an op's resource route declares: its success status and the scope it needs."""

    status: int
    scope: Scope


# Each op's route, by the op's tag (filled by `op_route`; every op of the union has one).
OP_ROUTES: dict[str, OpRoute] = {}


class OpCall:
    """What every op route does with its op: hand it to the one dispatcher as the calling
    device (whose name records a permission answer), answer the outcome with the status the
    op's route declares and the dispatcher's headers (Request-Id, Location)."""

    def __init__(self, device: DeviceDep, services: ServicesDep, response: Response) -> None:
        self._device = device
        self._dispatcher = services.dispatcher
        self._response = response

    async def __call__(self, op: Op, outcome: type[T], request_id: str | None) -> T:
        status = OP_ROUTES[op.op].status
        result, headers = await self._dispatcher.dispatch(
            op,
            status,
            device_id=self._device.id,
            request_id=request_id,
            device_name=self._device.name,
        )
        if not isinstance(result, outcome):  # the engine's switch and the route disagree
            raise TypeError(f"{op.op} answered {type(result).__name__}, not {outcome.__name__}")
        self._response.status_code = status
        self._response.headers.update(headers)
        return result


async def op_call(device: DeviceDep, services: ServicesDep, response: Response) -> OpCall:
    """The request's OpCall, made on the loop (a class given to `Depends()` is called in the
    thread pool: api/authn.py)."""
    return OpCall(device, services, response)


OpCallDep = Annotated[OpCall, Depends(op_call)]


def op_route(
    op: type[BaseModel], method: str, path: str, *, status: int = 200, scope: Scope = Scope.OPERATE
) -> Callable[[Route], Route]:
    """The resource route of `op`: `method path`, answering its outcome (the route's return
    type) with `status`, needing `scope`; `POST /v1/ops` answers the op alike."""
    OP_ROUTES[op_tag(op)] = OpRoute(status, scope)
    return router.api_route(
        path,
        methods=[method],
        status_code=status,
        responses={status: {"description": "Op outcome"}},
        response_class=OpJSONResponse,
        openapi_extra=needs(scope),
    )


@op_route(NewSessionOp, "POST", "/sessions", status=201)
async def new_session(body: NewSessionBody, call: OpCallDep) -> SessionSnapshot:
    """Create a session; 201 with its snapshot (the durable creation receipt)."""
    return await call(body, SessionSnapshot, body.request_id)


@op_route(PromptOp, "POST", "/sessions/{session_id}/prompt", status=202)
async def prompt(session_id: SessionPath, body: PromptBody, call: OpCallDep) -> PromptAccepted:
    """Start a turn; 202 once `turn_started` was emitted."""
    op = PromptOp(session=session_id, doc=body.doc, request_id=body.request_id)
    return await call(op, PromptAccepted, body.request_id)


@op_route(CancelOp, "POST", "/sessions/{session_id}/cancel", status=202)
async def cancel(
    session_id: SessionPath,
    call: OpCallDep,
    body: Annotated[CorrelatedBody | None, Body()] = None,
) -> CancelResult:
    """Interrupt the running turn; `cancelled` is false when none was running."""
    request_id = body.request_id if body else None
    op = CancelOp(session=session_id)
    return await call(op, CancelResult, request_id)


@op_route(
    AnswerPermissionOp, "POST", "/sessions/{session_id}/permissions/{input_id}", scope=Scope.APPROVE
)
async def answer_permission(
    session_id: SessionPath,
    input_id: Annotated[str, Path(min_length=1, max_length=128)],
    body: AnswerBody,
    call: OpCallDep,
) -> AnswerResult:
    """Answer a parked permission request (`option_id: null` cancels it)."""
    op = AnswerPermissionOp(session=session_id, request_id=input_id, option_id=body.option_id)
    return await call(op, AnswerResult, None)


@op_route(SetExecutionPolicyOp, "PUT", "/sessions/{session_id}/execution-policy")
async def set_execution_policy(
    session_id: SessionPath, body: PolicyBody, call: OpCallDep
) -> PolicyResult:
    """Persist and apply both execution-policy axes atomically."""
    op = SetExecutionPolicyOp(
        session=session_id, mode=body.mode, sandbox=body.sandbox, request_id=body.request_id
    )
    return await call(op, PolicyResult, body.request_id)


@op_route(SetPermissionModeOp, "PUT", "/sessions/{session_id}/permission-mode")
async def set_permission_mode(
    session_id: SessionPath, body: PermissionModeBody, call: OpCallDep
) -> PolicyResult:
    """Legacy single-axis update, folded into the two-axis write."""
    op = SetPermissionModeOp(session=session_id, mode=body.mode)
    return await call(op, PolicyResult, body.request_id)


@op_route(SetSandboxOp, "PUT", "/sessions/{session_id}/sandbox")
async def set_sandbox(session_id: SessionPath, body: SandboxBody, call: OpCallDep) -> PolicyResult:
    """Legacy single-axis update, folded into the two-axis write."""
    op = SetSandboxOp(session=session_id, sandbox=body.sandbox)
    return await call(op, PolicyResult, body.request_id)


@op_route(SetModelOp, "PUT", "/sessions/{session_id}/model")
async def set_model(session_id: SessionPath, body: ModelBody, call: OpCallDep) -> ModelResult:
    """Set the session model (one of the snapshot's `models.available`)."""
    op = SetModelOp(session=session_id, model=body.model)
    return await call(op, ModelResult, body.request_id)


@op_route(SetModeOp, "PUT", "/sessions/{session_id}/mode")
async def set_mode(session_id: SessionPath, body: ModeBody, call: OpCallDep) -> ModeResult:
    """Switch the agent's ACP session mode (one of the snapshot's `modes.available`)."""
    op = SetModeOp(session=session_id, mode_id=body.mode_id, request_id=body.request_id)
    return await call(op, ModeResult, body.request_id)


@op_route(SetConfigOptionOp, "PUT", "/sessions/{session_id}/config-options/{config_id}")
async def set_config_option(
    session_id: SessionPath,
    config_id: Annotated[str, Path(min_length=1, max_length=256)],
    body: ConfigValueBody,
    call: OpCallDep,
) -> ConfigResult:
    """Set an agent-reported session config option."""
    op = SetConfigOptionOp(session=session_id, config_id=config_id, value=body.value)
    return await call(op, ConfigResult, body.request_id)


# -- issue 14: rewind, fork, the follow-up queue --------------------------------------------------


@op_route(RewindOp, "POST", "/sessions/{session_id}/rewind")
async def rewind(session_id: SessionPath, body: RewindBody, call: OpCallDep) -> RewindResult:
    """Restore the working tree to the state after a turn, or to any session checkpoint."""
    op = RewindOp(
        session=session_id,
        to_turn=body.to_turn,
        to_checkpoint=body.to_checkpoint,
        force=body.force,
        request_id=body.request_id,
    )
    return await call(op, RewindResult, body.request_id)


@op_route(ForkOp, "POST", "/sessions/{session_id}/fork", status=201)
async def fork_session(session_id: SessionPath, body: ForkBody, call: OpCallDep) -> SessionSnapshot:
    """A new session continuing this one from a turn; 201 with the child's snapshot."""
    op = ForkOp(
        session=session_id,
        at_turn=body.at_turn,
        use_worktree=body.use_worktree,
        request_id=body.request_id,
    )
    return await call(op, SessionSnapshot, body.request_id)


@op_route(QueuePromptOp, "POST", "/sessions/{session_id}/queue", status=201)
async def queue_prompt(session_id: SessionPath, body: QueueBody, call: OpCallDep) -> QueueItem:
    """Append a prompt to the queue; it starts at once when the session is idle and the
    queue is not paused, else after the turns before it end with `end_turn`."""
    op = QueuePromptOp(session=session_id, doc=body.doc, request_id=body.request_id)
    return await call(op, QueueItem, body.request_id)


@op_route(EditQueuedOp, "PATCH", "/sessions/{session_id}/queue/{item}")
async def edit_queued(
    session_id: SessionPath,
    item: ItemPath,
    body: QueueBody,
    call: OpCallDep,
) -> QueueItem:
    """Replace a waiting prompt's doc (its id and request_id are kept)."""
    op = EditQueuedOp(session=session_id, item=item, doc=body.doc, request_id=body.request_id)
    return await call(op, QueueItem, body.request_id)


@op_route(RemoveQueuedOp, "DELETE", "/sessions/{session_id}/queue/{item}")
async def remove_queued(
    session_id: SessionPath,
    item: ItemPath,
    call: OpCallDep,
    body: Annotated[CorrelatedBody | None, Body()] = None,
) -> QueueView:
    """Remove a waiting prompt; answers the queue as it now is."""
    request_id = body.request_id if body else None
    op = RemoveQueuedOp(session=session_id, item=item, request_id=request_id)
    return await call(op, QueueView, request_id)


@op_route(ResumeQueueOp, "POST", "/sessions/{session_id}/queue/resume")
async def resume_queue(
    session_id: SessionPath,
    call: OpCallDep,
    body: Annotated[CorrelatedBody | None, Body()] = None,
) -> QueueView:
    """Unpause the queue; its next prompt starts when the session is idle."""
    request_id = body.request_id if body else None
    op = ResumeQueueOp(session=session_id, request_id=request_id)
    return await call(op, QueueView, request_id)


# Every op of the protocol's union has its resource route: `POST /v1/ops` answers each
# with that route's status and needs that route's scope.
_UNROUTED = {op_tag(op) for op in OP_TYPES} - set(OP_ROUTES)
if _UNROUTED:
    raise RuntimeError(f"ops without a resource route: {', '.join(sorted(_UNROUTED))}")


_ANY_OUTCOME: Responses = {
    200: {"description": "Outcome of answer_permission / set_* / rewind / queue edits"},
    201: {"description": "new_session / fork: the session snapshot; queue_prompt: the item"},
    202: {"description": "prompt / cancel accepted"},
}


@router.post(
    "/ops",
    responses=_ANY_OUTCOME,
    status_code=200,
    response_model=None,
    response_class=OpJSONResponse,
    openapi_extra=needs(PER_OP, {tag: route.scope for tag, route in OP_ROUTES.items()}),
)
async def submit_op(op: Annotated[WireOp, Body()], request: Request, call: OpCallDep) -> BaseModel:
    """Submit a bare protocol Op (`{"op":"prompt",…}`); same outcome as its resource route."""
    request_id = getattr(op, "request_id", None)
    if request_id is None and not isinstance(op, AnswerPermissionOp):
        raw = await request.json()
        if isinstance(raw, dict) and raw.get("request_id") is not None:
            request_id = _REQUEST_ID.validate_python(raw["request_id"])
    return await call(op, BaseModel, request_id)
