"""One error tree without HTTP in core, one status table in api, one table of what each
operation answers, and problem responses whose `code` enums are exactly that table."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from c2.api.app import create_app
from c2.api.errors import STATUS, HttpProblem, problem_class, status_of
from c2.api.openapi import document, operation_id
from c2.api.openapi_problems import OWN_PROBLEMS, SUBMIT_OP, operation_problems
from c2.api.routes import ops as op_routes
from c2.core import errors as core_errors
from c2.core.errors import DomainError, SessionNotFoundError, WorktreeError
from tests.api.conftest import AppClient, DeclaredCodes
from tests.conftest import make_settings


def _subclasses(base: type[Any]) -> list[type[Any]]:
    found, stack = [], [base]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def _doc(tmp_path: Path) -> dict[str, Any]:
    return document(create_app(make_settings(tmp_path / "doc")))


def test_domain_errors_are_one_tree_without_http_statuses():
    """Every DomainError is defined in core/errors.py and none carries an HTTP status."""
    domain = [cls for cls in _subclasses(DomainError) if cls.__module__.startswith("c2.core")]
    assert {cls.__module__ for cls in domain} == {"c2.core.errors"}
    assert all("status" not in vars(cls) for cls in domain)
    assert not any(issubclass(cls, DomainError) for cls in _subclasses(HttpProblem))
    defined = {cls for _, cls in inspect.getmembers(core_errors, inspect.isclass)}
    assert set(domain) <= defined


def test_every_domain_code_has_its_status_in_the_api_table():
    """STATUS names each class that defines a code; subclasses answer their parent's."""
    for cls in _subclasses(DomainError):
        if cls.__module__.startswith("c2.core") and "code" in vars(cls):
            assert cls in STATUS, cls.__name__
    assert status_of(SessionNotFoundError("x")) == 404
    assert status_of(core_errors.BaselineChangedError) == status_of(WorktreeError) == 422


def test_each_code_names_one_problem_class():
    """The operation table is written in codes: each code finds the one class answering it
    (a class of STATUS or an HTTP-layer problem); an unknown code is no class."""
    classes: list[type[DomainError] | type[HttpProblem]] = [*STATUS, *HttpProblem.__subclasses__()]
    for cls in classes:
        assert problem_class(cls.code) is cls
    assert problem_class("no_such_session") is SessionNotFoundError
    with pytest.raises(KeyError):
        problem_class("no_such_code")


def test_every_operation_has_an_entry_in_the_problem_table(tmp_path: Path):
    """OWN_PROBLEMS lists exactly the published operations."""
    doc = _doc(tmp_path)
    ids = {op["operationId"] for item in doc["paths"].values() for op in item.values()}
    assert set(OWN_PROBLEMS) == ids


def test_problem_responses_enumerate_what_the_table_derives(tmp_path: Path):
    """Each problem response's `code` enum is the operation's derived codes of that status;
    an op route answers the dispatcher's codes and submitOp everything an op route does."""
    doc = _doc(tmp_path)
    schemas = doc["components"]["schemas"]
    op_ids = {operation_id(r) for r in op_routes.router.routes if isinstance(r, APIRoute)}
    op_ids.discard(SUBMIT_OP)
    assert {"prompt", "createSession", "answerPermission", "setMode"} <= op_ids
    ops = {op["operationId"]: (path, op) for path, it in doc["paths"].items() for op in it.values()}
    seen = 0
    for op_id, (path, operation) in ops.items():
        derived = operation_problems(path, operation, op_ids)
        declared = {s for s in operation["responses"] if s[0] in "45"}
        assert declared == set(derived), op_id
        for status, classes in derived.items():
            media = operation["responses"][status]["content"]["application/problem+json"]
            name = media["schema"]["$ref"].rsplit("/", 1)[-1]
            assert name == f"{op_id[0].upper()}{op_id[1:]}Problem{status}"
            assert schemas[name]["properties"]["code"]["enum"] == [c.code for c in classes]
            assert all(status_of(c) == int(status) for c in classes)
            seen += 1
        assert "application/problem+json" in operation["responses"]["default"]["content"]
    assert seen > 100
    submit = operation_problems(*ops[SUBMIT_OP], op_ids)
    for status, classes in operation_problems(*ops["prompt"], op_ids).items():
        assert set(classes) <= set(submit[status])
    assert "request_id_reused" in schemas["PromptProblem409"]["properties"]["code"]["enum"]
    assert "GetSessionProblem409" not in schemas
    assert schemas["GetSessionProblem404"]["properties"]["code"]["enum"] == ["no_such_session"]


def test_framed_problems_require_the_frame_only_when_always_framed(tmp_path: Path):
    """getTranscript's 404 is always a transcript_error frame; listSessions' 503 may also
    come from the credential check (no frame), so its frame members stay optional."""
    schemas = _doc(tmp_path)["components"]["schemas"]
    missing = schemas["GetTranscriptProblem404"]
    assert {"kind", "message", "session", "request_id"} <= set(missing["required"])
    assert missing["properties"]["kind"]["enum"] == ["transcript_error"]
    store = schemas["ListSessionsProblem503"]
    assert store["properties"]["kind"]["enum"] == ["sessions_error"]
    assert "kind" not in store["required"]


async def test_responses_are_checked_against_their_declared_codes(app_client: AppClient):
    """The in-process client checks every problem against its response's enum (conftest's
    DeclaredCodes): a declared code passes, an undeclared one fails the test."""
    hook = app_client.http.event_hooks["response"][0]
    assert type(hook).__name__ == DeclaredCodes.__name__  # conftest is imported twice
    missing = await app_client.http.get("/v1/sessions/nope")
    assert missing.status_code == 404 and vars(hook)["checked"] == 1
    request = httpx.Request("GET", "http://localhost/v1/sessions/nope")
    wrong = httpx.Response(
        404,
        headers={"content-type": "application/problem+json"},
        json={"code": "no_such_device"},
        request=request,
    )
    with pytest.raises(AssertionError, match="not among its declared codes"):
        await hook(wrong)
