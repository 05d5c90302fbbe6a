"""The op union is spelled once, in core/protocol/ops.py: the wire ops of `POST /v1/ops`, the op
routes (status and scope per op) and the engine's switch are derived from it or checked
against it."""

from __future__ import annotations

import typing

import pytest
from pydantic import TypeAdapter, ValidationError

from c2.api.routes.ops import OP_ROUTES
from c2.api.schemas import WireOp
from c2.core.protocol.ops import OP_TYPES, NewSessionOp, PromptOp, op_tag
from c2.core.scopes import Scope

WIRE: TypeAdapter[typing.Any] = TypeAdapter(WireOp)
DOC = [{"type": "text", "text": "hi"}]


def test_every_protocol_op_has_a_wire_op_that_is_that_op() -> None:
    """Each member of the protocol's union has one wire op, a subclass of it whose tag is
    required; the wire union holds nothing else."""
    members = typing.get_args(typing.get_args(WireOp)[0])
    assert len(members) == len(OP_TYPES)
    for op, wire in zip(OP_TYPES, members, strict=True):
        assert issubclass(wire, op)
        assert wire.__name__ == op.__name__.removesuffix("Op") + "WireOp"
        assert wire.model_fields["op"].is_required()
        assert wire.model_json_schema()["properties"]["op"]["const"] == op_tag(op)


def test_wire_ops_bound_documents_and_keep_the_protocol_rules() -> None:
    """A wire prompt is a PromptOp whose document the resource routes' bound applies to; a
    wire new_session keeps the body's provider teaching; a body naming no op is refused."""
    parsed = WIRE.validate_python({"op": "prompt", "session": "s", "doc": DOC})
    assert isinstance(parsed, PromptOp) and parsed.doc[0].text == "hi"  # type: ignore[union-attr]
    with pytest.raises(ValidationError):
        WIRE.validate_python({"op": "prompt", "session": "s", "doc": []})  # empty: refused
    with pytest.raises(ValidationError, match="custom or demo provider"):
        WIRE.validate_python(
            {"op": "new_session", "provider": "echo", "cwd": ".", "use_worktree": False}
        )
    created = WIRE.validate_python(
        {"op": "new_session", "provider": "codex", "cwd": ".", "use_worktree": False}
    )
    assert isinstance(created, NewSessionOp)
    with pytest.raises(ValidationError):
        WIRE.validate_python({"session": "s", "doc": DOC})


def test_every_op_has_its_route_status_and_scope() -> None:
    """The op routes cover the union exactly; only answering a permission needs `approve`,
    and creations answer 201, accepted turns and cancels 202."""
    assert set(OP_ROUTES) == {op_tag(op) for op in OP_TYPES}
    assert {tag for tag, r in OP_ROUTES.items() if r.scope is Scope.APPROVE} == {
        "answer_permission"
    }
    assert {tag for tag, r in OP_ROUTES.items() if r.status == 201} == {
        "new_session",
        "fork",
        "queue_prompt",
    }
    assert {tag for tag, r in OP_ROUTES.items() if r.status == 202} == {"prompt", "cancel"}
